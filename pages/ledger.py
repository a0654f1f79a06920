"""Ledger explorer: pick a sample or stored conversation, a turn and a memory config; see what was kept."""

from __future__ import annotations

from bisect import bisect_right

import streamlit as st

from core.memory import MemoryConfig, Replay
from core.model import turn_label
from core.service import load_sample, sample_files
from core.store import resolve_url
from core.words import conversation_length, distinct
from ui import data
from ui import state as keys
from ui.config_editor import edit_config
from ui.entry import through_app
from ui.html import plain
from ui.ledger_table import render_ledger_table
from ui.links import follow_debugged

through_app()  # before anything is shown or read: the login is in app.py

page_key = keys.keys_of(keys.LEDGER)  # this page's widget keys


#: The explorer opens on Dify's memory with a window of 3 turns, and a 500-token history limit for the
#: memories that have one (``LEDGER_STARTS``: settings by name).
LEDGER_START = MemoryConfig(window=3)
LEDGER_STARTS = {"max_history_tokens": 500}
# Turns a slider lists by name; a longer conversation gets a number field: a slider sends every
# turn's label to the browser on every rerun.
SLIDER_TURNS = 200


@st.cache_resource(show_spinner=False)
def _conversations(name: str):
    return load_sample(name)


@st.cache_resource(show_spinner=False, max_entries=64)
def _replay(name: str, index: int, config: MemoryConfig) -> Replay:
    return Replay(_conversations(name)[index], config)


@st.cache_resource(show_spinner=False, max_entries=32)
def _stored_replay(url: str, conversation_id: str, version: tuple, config: MemoryConfig) -> Replay:
    conv = data.conversation(url, conversation_id, version)
    return Replay(conv, config, system_prompt=conv.system_prompt)


@st.cache_resource(show_spinner=False, max_entries=64)
def _ledger(source: tuple, config: MemoryConfig, turn: int, _replay: Replay):
    # A ledger lists every earlier message: tens of thousands of entries late in a long conversation.
    return _replay.ledger(turn)


st.title("Ledger explorer")
st.caption("For a chosen turn: every earlier message, whether the memory kept it, and why.")

files = [p.name for p in sample_files()]
stored = data.service().conversations()
# Opened from the menu: the conversation being debugged, at its inspected turn, until another is picked.
followed = follow_debugged(keys.LEDGER, fresh=page_key("from") not in st.session_state)
if followed and followed[0] in {c.id for c in stored}:
    st.session_state[page_key("from")], st.session_state[page_key("stored")] = "stored", followed[0]
else:
    followed = None
with st.sidebar:
    st.subheader("Conversation")
    origin = st.radio(
        "From",
        ["sample", "stored"],
        horizontal=True,
        key=page_key("from"),
        format_func={"sample": "a sample file", "stored": "the store"}.get,
        help="The store holds every conversation: played through a flow, imported or pulled",
    )
    stored_id = None
    if origin == "stored" and stored:
        labels = distinct(
            {
                c.id: f"{c.name or 'Untitled'} · {conversation_length(c)} · {c.meta.get('source_format') or c.source}"
                for c in stored
            }
        )
        stored_id = st.selectbox("Stored conversation", list(labels), format_func=labels.get, key=page_key("stored"))
    elif origin == "stored":
        st.caption("Nothing stored yet: import a file on the Import page.")
    if stored_id is None:
        name = st.selectbox("Sample", files, key=page_key("sample"))
        conversations = _conversations(name)
        index = 0
        if len(conversations) > 1:
            index = st.number_input("Conversation in file", 0, len(conversations) - 1, 0, key=page_key("index"))
    st.subheader("Memory")
    edited = edit_config(keys.LEDGER, LEDGER_START, hide=frozenset({"label"}), starts=LEDGER_STARTS)
if edited.error:
    st.error(plain(edited.error))
    st.stop()
config = edited.config

if stored_id is not None:
    source = (resolve_url(), stored_id, data.stamp(data.service().info(stored_id)))
    replay = _stored_replay(*source, config)
else:
    source = (name, int(index))
    replay = _replay(name, int(index), config)
conversation = replay.conversation
# The turns come from the conversation itself: the replay's per-turn summaries would walk every turn.
numbers = [replay.numbers[p] for p in conversation.answered_turns()]
if not numbers:
    st.warning("This conversation has no user turn.")
    st.stop()

if followed and followed[1] in conversation.tree.position:  # at the Debugger's inspected turn
    st.session_state[page_key("turn_of")] = source[:2]
    st.session_state[page_key("turn")] = replay.numbers[conversation.tree.position[followed[1]]]
# Another conversation opens at its newest turn: the slider's value would otherwise carry over to it.
asked = st.session_state.get(page_key("turn"))
if st.session_state.get(page_key("turn_of")) != source[:2] or not isinstance(asked, int) or asked < numbers[0]:
    st.session_state[page_key("turn_of")] = source[:2]
    st.session_state[page_key("turn")] = numbers[-1]
elif asked not in numbers:  # a turn without an answer, or past the last: the answered turn at or before it
    st.session_state[page_key("turn")] = numbers[bisect_right(numbers, asked) - 1]
if len(numbers) <= SLIDER_TURNS:
    turn = st.select_slider(
        "Turn",
        options=numbers,
        key=page_key("turn"),
        format_func=lambda n: turn_label(conversation, replay.position_of(n)),
    )
else:
    turn = int(
        st.number_input(
            "Turn",
            min_value=numbers[0],
            max_value=numbers[-1],
            step=1,
            key=page_key("turn"),
            help=f"{numbers[0]:,} to {numbers[-1]:,}: a turn without an answer opens the answered one before it",
        )
    )
    if turn not in numbers:
        turn = numbers[bisect_right(numbers, turn) - 1]
ledger = _ledger(source, config, turn, replay)
query = conversation.turns[replay.position_of(turn)].query

st.markdown(f"**{turn_label(conversation, replay.position_of(turn)).capitalize()}** — the user asks:")
st.text(query)
cols = st.columns(5)
cols[0].metric("Kept", len(ledger.kept))
cols[1].metric(
    "Dropped", ledger.dropped_count(), help="Earlier messages this node's memory could have sent and left out"
)
cols[2].metric("History tokens", f"{ledger.history_tokens:,}")
cols[3].metric("Budget", f"{ledger.budget:,}" if ledger.budget is not None else "none")
cols[4].metric("Prompt tokens", f"{ledger.prompt_tokens:,}")
not_eligible = ledger.not_eligible_count()
if not_eligible:
    st.caption(
        f"◌ {not_eligible:,} earlier message{'s' if not_eligible != 1 else ''} not eligible (memory off, "
        "out of scope or on another branch): never this node's to send, so neither kept nor dropped."
    )
st.caption(
    plain(f"Tokens: {replay.counter.describe()}" + (f" · budget: {ledger.budget_note}" if ledger.budget_note else ""))
)
if ledger.exceeds_context:
    st.warning(f"The prompt plus max_tokens exceeds the model's context size of {ledger.context_size:,} tokens.")
render_ledger_table(ledger, conversation, key=page_key("table"), position=replay.position_of(turn))
