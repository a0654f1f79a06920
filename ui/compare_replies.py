"""The replies grid: each query once, and under it one column per config with its reply, side by side
and wrapped (never a table cell cut off at the edge)."""

from __future__ import annotations

from html import escape

import streamlit as st

from core.analysis.compare import ReplyGrid
from ui.html import safe_text
from ui.paging import page_slice

REPLY_ROWS = 10  # queries to a page


def reply_html(turn: int, label: str, text: str, differ: bool) -> str:
    """One config's reply (escaped), tagged with its turn and config for tests and styling."""
    border = "#f59e0b" if differ else "#e5e7eb"
    return (
        f'<div class="ml-reply" data-turn="{turn}" data-config="{escape(label, quote=True)}" '
        f'style="border:1px solid {border};border-radius:.4rem;padding:.4rem .6rem;white-space:pre-wrap;'
        f'overflow-wrap:anywhere;font-size:.9rem"><div style="font-size:.75rem;color:#6b7280">'
        f"{safe_text(label)}</div>{safe_text(text) if text else '<i>(empty)</i>'}</div>"
    )


def render_reply_grid(grid: ReplyGrid, rows: list[int], *, key: str, name=lambda n: f"turn {n}") -> None:
    """Rows ``rows`` of ``grid`` (indexes), a page at a time; rows where the replies differ are marked ≠."""
    differ = set(grid.differing())
    shown = rows[page_slice(len(rows), REPLY_ROWS, key=f"{key}-page", noun="queries", newest_last=False)]
    for r in shown:
        mark = " ≠" if r in differ else ""
        st.markdown(
            f'<div style="margin-top:.6rem"><b>{safe_text(name(grid.turns[r]).capitalize())}{mark}</b> · '
            f"{safe_text(grid.queries[r])}</div>",
            unsafe_allow_html=True,
        )
        for col, label, reply in zip(st.columns(len(grid.labels)), grid.labels, grid.replies[r]):
            col.markdown(reply_html(grid.turns[r], label, reply, r in differ), unsafe_allow_html=True)
