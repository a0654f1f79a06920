"""The debugger: chat with a flow and see, per LLM node, which earlier messages its memory kept.

The page reads what it shows once (:class:`ui.debug_context.DebugContext`) and draws it with the
components under ``ui/``: the conversation picker, the flow's sidebar, and the workspace (the transcript
and the inspector), which reruns alone as a fragment. A conversation without a flow (an import, a Dify
pull, a capture) opens in the replay view instead."""

from __future__ import annotations

import streamlit as st

from core.store import resolve_url
from ui import data, html
from ui import state as keys
from ui.conversation_picker import render_conversation_picker, render_open_elsewhere
from ui.debug_context import DebugContext
from ui.entry import through_app
from ui.flow_sidebar import render_flow_sidebar
from ui.links import link_to
from ui.replay_view import render_replay
from ui.workspace import render_workspace

through_app()  # before anything is shown or read: the login is in app.py

MARKERS_LEGEND = (
    "Each node's memory at the inspected turn: ● kept · ○ dropped · ◌ not eligible — hover a marker for why."
)

html.inject_css()
svc = data.service()
url = resolve_url()
conversations = svc.conversations()
conv_id = render_conversation_picker(svc, url, conversations)
if conv_id is None:
    link_to(None, None)
    st.title("MemLens debugger")
    st.info("No conversation yet: start one from the sidebar.")
    st.stop()
render_open_elsewhere(conv_id)

info = svc.info(conv_id)
if info.flow_version_id is None:  # imported or pulled: no flow to run, a replay view instead
    with st.sidebar:
        conversation_only = st.toggle(
            "Conversation only", key=keys.CONVERSATION_ONLY, help="Hide every debugging detail: a clean chat for demos"
        )
    render_replay(svc, info, conv_id, conversation_only=conversation_only)
    data.warm_up_models()
    st.stop()

ctx = DebugContext.load(svc, url, info)
settings = render_flow_sidebar(ctx)
st.title(html.plain(info.name or "New conversation"))
if not settings.conversation_only:
    st.caption(MARKERS_LEGEND)


@st.fragment
def _workspace() -> None:
    """Inspecting a turn, a switchboard change or a what-if rerun this alone, not the sidebar."""
    render_workspace(ctx, settings, conversations)
    data.warm_up_models()  # from the session's second drawing on: litellm loads for the first turn meanwhile


_workspace()
