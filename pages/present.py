"""Present: step through a conversation turn by turn and show what each memory holds — no key needed."""

from __future__ import annotations

import json
import time

import streamlit as st

from core.analysis.compare import NamedConfig, compare, reply_at
from core.analysis.findings import findings_at, findings_for
from core.errors import MemLensError
from core.flow import extracted
from core.llm import DemoClient
from core.memory import Replay, turn_numbers
from core.model import active_thread, leaves, remembered, turn_label
from core.report import DEFAULT_CONFIGS
from core.service import saved_config_sets
from core.words import distinct
from ui import state as keys
from ui.compare_configs import current_configs
from ui.compare_source import database, pick_answered_source
from ui.entry import through_app
from ui.flow_notes import render_flow_notes
from ui.html import plain
from ui.on_request import whole_analysis
from ui.present_view import Card, render_captions, render_cards, render_chat

through_app()  # before anything is shown or read: the login is in app.py

P = keys.PRESENT
NODES, CONFIGS = "nodes", "configs"
state = st.session_state


@st.cache_resource(show_spinner=False, max_entries=32)
def _replays(key: str, configs_json: str, _conv) -> list[Replay]:
    return [Replay(_conv, NamedConfig.from_dict(c).config) for c in json.loads(configs_json)]


@st.cache_resource(show_spinner="Looking for surprises…", max_entries=32)
def _findings(key: str, configs_json: str, subject: str, _source):
    if subject == NODES:
        return findings_for(_source)
    configs = json.loads(configs_json)
    return findings_for(_source, comparison=compare(_source.conversation, configs))


@st.cache_resource(show_spinner=False, max_entries=512)
def _reply(key: str, configs_json: str, index: int, position: int, _replay: Replay) -> str:
    return reply_at(_replay, position, DemoClient()).text


def _step(delta: int | None = None, to: int | None = None) -> None:
    count = state.get(f"{P}_count", 1)
    i = state.get(f"{P}_i", 0)
    i = to if to is not None else i + (delta or 0)
    state[f"{P}_i"] = max(0, min(count - 1, i))
    state[f"{P}_last_step"] = time.monotonic()


st.title("Present")
st.caption(
    "Step through a conversation turn by turn: the chat on the left, what each memory holds on the right, "
    "and the surprises as captions. Everything runs offline on the demo model — no API key needed."
)

picked = pick_answered_source(P, purpose="present", hand_off=keys.OPEN_IN_PRESENT)  # set by the Debugger
source = picked.source
conv = source.conversation

with st.sidebar:
    if source.note:
        st.caption(plain(source.note))
    render_flow_notes(source.flow)
    st.subheader("Memories to show")
    options = ([NODES] if source.flow is not None and source.records else []) + [CONFIGS]
    labels = {
        NODES: plain(f"the nodes of {source.flow.name if source.flow else 'the flow'} (as recorded)"),
        CONFIGS: "memory configs (replayed)",
    }
    if len(options) == 1:  # nothing to choose: said, not offered as a choice of one
        subject = options[0]
        st.caption(labels[subject][:1].upper() + labels[subject][1:])
    else:
        if state.get(f"{P}_subject") not in options or state.get(f"{P}_key") != picked.key:
            state[f"{P}_subject"] = options[0]  # a recorded flow shows its own nodes first
        subject = st.radio("Show", options, key=f"{P}_subject", format_func=labels.get, label_visibility="collapsed")
    configs = list(source.configs or DEFAULT_CONFIGS)
    if subject == CONFIGS:
        # The configs set on the Compare page in this session come first, saved or not.
        on_compare = current_configs()
        sets = {
            **({"the Compare page's": on_compare} if on_compare else {}),
            "the defaults" if not source.configs else "the file's own": configs,
            **saved_config_sets(database()),
        }
        names = list(sets)
        if state.get(f"{P}_set") not in names:
            state[f"{P}_set"] = names[0]
        chosen = st.selectbox("Config set", names, key=f"{P}_set", help="Save sets on the Compare page")
        configs = list(sets[chosen])
    # Present follows one branch, the active one unless another is picked: Previous never jumps branches.
    ends = leaves(conv)
    default_leaf = active_thread(conv)[-1]
    if state.get(f"{P}_leaf") not in ends or state.get(f"{P}_key") != picked.key:
        state[f"{P}_leaf"] = default_leaf
    if len(ends) > 1:
        branch_labels = distinct(
            {
                p: f"{turn_label(conv, p)}: {conv.turns[p].query[:40]}" + (" (active)" if p == default_leaf else "")
                for p in ends
            }
        )
        st.selectbox("Branch", ends, key=f"{P}_leaf", format_func=branch_labels.__getitem__)
    st.subheader("Autoplay")
    playing = st.toggle("Play", key=f"{P}_play")
    every = st.slider("Seconds per turn", 1, 10, 3, key=f"{P}_every")

configs_json = json.dumps([c.to_dict() for c in configs], sort_keys=True)
# The captions come from looking at every turn under every memory: on a long conversation, when asked.
findings = []
if whole_analysis(
    ("present", picked.key, configs_json, subject),
    len(conv.answered_turns()),
    f"Look for surprises in all {len(conv.answered_turns()):,} turns",
    key=f"{P}_whole",
    help="Replays every memory over every turn to find what each one forgets; they show as captions at their turns",
):
    try:
        findings = _findings(picked.key, configs_json, subject, source)
    except MemLensError as e:
        st.error(plain(e))
        st.stop()
thread = conv.tree.path(state[f"{P}_leaf"])
answered = [p for p in thread if conv.turns[p].query_index is not None]
numbers = turn_numbers(conv)
state[f"{P}_count"] = len(answered)
if state.get(f"{P}_key") != picked.key:  # another conversation: back to its first turn
    state[f"{P}_key"] = picked.key
    state[f"{P}_i"] = 0
if picked.turn_id in conv.tree.position and conv.tree.position[picked.turn_id] in answered:
    state[f"{P}_i"] = answered.index(conv.tree.position[picked.turn_id])  # the Debugger's inspected turn


@st.fragment(run_every=every if playing else None)
def stage() -> None:
    count = len(answered)
    # Autoplay advances one turn per interval and stays on the last turn at the end.
    if playing and time.monotonic() - state.get(f"{P}_last_step", 0.0) >= every and state.get(f"{P}_i", 0) < count - 1:
        _step(1)
    i = max(0, min(count - 1, state.get(f"{P}_i", 0)))
    position = answered[i]
    turn = numbers[position]
    a, b, c, d, e = st.columns([1, 1, 3, 1, 1], vertical_alignment="center")
    a.button(
        "First",
        icon=":material/first_page:",
        key=f"{P}_first",
        on_click=_step,
        kwargs={"to": 0},
        disabled=i == 0,
        width="stretch",
    )
    b.button(
        "Previous",
        icon=":material/chevron_left:",
        key=f"{P}_prev",
        on_click=_step,
        kwargs={"delta": -1},
        disabled=i == 0,
        width="stretch",
    )
    c.markdown(
        f"<div style='text-align:center;font-size:1.2rem'><b>{turn_label(conv, position).capitalize()}</b>"
        f" · {i + 1} of {count}</div>",
        unsafe_allow_html=True,
    )
    d.button(
        "Next",
        icon=":material/chevron_right:",
        key=f"{P}_next",
        on_click=_step,
        kwargs={"delta": 1},
        disabled=i == count - 1,
        width="stretch",
    )
    e.button(
        "Last",
        icon=":material/last_page:",
        key=f"{P}_last",
        on_click=_step,
        kwargs={"to": count - 1},
        disabled=i == count - 1,
        width="stretch",
    )
    render_captions(findings_at(findings, turn))
    left, right = st.columns([3, 2])
    with left:
        render_chat(conv, conv.tree.thread(position), position)
    with right:
        cards = []
        if subject == NODES:
            record = next((r for r in source.records if r.id == conv.turns[position].id), None)
            # LLM, Question Classifier, Parameter Extractor and Agent nodes: the runs that carry a ledger.
            model_nodes = {n.id for n in source.flow.model_nodes}
            for run in record.node_runs if record else []:
                if run.node_id not in model_nodes or run.ledger is None:
                    continue
                held = remembered(run.ledger)
                title = source.flow.node(run.node_id).label if source.flow.has_node(run.node_id) else run.node_id
                said, verb = run.reply, "replied"
                if run.type == "question-classifier":
                    said, verb = run.outputs.get("class_name"), "sorted the question as"
                elif run.type == "parameter-extractor":
                    said, verb = extracted(run.outputs), "extracted"
                cards.append(Card(title, held.sentence(), said, verb, bool(held.forgotten_turns) or held.off))
            if not cards:
                st.caption("No node that calls a model ran at this turn.")
        else:
            replays = _replays(picked.key, configs_json, conv)
            for k, (named, replay) in enumerate(zip(configs, replays)):
                held = remembered(replay.ledger_at(position))
                reply = _reply(picked.key, configs_json, k, position, replay)
                cards.append(
                    Card(
                        named.label,
                        held.sentence(),
                        reply,
                        "the demo model answers",
                        bool(held.forgotten_turns) or held.off,
                    )
                )
        render_cards(cards)


stage()
