"""The Debugger's address names what it shows — the open conversation and the inspected turn — so
reloading the page, or opening a link to it, shows them again (a reload otherwise starts afresh on
the first conversation listed). The session keeps the same pair (:data:`ui.state.DEBUGGED`): the
other pages opened from the menu show the conversation being debugged, at its inspected turn, until
another is picked there (:func:`follow_debugged`), and the Debugger opens on it again on the way back."""

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
    linked, turn = st.query_params.get(CONVERSATION), st.query_params.get(TURN)
    if linked is None and st.session_state.get(keys.DEBUGGED):  # back from another page of this session
        linked, turn = st.session_state[keys.DEBUGGED]
    if linked not in conversation_ids:
        return
    st.session_state[keys.CONVERSATION] = linked
    st.session_state[keys.CONVERSATION_SOURCE] = "all"  # shown whatever its source
    if turn:
        st.session_state[keys.SELECTED_TURN] = turn  # checked against the thread where it is read


def link_to(conversation_id: str | None, turn_id: str | None) -> None:
    """Puts the open conversation and the inspected turn in the page's address, and in the session for the
    other pages (:func:`follow_debugged`)."""
    st.session_state[keys.DEBUGGED] = (conversation_id, turn_id) if conversation_id is not None else None
    for name, value in ((CONVERSATION, conversation_id), (TURN, turn_id)):
        if value is None:
            st.query_params.pop(name, None)
        elif st.query_params.get(name) != value:
            st.query_params[name] = value


def follow_debugged(prefix: str, *, fresh: bool) -> tuple[str, str | None] | None:
    """The conversation being debugged and its inspected turn, ``(conversation id, turn id)``, when the page
    with this widget ``prefix`` should open on them: the first time it runs since the Debugger showed them,
    or whenever its own picker starts afresh (``fresh``: its widgets' state is gone, as when it was left for
    another page). ``None`` otherwise — the page keeps what was picked on it."""
    current = st.session_state.get(keys.DEBUGGED)
    if not current:
        return None
    seen = keys.key(prefix, "follows")
    if not fresh and st.session_state.get(seen) == current:
        return None
    st.session_state[seen] = current
    return current
