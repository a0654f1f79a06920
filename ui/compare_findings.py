"""Findings as a list: each in plain words, with a button that jumps to its turn."""

from __future__ import annotations

from typing import Callable, Sequence

import streamlit as st

from core.analysis.findings import WARNING, Finding, TurnNamer
from core.words import plural
from ui.html import plain, safe_text

_ICON = {WARNING: "⚠️", "info": "ℹ️"}


def finding_html(f: Finding, *, detail: bool = True) -> str:
    """One finding as escaped HTML (its text quotes the conversation, so nothing in it is markup)."""
    head = f"<b>{plain(f.title)}</b> · {plain(f.subject)}" if f.subject else f"<b>{plain(f.title)}</b>"
    body = safe_text(f.text)
    more = (
        f'<br><span style="color:#6b7280;font-size:.85rem">{safe_text(f.detail)}</span>' if detail and f.detail else ""
    )
    return f'<div data-kind="{plain(f.kind)}">{_ICON.get(f.severity, "")} {head}<br>{body}{more}</div>'


def render_findings(
    findings: Sequence[Finding],
    *,
    key: str,
    on_turn: Callable[[int], None] | None = None,
    name: TurnNamer | None = None,
    empty: str = "No findings: nothing surprising in how these configs remember this conversation.",
    limit: int = 50,
    narrow: bool = False,
    jump_help: str = "Select this turn: the heatmaps mark it and the turn diff shows it",
) -> None:
    """The list; a finding that links to a turn gets a button calling ``on_turn``, labelled with the
    turn as ``name`` (:func:`core.analysis.findings.turn_namer`) gives it: "Turn 6 · 2/2". Beside the
    text on a full-width page; under it when ``narrow`` (a side column, where a seventh of the width
    cut the label to "T…")."""
    if not findings:
        st.success(empty)
        return
    warnings = sum(1 for f in findings if f.severity == WARNING)
    st.caption(f"{plural(len(findings), 'finding')}, {plural(warnings, 'warning')}.")
    for n, f in enumerate(findings[:limit]):
        text, go = (st.container(), st.container()) if narrow else st.columns([6, 1], vertical_alignment="center")
        text.markdown(finding_html(f), unsafe_allow_html=True)
        if f.turn is not None and on_turn is not None:
            label = (name(f.turn) if name else f"turn {f.turn}").capitalize()
            # Beside the text as wide as their column, so "Turn 4" and "Turn 11 · 2/2" line up as one
            # column; under it as wide as the label.
            go.button(
                label,
                key=f"{key}-{n}",
                on_click=on_turn,
                args=(f.turn,),
                width="content" if narrow else "stretch",
                help=jump_help,
            )
    if len(findings) > limit:
        st.caption(f"…and {len(findings) - limit} more (all of them are in the exported report).")
