"""Per-turn line charts across configs: kept messages, history tokens against the budget, and the
oldest turn still remembered."""

from __future__ import annotations

from html import escape

import plotly.graph_objects as go
import streamlit as st

from core.analysis.compare import Comparison
from core.report import CONFIG_COLOURS
from ui.html import safe_text

# Each config has its colour and its dash and marker too, so two configs with identical numbers
# still show as two lines instead of one hiding the other.
DASHES = ("solid", "dot", "dash", "longdash", "dashdot", "longdashdot")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star")


def _style(i: int, width: float = 2.0) -> dict:
    return dict(
        line=dict(color=CONFIG_COLOURS[i % 6], dash=DASHES[i % 6], width=width),
        marker=dict(symbol=SYMBOLS[i % 6], size=5),
    )


def _figure(title: str, y_title: str) -> go.Figure:
    # No legend inside the figure: one legend for all three charts sits above them (legend_html),
    # so a long list of configs never squashes a plot into a scroll box.
    fig = go.Figure()
    fig.update_layout(
        title=dict(text=title, font=dict(size=14)),
        height=300,
        margin=dict(l=10, r=10, t=40, b=30),
        xaxis_title="turn",
        yaxis_title=y_title,
        showlegend=False,
        hovermode="x unified",
        hoverlabel=dict(namelength=-1, align="left"),
    )
    return fig


def legend_html(comparison: Comparison) -> str:
    """The configs' colours and dashes, once for all the line charts (labels escaped: they are user text)."""
    css = {
        "solid": "solid",
        "dot": "dotted",
        "dash": "dashed",
        "longdash": "dashed",
        "dashdot": "dashed",
        "longdashdot": "dashed",
    }
    items = [
        f'<span style="display:inline-block;margin:0 1rem .3rem 0;font-size:.85rem">'
        f'<span style="display:inline-block;width:1.6rem;border-top:3px {css[DASHES[i % 6]]} '
        f'{CONFIG_COLOURS[i % 6]};vertical-align:.2rem;margin-right:.35rem"></span>{safe_text(s.label)}</span>'
        for i, s in enumerate(comparison.series)
    ]
    return "<div>" + "".join(items) + "</div>"


def kept_figure(comparison: Comparison) -> go.Figure:
    fig = _figure("Messages kept", "messages")
    for i, s in enumerate(comparison.series):
        fig.add_scatter(x=s.turns, y=s.kept, mode="lines+markers", name=escape(s.label), **_style(i))
    return fig


def tokens_figure(comparison: Comparison) -> go.Figure:
    fig = _figure("History tokens vs budget (thin lines)", "tokens")
    for i, s in enumerate(comparison.series):
        fig.add_scatter(x=s.turns, y=s.history_tokens, mode="lines", name=escape(s.label), line=_style(i)["line"])
        budgets = [b for b in s.budget if b is not None]
        # A budget far above every history would flatten the lines that matter: said in the caption instead.
        if budgets and max(budgets) <= 3 * max(max(s.history_tokens, default=0), 1):
            fig.add_scatter(
                x=s.turns,
                y=s.budget,
                mode="lines",
                name=escape(f"{s.label} budget"),
                opacity=0.7,
                line=dict(color=CONFIG_COLOURS[i % 6], width=1),
            )
    return fig


def oldest_figure(comparison: Comparison) -> go.Figure:
    fig = _figure("Oldest turn still remembered", "turn")
    for i, s in enumerate(comparison.series):
        fig.add_scatter(
            x=s.turns, y=s.oldest_kept_turn, mode="lines+markers", name=escape(s.label), connectgaps=False, **_style(i)
        )
    return fig


def render_series(comparison: Comparison, *, key: str) -> None:
    st.markdown(legend_html(comparison), unsafe_allow_html=True)
    cols = st.columns(3)
    for col, (name, make) in zip(cols, (("kept", kept_figure), ("tokens", tokens_figure), ("oldest", oldest_figure))):
        with col:
            st.plotly_chart(make(comparison), key=f"{key}-{name}", config={"displayModeBar": False})
    st.caption(
        "Thin lines in the middle chart are budgets, in their config's colour; a budget far above the "
        "history is not drawn."
    )
