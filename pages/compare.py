"""Compare memory configs side by side on one conversation: what each keeps, turn by turn, and why."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from core.analysis.compare import compare, heatmap_window, replay_replies, turn_diff
from core.analysis.findings import findings_for, turn_namer
from core.errors import MemLensError
from core.llm import DemoClient, LiteLLMClient
from core.memory import Replay, turn_numbers
from core.model import REASON_LABELS
from core.report import DEFAULT_CONFIGS, REPORT_COLUMNS, REPORT_ROWS, build_report, bundle_json, report_html
from core.words import conversation_turns, file_stem, plural
from ui import state as keys
from ui.compare_charts import render_series
from ui.compare_configs import current_configs, edit_configs, load_configs, saved_sets
from ui.compare_facts import message_name, pick_marks, render_facts_table
from ui.compare_findings import render_findings
from ui.compare_replies import render_reply_grid
from ui.compare_source import database, pick_answered_source
from ui.entry import through_app
from ui.flow_notes import render_flow_notes
from ui.heatmap import render_heatmaps
from ui.html import plain, safe_text
from ui.on_request import whole_analysis

through_app()  # before anything is shown or read: the login is in app.py

P = keys.COMPARE
FACT_MODES = {"detected": "Detected in what the user says", "marked": "Messages I mark", "none": "None"}
# The heatmaps' window on the page: every cell carries its hover text, which every rerun sends again,
# so the page shows a smaller window than the exported report keeps.
PAGE_ROWS, PAGE_COLUMNS = 30, 100
SERIES_ON_REQUEST = 200  # turns: longer conversations draw the per-turn charts when asked
REPLY_MODELS = {"demo": "Demo model (no key)", "configured": "Each config's model (keys from the environment)"}
state = st.session_state


# -- cached computations, keyed by what they depend on --------------------------------------------------------


@st.cache_resource(show_spinner="Comparing…", max_entries=32)
def _comparison(key: str, configs_json: str, facts_json: str, last_turn: int | None, _conv):
    window = heatmap_window(_conv, last_turn=last_turn, max_rows=PAGE_ROWS, max_columns=PAGE_COLUMNS)
    facts = json.loads(facts_json)
    if isinstance(facts, list):
        facts = [(tuple(m), label) for m, label in facts]
    return compare(_conv, json.loads(configs_json), facts=facts, window=window)


@st.cache_resource(show_spinner="Looking for surprises…", max_entries=32)
def _findings(key: str, configs_json: str, facts_json: str, last_turn: int | None, _source):
    return findings_for(_source, comparison=_comparison(key, configs_json, facts_json, last_turn, _source.conversation))


@st.cache_resource(show_spinner=False, max_entries=64)
def _replay(key: str, config_json: str, _conv) -> Replay:
    from core.analysis.compare import NamedConfig

    return Replay(_conv, NamedConfig.from_dict(json.loads(config_json)).config)


@st.cache_resource(show_spinner=False, max_entries=64)
def _turn_diff(key: str, config_json: str, turn: int, label: str, _replay: Replay):
    # Two full ledgers (this turn's and the previous one's): thousands of entries on a long conversation.
    return turn_diff(_replay, turn, label=label)


@st.cache_resource(show_spinner="Asking every query again under each config…", max_entries=16)
def _replies(key: str, configs_json: str, model: str, _conv):
    client = DemoClient() if model == "demo" else LiteLLMClient(fallback_to_demo=True)
    return replay_replies(_conv, json.loads(configs_json), client=client)


def _select_turn(turn: int) -> None:
    state[f"{P}_turn"] = turn
    if f"{P}_last" in state and turn not in state.get(f"{P}_rows", []):
        state[f"{P}_last"] = turn


# -- the conversation and the configs -------------------------------------------------------------------

st.title("Compare memory configs")
st.caption(
    "One conversation, 2–6 memory configs side by side: which earlier messages each one keeps at every "
    "turn, and why the others are left out. Nothing here calls a model unless you ask for replies."
)

# A conversation the Import page or the Debugger asked Compare to open.
picked = pick_answered_source(P, purpose="compare", hand_off=keys.OPEN_IN_COMPARE)
source = picked.source
conv = source.conversation
if state.get(f"{P}_turn_of") != picked.key:  # another conversation opens at its newest turn, not at the old number
    state[f"{P}_turn_of"] = picked.key
    state.pop(f"{P}_turn", None)
    state.pop(f"{P}_last", None)
if picked.turn_id in conv.tree.position:  # the conversation being debugged: at its inspected turn
    state[f"{P}_turn"] = state[f"{P}_last"] = turn_numbers(conv)[conv.tree.position[picked.turn_id]]

if f"{P}_n" not in state:  # first visit, or back from another page (which let the forms' state go)
    load_configs(P, current_configs() or list(DEFAULT_CONFIGS))
if source.configs and state.get(f"{P}_applied") != picked.key:  # a report bundle: back to its view
    load_configs(P, source.configs)
    state[f"{P}_applied"] = picked.key
    state[f"{P}_facts"] = source.facts_mode if source.facts_mode in FACT_MODES else "detected"
    state[f"{P}_marks"] = [f"{m[0]}:{m[1]}" for m, _ in (source.facts or [])]
    state[f"{P}_mark_labels"] = {f"{m[0]}:{m[1]}": label for m, label in (source.facts or [])}
    if source.view.get("selected_turn"):
        state[f"{P}_turn"] = source.view["selected_turn"]
    if source.view.get("replies"):
        state[f"{P}_replies"] = True

if source.damage:
    st.warning(plain(source.damage))

with st.sidebar:
    st.caption(
        plain(
            f"{source.origin} · {conversation_turns(conv)}"
            + (f" · recorded from flow {source.flow.name}" if source.flow is not None else "")
        )
    )
    if source.note:
        st.caption(plain(source.note))
    render_flow_notes(source.flow)

# Folded, their names said under them: the page opens on what they keep (the heatmaps), not on their forms.
with st.expander("Memory configs", expanded=False):
    configs = edit_configs(P)
    saved_sets(P, database(), configs)
st.caption(plain("Comparing " + " · ".join(f"“{c.label}”" for c in configs) + " (open Memory configs to change them)."))
if len(configs) < 2:
    st.warning("Compare needs at least two valid configs: fix the one marked in red.")
    st.stop()
configs_json = json.dumps([c.to_dict() for c in configs], sort_keys=True)

# -- facts to follow ------------------------------------------------------------------------------------

with st.sidebar:
    st.subheader("Facts to follow")
    mode = st.radio(
        "Facts", list(FACT_MODES), key=f"{P}_facts", format_func=FACT_MODES.get, label_visibility="collapsed"
    )
    facts_arg: object = None
    if mode == "marked":
        numbers = turn_numbers(conv)
        marks = pick_marks(conv, numbers, key=f"{P}_marks")
        labels = state.get(f"{P}_mark_labels") or {}
        facts_arg = []
        for k in marks:
            name = message_name(conv, numbers, k)
            facts_arg.append([[int(x) for x in k.split(":")], labels.get(k) or name.split(": ", 1)[-1] or name])
    elif mode == "none":
        facts_arg = []
facts_json = json.dumps(facts_arg)

# -- compute ------------------------------------------------------------------------------------------------

numbers = turn_numbers(conv)
turns_all = [numbers[p] for p in conv.answered_turns()]
whole = heatmap_window(conv, max_rows=PAGE_ROWS, max_columns=PAGE_COLUMNS).whole
last_turn = None
if not whole:
    state.setdefault(f"{P}_last", turns_all[-1])
    if state[f"{P}_last"] not in turns_all:
        state[f"{P}_last"] = turns_all[-1]
    last_turn = state[f"{P}_last"]
if not whole_analysis(
    ("compare", picked.key, configs_json),
    len(turns_all),
    f"Compare the configs over all {len(turns_all):,} turns",
    key=f"{P}_whole",
    help="Replays every config over every turn: the heatmaps, findings, facts and turn diff",
):
    st.info(
        plain(
            f"This conversation has {len(turns_all):,} turns: comparing replays each config over every one of "
            "them, which takes a while, so it runs when asked. Once computed, it opens at once for anyone "
            "comparing these configs on this version of the conversation."
        )
    )
    st.stop()
try:
    comparison = _comparison(picked.key, configs_json, facts_json, last_turn, conv)
    findings = _findings(picked.key, configs_json, facts_json, last_turn, source)
except MemLensError as e:
    st.error(plain(e))
    st.stop()
state[f"{P}_rows"] = comparison.matrices[0].rows if comparison.matrices else []

turns = comparison.turns
if state.get(f"{P}_turn") not in turns:
    state[f"{P}_turn"] = turns[-1]
turn_name = turn_namer(conv)  # turns named as the Debugger names them: "turn 2 · 3/3", not the creation order
turn = st.select_slider(
    "Selected turn",
    options=turns,
    key=f"{P}_turn",
    format_func=turn_name,
    help="The heatmaps mark it and the turn diff shows what changed at it",
)

# -- findings ------------------------------------------------------------------------------------------------

st.subheader("Findings")
render_findings(findings, key=f"{P}-finding", on_turn=_select_turn, name=turn_name)

# -- heatmaps ------------------------------------------------------------------------------------------------

st.subheader("Retention heatmaps")
st.caption(
    "Rows are turns, columns the messages written before them (oldest → newest); hover a cell for the "
    "message, its tokens and the reason."
)
if not whole:
    st.select_slider(
        "Heatmap window ends at turn",
        options=turns_all,
        key=f"{P}_last",
        help=f"A long conversation is shown {PAGE_ROWS} turns × {PAGE_COLUMNS} messages at a time",
    )
render_heatmaps(comparison, selected_turn=turn, key=f"{P}-heatmap", name=turn_name)

st.subheader("Turn by turn")
# Three charts with a point per turn and config: megabytes for a long conversation, so drawn on request.
if len(turns_all) <= SERIES_ON_REQUEST or st.toggle(
    f"Draw the per-turn charts ({len(turns_all):,} turns)", key=f"{P}_series_on"
):
    render_series(comparison, key=f"{P}-series")

# -- facts ---------------------------------------------------------------------------------------------------

st.subheader("Facts")
if not comparison.facts:
    st.caption("No fact followed: choose “Messages I mark” in the sidebar to follow messages that matter.")
else:
    st.markdown(
        "<ul>" + "".join(f"<li>{safe_text(s)}</li>" for s in comparison.sentences) + "</ul>", unsafe_allow_html=True
    )
    render_facts_table(comparison)

# -- turn diff -----------------------------------------------------------------------------------------------

st.subheader("Turn diff")
labels = [c.label for c in configs]
if state.get(f"{P}_diff") not in labels:
    state[f"{P}_diff"] = labels[0]
chosen = st.selectbox("Config", labels, key=f"{P}_diff")
named = configs[labels.index(chosen)]
named_json = json.dumps(named.to_dict(), sort_keys=True)
diff = _turn_diff(picked.key, named_json, turn, named.label, _replay(picked.key, named_json, conv))
c1, c2, c3, c4 = st.columns(4)
c1.metric("Entered", len(diff.entered))
c2.metric("Left", len(diff.left))
c3.metric("Stayed", diff.stayed)
c4.metric(
    "Token delta",
    f"{diff.token_delta:+,}",
    help=f"history tokens {diff.previous_history_tokens:,} → {diff.history_tokens:,}",
)
st.caption(
    plain(
        f"{turn_name(turn).capitalize()} against {turn_name(diff.previous_turn)} of its thread."
        if diff.previous_turn
        else f"{turn_name(turn).capitalize()} is the first of its thread: nothing earlier to compare with."
    )
)
left, right = st.columns(2)
with left:
    st.markdown("**+ entered**")
    if diff.entered:
        st.dataframe(
            pd.DataFrame(
                [{"turn": x.turn, "role": x.role, "tokens": x.tokens, "message": x.text} for x in diff.entered]
            ),
            hide_index=True,
            key=f"{P}-entered",
            width="stretch",
        )
    else:
        st.caption("Nothing entered.")
with right:
    st.markdown("**− left**")
    if diff.left:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "turn": x.turn,
                        "role": x.role,
                        "tokens": x.tokens,
                        "why": REASON_LABELS.get(x.reason, x.reason),
                        "message": x.text,
                    }
                    for x in diff.left
                ]
            ),
            hide_index=True,
            key=f"{P}-left",
            width="stretch",
        )
    else:
        st.caption("Nothing left.")

# -- replies -------------------------------------------------------------------------------------------------

st.subheader("Replies")
want = st.toggle(
    "Re-ask every query under each config",
    key=f"{P}_replies",
    help="For a plain conversation the flow is one LLM node with that memory config: its prompt is "
    "the system prompt, the kept history and the query",
)
grid = None
if want:
    model = st.radio(
        "Answered by", list(REPLY_MODELS), key=f"{P}_reply_model", format_func=REPLY_MODELS.get, horizontal=True
    )
    grid = _replies(picked.key, configs_json, model, conv)
    only = st.toggle("Only rows where replies differ", key=f"{P}_only_differ")
    differ = set(grid.differing())
    rows = [r for r in range(len(grid.turns)) if not only or r in differ]
    st.caption(
        plain(
            f"{len(differ)} of {len(grid.turns)} rows differ · answered by "
            f"{', '.join(sorted(set(grid.models)))}"
            + (f" · the first {plural(grid.skipped, 'turn')} not re-asked" if grid.skipped else "")
        )
    )
    if rows:
        render_reply_grid(grid, rows, key=f"{P}-replies", name=turn_name)
    else:
        st.caption("Every config gives the same replies.")

# -- export --------------------------------------------------------------------------------------------------

st.subheader("Export")
st.caption(
    "One HTML file that opens anywhere without a server or network, and its JSON bundle, which loads back "
    "into this view (Conversation from → File)."
)
export_key = (picked.key, configs_json, facts_json, turn, bool(want))
if st.button("Prepare the report", key=f"{P}_export"):
    report = build_report(
        source,
        configs,
        facts_mode=mode,
        marks=[(tuple(m), label) for m, label in facts_arg] if mode == "marked" else None,
        replies=bool(want),
        selected_turn=turn,
        window=heatmap_window(conv, last_turn=last_turn, max_rows=REPORT_ROWS, max_columns=REPORT_COLUMNS),
    )
    state[f"{P}_report"] = (export_key, report_html(report), bundle_json(report))
prepared = state.get(f"{P}_report")
if prepared and prepared[0] == export_key:
    stem = file_stem(conv.name or conv.id)
    a, b = st.columns(2)
    a.download_button(
        "Download HTML report",
        prepared[1],
        file_name=f"{stem}.memlens.html",
        mime="text/html",
        key=f"{P}_download_html",
    )
    b.download_button(
        "Download JSON bundle",
        prepared[2],
        file_name=f"{stem}.memlens-report.json",
        mime="application/json",
        key=f"{P}_download_json",
    )
