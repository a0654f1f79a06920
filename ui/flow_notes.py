"""A flow's import notes — what MemLens runs differently from Dify, or not at all — in one expander,
for every page that shows a flow's runs."""

from __future__ import annotations

import streamlit as st

from core.flow import Flow
from core.words import plural
from ui.html import plain


def render_flow_notes(flow: Flow | None) -> None:
    """The import's notes on ``flow`` (none: nothing is shown), each escaped as imported text."""
    if flow is None or not flow.warnings:
        return
    with st.expander(f"How MemLens runs this flow ({plural(len(flow.warnings), 'note')})"):
        for note in flow.warnings:
            st.caption(plain(note))
