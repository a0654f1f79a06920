"""Retention heatmaps: one plotly heatmap per memory config, side by side on the same axes.

Rows are turns, columns every message written before them (oldest → newest); a cell's colour is
the ledger's reason — kept, or why it was left out — and hovering it names the message, its
tokens and the reason in plain words. A cell's value is the reason's index in
:data:`core.report.html.REASON_ORDER` (``layout.meta.reasons`` says so in the figure itself), so the
figure's data can be read back and checked against the ledgers.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Callable, Sequence
from html import escape

import plotly.graph_objects as go
import streamlit as st

from core.analysis.compare import Comparison, RetentionMatrix
from core.memory import explain
from core.model import REASON_LABELS, LedgerEntry
from core.report import REASON_COLOURS, REASON_ORDER

_CODES = {r: i for i, r in enumerate(REASON_ORDER)}


def _colorscale() -> list:
    n = len(REASON_ORDER)
    scale = []
    for i, reason in enumerate(REASON_ORDER):
        scale.append([i / n, REASON_COLOURS[reason]])
        scale.append([(i + 1) / n, REASON_COLOURS[reason]])
    return scale


HOVER_WIDTH = 48  # characters per hover line: a long message must not run out of the chart


def wrap(text: str, width: int = HOVER_WIDTH) -> str:
    """Escaped text in lines of at most ``width`` characters (at spaces), joined with ``<br>``."""
    return "<br>".join(escape(line) for line in textwrap.wrap(text, width, break_long_words=True) or [""])


def column_labels(matrix: RetentionMatrix) -> list[str]:
    """One unique label per column: its number, turn, role and first words (escaped for hovers)."""
    return [wrap(f"#{c.column + 1} · {c.label or f'turn {c.turn}'} · {c.role}: {c.text}") for c in matrix.columns]


def _why(matrix: RetentionMatrix, r: int, c: int) -> str:
    reason = matrix.cells[r][c]
    col = matrix.columns[c]
    entry = LedgerEntry(
        ref=col.ref,
        turn=col.turn,
        role=col.role,
        tokens=matrix.tokens[c],
        kept=reason == "kept",
        reason=reason,
        kind=col.kind,
        position=col.position,
        index=col.index,
    )
    return wrap(
        f"{matrix.tokens[c]:,} tokens — {REASON_LABELS.get(reason, reason)}: "
        f"{explain(entry, {**matrix.config, 'budget': matrix.budgets[r]})}"
    )


def row_labels(rows: Sequence[int], name: Callable[[int], str] | None = None) -> list[str]:
    """The heatmap's row labels: each turn as ``name`` calls it ("turn 2 · 3/3"), with its number
    added where two rows would read alike (a place reached on two branches), else "turn N"."""
    if name is None:
        return [f"turn {t}" for t in rows]
    labels = [name(t) for t in rows]
    twice = {x for x, n in Counter(labels).items() if n > 1}
    return [f"{x} (#{t})" if x in twice else x for x, t in zip(labels, rows)]


def heatmap_figure(
    matrix: RetentionMatrix, *, selected_turn: int | None = None, name: Callable[[int], str] | None = None
) -> go.Figure:
    """One config's retention heatmap (see the module docstring); ``name`` names its rows' turns."""
    z = [[_CODES[x] if x is not None else None for x in row] for row in matrix.cells]
    why = [
        [_why(matrix, r, c) if x is not None else "" for c, x in enumerate(row)] for r, row in enumerate(matrix.cells)
    ]
    x = column_labels(matrix)
    y = row_labels(matrix.rows, name)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=x,
            y=y,
            customdata=why,
            colorscale=_colorscale(),
            zmin=-0.5,
            zmax=len(REASON_ORDER) - 0.5,
            showscale=False,
            xgap=1,
            ygap=1,
            hoverongaps=False,
            name=escape(matrix.label),
            hovertemplate="%{y} · %{x}<br>%{customdata}<extra>" + escape(matrix.label) + "</extra>",
        )
    )
    if selected_turn in matrix.rows:
        r = matrix.rows.index(selected_turn)
        fig.add_shape(
            type="rect",
            xref="paper",
            x0=0,
            x1=1,
            yref="y",
            y0=r - 0.5,
            y1=r + 0.5,
            line=dict(color="#111827", width=2),
            fillcolor="rgba(0,0,0,0)",
        )
    fig.update_layout(
        title=dict(text=escape(matrix.label), font=dict(size=14)),
        height=min(900, max(240, 70 + 16 * len(y))),
        margin=dict(l=10, r=10, t=36, b=30),
        meta={
            "reasons": list(REASON_ORDER),
            "label": matrix.label,
            "rows": matrix.rows,
            "hidden_kept": matrix.hidden_kept,
        },
        xaxis=dict(
            showticklabels=False,
            title=dict(text="earlier messages, oldest → newest", font=dict(size=11)),
            type="category",
        ),
        yaxis=dict(autorange="reversed", type="category", tickfont=dict(size=10)),
    )
    return fig


def legend_html(comparison: Comparison) -> str:
    """Coloured chips for the reasons that appear (fixed words only: nothing from the conversation)."""
    present = {x for m in comparison.matrices for row in m.cells for x in row if x is not None}
    chips = [
        f'<span style="display:inline-block;margin:0 .8rem .2rem 0;font-size:.8rem">'
        f'<span style="display:inline-block;width:.8rem;height:.8rem;border-radius:2px;margin-right:.25rem;'
        f'vertical-align:-.1rem;background:{REASON_COLOURS[r]}"></span>{escape(REASON_LABELS.get(r, r))}</span>'
        for r in REASON_ORDER
        if r in present
    ]
    return "<div>" + "".join(chips) + "</div>"


def render_heatmaps(
    comparison: Comparison,
    *,
    selected_turn: int | None,
    key: str,
    per_row: int = 3,
    name: Callable[[int], str] | None = None,
) -> None:
    """Every config's heatmap, side by side (``per_row`` to a row), with one shared legend."""
    st.markdown(legend_html(comparison), unsafe_allow_html=True)
    matrices = comparison.matrices
    for start in range(0, len(matrices), per_row):
        cols = st.columns(per_row)
        for col, (i, matrix) in zip(cols, list(enumerate(matrices))[start : start + per_row]):
            with col:
                st.plotly_chart(
                    heatmap_figure(matrix, selected_turn=selected_turn, name=name),
                    key=f"{key}-{i}",
                    config={"displayModeBar": False},
                )
                hidden = max(matrix.hidden_kept) if matrix.hidden_kept else 0
                if hidden:
                    st.caption(f"Up to {hidden:,} kept messages lie before the first column shown.")
