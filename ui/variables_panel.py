"""Conversation variables: current values as a typed form, their values at a chosen turn, live edits."""

from __future__ import annotations

import json
from typing import Callable, Mapping

import streamlit as st

from core.errors import MemLensError
from ui import state as keys
from ui.html import plain, safe_text
from ui.paging import page_slice

HISTORY_PAGE = 100  # changes shown at once
LONG_VALUE = 2_000  # characters: longer values are edited on request
SHORT = 200  # characters of a value shown in a caption or a table cell
VALUE_NOW = "Value now (the next turn reads it)"


def parse_input(text: str, value_type: str):
    """What the user typed, as a value: text for string variables, JSON for the others.

    Text that is not JSON stays text, so typing ``many`` into a number variable is a type
    mismatch reported with Dify's message, never silently coerced.
    """
    if value_type == "string":
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def show(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def short(text: str) -> str:
    return text if len(text) <= SHORT else f"{text[: SHORT - 1]}… ({len(text):,} characters)"


#: The Changes table's columns, in order.
CHANGE_COLUMNS = ("turn", "variable", "by", "operation", "old", "new")


def changes_html(rows: list[dict]) -> str:
    """The variables' changes as an HTML table whose cells wrap in the inspector's narrow column (a data frame
    there scrolled sideways and drew only after its grid's script loaded). One HTML block: every text is
    escaped as a block's (:func:`ui.html.safe_text`)."""
    head = "".join(f"<th>{c}</th>" for c in CHANGE_COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{safe_text(r[c])}</td>" for c in CHANGE_COLUMNS) + "</tr>" for r in rows)
    return f'<div class="ml-changes"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


#: Said above the variables of a conversation with branches.
WHOLE_CONVERSATION = (
    "Conversation variables belong to the whole conversation, as in Dify: a turn on another "
    "branch (regenerated or edited) changed them too, so a value here can count or hold turns "
    "that are not on this thread."
)


def render_variables(
    service,
    conversation_id: str,
    variables,
    at_turn: dict | None,
    at_label: str,
    history: list[dict],
    turn_name: Callable[[str], str],
    *,
    key: str,
    branched: bool = False,
    node_names: Mapping[str, str] | None = None,
) -> None:
    if not variables:
        st.info("This flow declares no conversation variables.")
        return
    if branched:
        st.caption(WHOLE_CONVERSATION)
    flash = st.session_state.pop(keys.flash(key), None)
    if flash:
        (st.success if flash[0] == "ok" else st.error)(plain(flash[1]))
    for v in variables:
        with st.container(border=True):
            st.markdown(
                f"**{plain(v.name)}** · <code>{plain(v.value_type)}</code>"
                + (f" — {plain(v.description)}" if v.description else ""),
                unsafe_allow_html=True,
            )
            if at_turn is not None:
                st.caption(plain(f"{at_label}: {short(show(at_turn.get(v.name)))}"))
            # The key follows the stored value, so a value changed by a turn shows up in the field.
            value = show(v.value)
            digest = abs(hash(value)) % 10**8
            if len(value) > LONG_VALUE and not st.toggle(
                f"Edit the whole value ({len(value):,} characters)", key=f"{key}-{v.name}-long"
            ):
                st.text(short(value))  # a list appended to every turn grows with the conversation
                continue
            # The field holds the value now, which the next turn reads; the caption above is the
            # value at the inspected turn, which may be older.
            text = st.text_input(
                VALUE_NOW,
                value,
                key=f"{key}-{v.name}-{digest}",
                help="Text for string variables; JSON for numbers, booleans, objects and arrays.",
            )
            c1, c2 = st.columns(2)
            if c1.button("Save", key=f"{key}-{v.name}-save"):
                try:
                    change = service.edit_variable(conversation_id, v.name, parse_input(text, v.value_type))
                    st.session_state[keys.flash(key)] = (
                        "ok",
                        f"{v.name}: {show(change.old)} → {show(change.new)} (edited by user)",
                    )
                except MemLensError as e:
                    st.session_state[keys.flash(key)] = ("error", str(e))
                st.rerun()
            if c2.button("Revert", key=f"{key}-{v.name}-revert", help="Undo your latest edit of this variable"):
                change = service.revert_variable(conversation_id, v.name)
                st.session_state[keys.flash(key)] = (
                    ("ok", f"{v.name} reverted to {show(change.new)}")
                    if change
                    else ("error", f"{v.name} has no user edit to revert")
                )
                st.rerun()
    if st.button("Reset all to defaults", key=f"{key}-reset"):
        changes = service.reset_variables(conversation_id)
        st.session_state[keys.flash(key)] = ("ok", f"{len(changes)} variable(s) reset to their defaults")
        st.rerun()
    if history:
        st.markdown("**Changes**")
        page = list(reversed(history))[
            page_slice(
                len(history), HISTORY_PAGE, key=f"{key}-history-page", noun="changes, newest first", newest_last=False
            )
        ]
        # A turn as labelled on its thread ("6 · 2/2"); a change with no turn was made before the first one.
        rows = [
            {
                "turn": turn_name(h["turn_id"]) if h["turn_id"] else "—",
                "variable": h["name"],
                "by": "user" if h["node_id"] == "user" else (node_names or {}).get(h["node_id"], h["node_id"]),
                "operation": h["operation"],
                "old": short(show(h["old"])),
                "new": short(show(h["new"])),
            }
            for h in page
        ]
        st.markdown(changes_html(rows), unsafe_allow_html=True)
