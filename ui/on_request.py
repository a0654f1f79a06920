"""Analyses of a whole long conversation run when someone asks for them — once per conversation version.

Replaying every config over every turn, or looking for surprises in all of them, takes time in
proportion to the conversation's length: seconds at 10,000 turns. A page opening on such a
conversation shows what costs the same at any length and offers the whole analysis behind a
button instead. What one visitor asked for is kept for the server process, keyed by the
conversation's version and the settings, so the next visit to the same view opens with it (its
results come from the pages' own caches); a new version of the conversation asks again.
"""

from __future__ import annotations

import streamlit as st

# Answered turns up to which a page computes its whole-conversation analyses on open.
LONG_CONVERSATION = 200


@st.cache_resource(show_spinner=False)
def _asked() -> set[tuple]:
    return set()


def whole_analysis(what: tuple, turns: int, label: str, *, key: str, help: str) -> bool:
    """Whether to run the analysis ``what`` (a hashable key naming it, the conversation's version
    and the settings) on a conversation of ``turns`` answered turns: always up to
    :data:`LONG_CONVERSATION` turns or when it was asked for before; otherwise when the button
    ``label`` is pressed."""
    asked = _asked()
    if turns <= LONG_CONVERSATION or what in asked:
        return True
    # Marked before the rerun the click starts, so that run computes and shows no button.
    st.button(label, key=key, help=help, type="primary", on_click=asked.add, args=(what,))
    return False
