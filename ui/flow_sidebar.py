"""The debugger's sidebar for a flow conversation: its flow and version, rename or delete, the model for new
turns, the clean chat for demos and whose memory the markers show."""

from __future__ import annotations

import streamlit as st

from core.errors import MemLensError
from core.words import distinct
from ui import html
from ui import state as keys
from ui.debug_context import AS_CONFIGURED, DebugContext, PageSettings
from ui.flow_notes import render_flow_notes

MODEL_CHOICES = [
    AS_CONFIGURED,
    "memlens/demo",
    "gpt-4o-mini",
    "gpt-4o",
    "anthropic/claude-sonnet-4-5",
    "ollama/llama3.1",
    "other…",
]


def render_flow_sidebar(ctx: DebugContext) -> PageSettings:
    """Draw the sidebar's flow section and return the choices it holds."""
    version, latest, info = ctx.version, ctx.latest, ctx.info
    with st.sidebar:
        st.caption(
            f"Flow **{html.plain(version.flow_name)}** · version {version.version}"
            + (" (pinned; newest is v%d)" % latest.version if latest.id != version.id else " (newest)")
        )
        render_flow_notes(ctx.flow)  # what the import said: what MemLens runs differently or not at all
        if latest.id != version.id and st.button(
            f"Continue on v{latest.version} as a new branch", key=keys.CONTINUE_LATEST
        ):
            try:
                rec = ctx.svc.continue_on_latest(ctx.conversation_id)
                if rec is not None:
                    st.session_state[keys.SELECTED_TURN] = rec.id
                st.rerun()
            except MemLensError as e:
                st.error(html.plain(e))
        with st.popover("Rename or delete", icon=":material/edit:", width="stretch"):
            _rename_or_delete(ctx, info)
        model_choice = st.selectbox(
            "Model for new turns",
            MODEL_CHOICES,
            key=keys.MODEL_CHOICE,
            help="The demo model answers offline. A real model needs its provider's key in the environment "
            "(e.g. OPENAI_API_KEY); without it the demo model stands in and the receipt says so.",
        )
        if model_choice == "other…":
            model_choice = st.text_input("Model name (litellm)", key=keys.MODEL_OTHER, placeholder="ollama/llama3.1")
        st.divider()
        conversation_only = st.toggle(
            "Conversation only", key=keys.CONVERSATION_ONLY, help="Hide every debugging detail: a clean chat for demos"
        )
        node_options = ["all"] + [n.id for n in ctx.model_nodes]
        node_labels = distinct({"all": "every node that calls a model", **ctx.titles})  # two may share a title
        node_filter = st.selectbox(
            "Show memory of",
            node_options,
            key=keys.NODE_FILTER,
            format_func=node_labels.__getitem__,
            disabled=conversation_only,
        )
    return PageSettings(model_choice=model_choice, conversation_only=conversation_only, node_filter=node_filter)


def _rename_or_delete(ctx: DebugContext, info) -> None:
    new = st.text_input("Name", info.name, key=ctx.key(keys.RENAME))
    if st.button("Rename", key=keys.RENAME_GO):
        ctx.svc.rename(ctx.conversation_id, new.strip() or info.name)
        st.rerun()
    st.divider()
    confirm = st.checkbox("Delete this conversation and everything recorded in it", key=keys.DELETE_CONFIRM)
    if st.button("Delete", key=keys.DELETE_GO, disabled=not confirm, type="primary"):
        ctx.svc.delete(ctx.conversation_id)
        st.session_state.pop(keys.CONVERSATION, None)
        st.session_state.pop(keys.SELECTED_TURN, None)
        st.rerun()
