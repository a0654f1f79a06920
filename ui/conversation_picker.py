"""The debugger's sidebar: which conversation is open, and the "New conversation" popover that starts one
on a stored flow or on the user's own Dify DSL export."""

from __future__ import annotations

import streamlit as st

from core.errors import MemLensError
from core.flow import parse_flow_upload
from core.words import conversation_length, distinct
from ui import data, html
from ui import state as keys
from ui.links import open_linked
from ui.start_form import start_form


def source_of(c) -> str:
    """Where a conversation comes from: a flow (chat, API, CLI), an import format, a Dify pull."""
    if c.flow_version_id:
        return "flow"
    if c.source in ("dify-pull", "capture"):  # a Dify pull; the capture proxy's recordings
        return c.source
    return f"import: {c.meta.get('source_format') or c.source}"


def render_conversation_picker(svc, url: str, conversations: list) -> str | None:
    """The open conversation's id (``None`` when there is none): picked in the sidebar, handed over by a
    view that made one, named by the address, or started from the popover."""
    sources = sorted({source_of(c) for c in conversations})
    opened = st.session_state.pop(keys.OPEN_IN_DEBUGGER, None)  # set by a view that made a new conversation
    picked_flow = st.session_state.pop(keys.NEW_PICK, None)  # a flow just imported from the user's file
    if picked_flow is not None:  # the popover offers it as a stored flow from now on
        st.session_state[keys.NEW_SOURCE] = "flow"
        st.session_state[keys.NEW_FLOW] = picked_flow
    open_linked({c.id for c in conversations})  # a reload or a link opens what the address names
    if opened:
        st.session_state[keys.CONVERSATION] = opened
        st.session_state[keys.NEW_POPOVER] = False  # started from it: closed, off the new conversation
        st.session_state[keys.CONVERSATION_SOURCE] = "all"
    with st.sidebar:
        st.subheader("Conversations")
        source_filter = st.selectbox(
            "Source",
            ["all"] + sources,
            key=keys.CONVERSATION_SOURCE,
            format_func=lambda s: "every source" if s == "all" else s,
        )
    listed = [c for c in conversations if source_filter in ("all", source_of(c))]
    # Flow conversations first, so the page opens on one that can be continued.
    listed.sort(key=lambda c: c.flow_version_id is None)
    ids = [c.id for c in listed]
    names = distinct(
        {c.id: f"{c.name or 'New conversation'} · {conversation_length(c)} · {source_of(c)}" for c in listed}
    )
    if st.session_state.get(keys.CONVERSATION) not in ids:
        st.session_state[keys.CONVERSATION] = ids[0] if ids else None
    else:
        # Set again so the picker shows its choice's label as it is now ("3 turns" after a turn): the
        # browser otherwise keeps showing the label it was picked under.
        st.session_state[keys.CONVERSATION] = st.session_state[keys.CONVERSATION]
    with st.sidebar:
        if ids:
            st.selectbox(
                "Open", ids, key=keys.CONVERSATION, format_func=lambda i: names.get(i, i), label_visibility="collapsed"
            )
        with st.popover(
            "New conversation", icon=":material/add:", width="stretch", key=keys.NEW_POPOVER, on_change="rerun"
        ):
            _new_conversation(svc, url)
    return st.session_state.get(keys.CONVERSATION)


def _new_conversation(svc, url: str) -> None:
    """The popover's form: a stored flow or the user's file, a name, the flow's start form, Start."""
    flows = svc.flows()
    source = st.radio(
        "Start on",
        ["flow", "file"],
        key=keys.NEW_SOURCE,
        horizontal=True,
        format_func={"flow": "a stored flow", "file": "your own file"}.get,
    )
    chosen, own = None, None
    if source == "flow":
        flow_names = distinct({f.flow_id: f"{f.flow_name} (v{f.version})" for f in flows})
        chosen = st.selectbox("Flow", list(flow_names), format_func=flow_names.get, key=keys.NEW_FLOW)
    else:
        own = st.file_uploader(
            "A Dify DSL export or a MemLens flow file",
            type=["yml", "yaml", "json"],
            key=f"{keys.NEW_FLOW_FILE}-{st.session_state.get(keys.NEW_FLOW_FILE_ROUND, 0)}",
            help="Export it from Dify (app menu → Export DSL). It is stored as a flow, "
            "each of its nodes that calls a model answered by the model chosen "
            "under *Model for new turns*.",
        )
        # Start is offered once the file has reached the app: a click while it is still on its way
        # would otherwise start on no file at all.
        st.caption(f"Start uses {html.plain(own.name)}." if own is not None else "Start waits for the file to arrive.")
    new_name = st.text_input("Name", key=keys.NEW_NAME)
    # The flow's start form, filled in before the first message (as Dify's web app asks for it).
    # The user's file is read once: its start form is drawn from it, and Start stores it.
    form_flow, problem = None, None
    if chosen is not None:
        latest = max((f for f in flows if f.flow_id == chosen), key=lambda f: f.version)
        form_flow = data.flow(url, latest.id)
    elif own is not None:
        try:
            form_flow = parse_flow_upload(own.getvalue(), own.name)
        except MemLensError as e:
            problem = str(e)  # said when Start is clicked
    start_inputs, missing = start_form(form_flow, keys.NEW_INPUTS) if form_flow is not None else ({}, [])
    if missing:
        st.caption(html.plain("Start needs: " + ", ".join(missing)))
    if not st.button("Start", key=keys.NEW_START, disabled=(chosen is None and own is None) or bool(missing)):
        return
    flow_id = chosen
    if own is not None:
        flow_id = None
        if problem is not None:
            st.error(html.plain(problem))
        else:
            try:
                flow_id = svc.import_flow(form_flow).flow_id
            except MemLensError as e:
                st.error(html.plain(str(e)))
    if flow_id is None:
        return
    # Without a name it is named by its first message (ConversationService.send).
    info = svc.start(flow_id, name=new_name.strip(), inputs=start_inputs)
    # Opened on the next run, before the conversation picker exists: a widget's key cannot be set once the
    # widget is drawn.
    st.session_state[keys.OPEN_IN_DEBUGGER] = info.id
    st.session_state.pop(keys.SELECTED_TURN, None)
    if own is not None:  # an empty uploader for the next one, the imported flow picked
        st.session_state[keys.NEW_FLOW_FILE_ROUND] = st.session_state.get(keys.NEW_FLOW_FILE_ROUND, 0) + 1
        st.session_state[keys.NEW_PICK] = flow_id
    st.rerun()


def _hand_off(key: str, conversation_id: str) -> None:
    st.session_state[key] = conversation_id  # the other page opens it (it owns its widgets)


def render_open_elsewhere(conversation_id: str) -> None:
    """Compare and Present, opened on the conversation being debugged."""
    with st.sidebar:
        compare_col, present_col = st.columns(2)
        if compare_col.button(
            "Compare",
            key=keys.TO_COMPARE,
            icon=":material/compare:",
            width="stretch",
            on_click=_hand_off,
            args=(keys.OPEN_IN_COMPARE, conversation_id),
            help="Opens this conversation on the Compare page: 2–6 memory configs side by side",
        ):
            st.switch_page("pages/compare.py")
        if present_col.button(
            "Present",
            key=keys.TO_PRESENT,
            icon=":material/slideshow:",
            width="stretch",
            on_click=_hand_off,
            args=(keys.OPEN_IN_PRESENT, conversation_id),
            help="Opens this conversation on the Present page: step through it turn by turn",
        ):
            st.switch_page("pages/present.py")
