"""The transcript: the active thread as chat messages with one memory marker per LLM node.

Markers are relative to the selected turn: for every earlier message, did each node's memory
send it (● kept), leave it out (○ dropped) or never consider it (◌ not eligible)? Hover a
marker for the reason in plain words. A dashed divider shows where each node's window starts.
Under each message: the sibling pager ‹ n/m ›, edit (queries), regenerate and inspect (answers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import streamlit as st

from core.analysis import MessageView
from core.model import REASONING, TOOL_CALL, TOOL_RESULT
from ui import html

#: How a step that is not the user's question or the assistant's reply is told apart: its avatar
#: (None: the role's own) and the word after its turn's label.
STEPS = {
    TOOL_RESULT: (":material/build:", "tool result"),
    REASONING: (":material/psychology:", "reasoning"),
    TOOL_CALL: (None, "tool call"),
}


def message_look(item: MessageView) -> tuple[str, str | None, str]:
    """(the chat message's name, its avatar or None for the name's own, the label before its markers)."""
    avatar, word = STEPS.get(item.kind, (None, ""))
    name = "user" if item.role == "user" else "tool" if item.role == "tool" else "assistant"
    if name == "tool" and avatar is None:
        avatar = STEPS[TOOL_RESULT][0]
    return name, avatar, " · ".join(x for x in (item.label, word) if x)


PAGE_TURNS = 20  # turns of the thread shown at once


#: The transcript box beside the inspector (px), so the page never grows with the conversation (the
#: Debugger and an imported conversation's view); :mod:`ui.html`'s CSS lets it give way on a short screen.
TRANSCRIPT_HEIGHT = html.TRANSCRIPT_HEIGHT


def thread_page(
    thread: list[int], selected: int | None, *, key: str, on_newest: Callable[[], None], page: int = PAGE_TURNS
) -> list[int]:
    """The part of the thread to show: its newest ``page`` turns (more after *Show earlier turns*)
    or, when an older turn is inspected, the page that ends at it — its markers are about the turns
    before it. ``key`` holds how many turns are shown."""
    shown = st.session_state.get(key, page)
    end = len(thread)
    if selected is not None and selected in thread and thread.index(selected) < len(thread) - shown:
        end = thread.index(selected) + 1
    if end < len(thread) and st.button(
        f"Show the newest turns ({len(thread) - end} later turns hidden)", key="show_newest"
    ):
        on_newest()
    earlier = max(0, end - shown)
    if earlier and st.button(f"Show {min(page, earlier)} earlier turns ({earlier} hidden)", key="show_earlier"):
        st.session_state[key] = shown + page
        st.rerun()
    return thread[max(0, end - shown) : end]


@dataclass
class TurnActions:
    # Called as the Inspect button's on_click callback, before the page reruns: it only sets state
    # (an st.rerun there would be a second run of the whole page for one click).
    on_select: Callable[[str], None]
    on_switch: Callable[[str], None]
    on_regenerate: Callable[[str], None] | None = None
    on_edit: Callable[[str, str], None] | None = None
    #: Why there is no Regenerate and Edit here (a conversation without a flow): they are shown
    #: disabled, with this as their help.
    cannot_run: str = ""


def turn_problem(turn) -> str | None:
    """The line shown under a turn that did not end normally (None for one that did)."""
    if turn.status in ("failed", "error"):
        return f"Turn failed: {turn.error or 'failed'}"
    if turn.status == "interrupted":
        return f"Turn interrupted: {turn.error or 'its process stopped before the turn finished'}"
    if turn.status == "running":
        return "Still running: another window or process is answering this turn"
    return None


def render_transcript(
    items: list[MessageView],
    *,
    siblings: dict[str, tuple[int, int, tuple[str, ...]]],
    failed: dict[str, str],
    differs: dict[str, list[str]],
    actions: TurnActions | None,
    conversation_only: bool,
    key: str,
) -> None:
    """``siblings[turn_id] = (n, m, ids)``; ``failed[turn_id] = the line shown under its answer``
    (:func:`turn_problem`); ``differs[turn_id] = [node titles]``."""
    for item in items:
        if not conversation_only and item.window_starts:
            st.markdown(html.divider(item.window_starts), unsafe_allow_html=True)
        name, avatar, label = message_look(item)
        with st.chat_message(name, avatar=avatar):
            parts = []
            if not conversation_only:
                label += " · inspected" if item.selected else ""
                parts.append(html.chips(item.markers, lead=html.muted(label)))
            parts.append(html.text_block(item.text, later=item.later and not conversation_only))
            if item.kind == "answer" and item.turn_id in failed:
                parts.append(html.error_line(failed[item.turn_id]))
            if not conversation_only and item.kind == "answer" and differs.get(item.turn_id):
                parts.append(html.badge("replies might now differ: " + ", ".join(differs[item.turn_id])))
            st.markdown("".join(parts), unsafe_allow_html=True)
            if actions is not None and not conversation_only:
                _controls(item, siblings.get(item.turn_id), actions, key)


def _controls(item: MessageView, sib, actions: TurnActions, key: str) -> None:
    base = f"{key}-{item.turn_id}-{item.index}"
    row = st.container(horizontal=True, gap="small", vertical_alignment="center")
    with row:
        if item.kind == "query":
            if sib and sib[1] > 1:
                n, m, ids = sib
                if st.button(
                    "",
                    key=f"{base}-prev",
                    icon=":material/chevron_left:",
                    disabled=n <= 1,
                    type="tertiary",
                    help="previous version of this message",
                ):
                    actions.on_switch(ids[n - 2])
                st.markdown(html.muted(f"{n}/{m}"), unsafe_allow_html=True, width="content")
                if st.button(
                    "",
                    key=f"{base}-next",
                    icon=":material/chevron_right:",
                    disabled=n >= m,
                    type="tertiary",
                    help="next version of this message",
                ):
                    actions.on_switch(ids[n])
            # Its box is drawn only while it is open: a text box per shown turn would be registered (and its
            # state searched) on every rerun of the transcript.
            edit = st.popover(
                "Edit",
                icon=":material/edit:",
                type="tertiary",
                disabled=actions.on_edit is None,
                help=actions.cannot_run
                if actions.on_edit is None
                else "Ask something else here: the edit becomes a new branch",
                key=f"{base}-edit",
                on_change="rerun",
            )
            if edit.open:
                with edit:
                    text = st.text_area("Edited message", item.text, key=f"{base}-edit-text")
                    if st.button("Send as a new branch", key=f"{base}-edit-send") and actions.on_edit is not None:
                        actions.on_edit(item.turn_id, text)
        elif item.kind == "answer":
            if (
                st.button(
                    "Regenerate",
                    key=f"{base}-regen",
                    icon=":material/refresh:",
                    type="tertiary",
                    disabled=actions.on_regenerate is None,
                    help=actions.cannot_run
                    if actions.on_regenerate is None
                    else "A new answer to the same message, as a sibling branch",
                )
                and actions.on_regenerate
            ):
                actions.on_regenerate(item.turn_id)
            st.button(
                "Inspect",
                key=f"{base}-inspect",
                icon=":material/manage_search:",
                type="tertiary",
                help="Show what each node that calls a model saw in this turn",
                on_click=actions.on_select,
                args=(item.turn_id,),
            )
