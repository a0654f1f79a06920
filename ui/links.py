"""The Debugger's address names what it shows — the open conversation and the inspected turn — so
reloading the page, or opening a link to it, shows them again (a reload otherwise starts afresh on
the first conversation listed)."""

from __future__ import annotations

from collections.abc import Collection

import streamlit as st

from ui import state as keys

CONVERSATION, TURN = "conversation", "turn"  # the query parameters


def open_linked(conversation_ids: Collection[str]) -> None:
    """On a session's first visit, opens the conversation (and the turn) the address names, when it
    is stored; an unknown id is ignored (the first conversation opens, as without a link). Call it
    before the conversation picker is drawn."""
    if keys.CONVERSATION in st.session_state:
        return
    linked = st.query_params.get(CONVERSATION)
    if linked not in conversation_ids:
        return
    st.session_state[keys.CONVERSATION] = linked
    st.session_state[keys.CONVERSATION_SOURCE] = "all"  # shown whatever its source
    turn = st.query_params.get(TURN)
    if turn:
        st.session_state[keys.SELECTED_TURN] = turn  # checked against the thread where it is read


def link_to(conversation_id: str | None, turn_id: str | None) -> None:
    """Puts the open conversation and the inspected turn in the page's address."""
    for name, value in ((CONVERSATION, conversation_id), (TURN, turn_id)):
        if value is None:
            st.query_params.pop(name, None)
        elif st.query_params.get(name) != value:
            st.query_params[name] = value
