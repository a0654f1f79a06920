"""The inspector's first lines: per node, what this turn's memory left out and why (:mod:`core.analysis.glance`)."""

from __future__ import annotations

from typing import Sequence

import streamlit as st

from core.analysis import LeftOut
from ui.html import plain, safe_text


def glance_html(lines: Sequence[LeftOut]) -> str:
    """One line per node, its title in bold; the long reason on hover (node titles and excerpts are user text).
    The lines are one HTML block, so :func:`safe_text` escapes them, the hover too, with no word joiner in it."""
    rows = "".join(
        f'<div class="ml-glance-line{" ml-glance-dropped" if x.dropped else ""}" data-node="{plain(x.node_id)}" '
        f'title="{safe_text(x.hover)}"><b>{safe_text(x.title)}</b>: {safe_text(x.text)}</div>'
        for x in lines
    )
    return f'<div class="ml-glance">{rows}</div>'


def render_left_out(lines: Sequence[LeftOut]) -> None:
    if lines:
        st.markdown(glance_html(lines), unsafe_allow_html=True)
