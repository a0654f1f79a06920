"""Ledger explorer: pick a sample or stored conversation, a turn and a memory config; see what was kept."""

from __future__ import annotations

import streamlit as st

from core.memory import FIDELITIES, FIDELITY_LABELS, TRIM_COUNTERS, ConfigError, MemoryConfig, Replay
from core.samples import load_sample, sample_files
from core.store.db import resolve_url
from core.strategies.compaction import COMPACTION_PROFILES
from ui import data
from ui.html import plain
from ui.ledger_table import render_ledger_table


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


st.title("Ledger explorer")
st.caption("For a chosen turn: every earlier message, whether the memory kept it, and why.")

files = [p.name for p in sample_files()]
stored = data.service().conversations()
with st.sidebar:
    st.subheader("Conversation")
    origin = st.radio("From", ["sample", "stored"], horizontal=True, key="ledger_from",
                      format_func={"sample": "a sample file", "stored": "the store"}.get,
                      help="The store holds every conversation: played through a flow, imported or pulled")
    stored_id = None
    if origin == "stored" and stored:
        labels = {c.id: f"{c.name or 'Untitled'} · {c.turn_count} turns · {c.meta.get('source_format') or c.source}"
                  for c in stored}
        stored_id = st.selectbox("Stored conversation", list(labels), format_func=labels.get, key="ledger_stored")
    elif origin == "stored":
        st.caption("Nothing stored yet: import a file on the Import page.")
    if stored_id is None:
        name = st.selectbox("Sample", files, key="ledger_sample")
        conversations = _conversations(name)
        index = 0
        if len(conversations) > 1:
            index = st.number_input("Conversation in file", 0, len(conversations) - 1, 0, key="ledger_index")
    st.subheader("Memory")
    strategy = st.selectbox("Strategy", ["dify", "window", "buffer", "off", "summary_buffer", "compaction", "trim"],
                            key="ledger_strategy",
                            help="dify: Dify's LLM-node memory (window in turns + token budget). "
                                 "window: the Window Memory node (last N messages, permanent trimming). "
                                 "summary_buffer: recent messages within a limit, older ones folded into a summary. "
                                 "compaction: clear old tool results, then summarise older history. "
                                 "trim: LangChain's trim_messages.")
    window = None
    extra: dict = {}
    if strategy in ("summary_buffer", "trim"):
        extra["max_history_tokens"] = int(st.number_input("History limit", 0, 1_000_000, 500, step=100,
                                                          key="ledger_history_limit"))
        extra["trim_counter"] = st.radio("Count with", list(TRIM_COUNTERS), horizontal=True, key="ledger_trim_counter",
                                         help="LangChain's counters: tokens = the chat model's own "
                                              "(get_num_tokens_from_messages), messages = len, "
                                              "approximate = count_tokens_approximately")
    if strategy == "trim":
        extra["trim_strategy"] = st.radio("Keep", ["last", "first"], horizontal=True, key="ledger_trim_strategy")
        if extra["trim_strategy"] == "last":
            start = st.selectbox("Start on", ["(any)", "human", "ai"], key="ledger_start_on")
            extra["start_on"] = None if start == "(any)" else start
        extra["allow_partial"] = st.toggle("Allow partial messages", key="ledger_allow_partial")
    if strategy == "compaction":
        profiles = list(COMPACTION_PROFILES)
        extra["compaction_profile"] = st.radio(
            "Profile", profiles, format_func=COMPACTION_PROFILES.get, key="ledger_compaction_profile",
            help="Dify 1.17 as shipped: checked before every model request (inside the tool loop too), estimated "
                 "from the provider's reported usage plus characters/4, summaries pile up on reload. "
                 "Exact estimate: MemLens's own variant, an exact token count checked once per turn.")
        extra["compaction_trigger"] = float(st.slider("Compact at (share of context)", 0.1, 1.0, 0.8, 0.05,
                                                      key="ledger_compaction_trigger"))
        extra["compaction_keep_messages"] = int(st.number_input("Keep newest messages", 1, 500, 20,
                                                                key="ledger_compaction_keep"))
    if strategy == "dify":
        if st.toggle("Window", value=True, key="ledger_window_on"):
            window = st.number_input("Window (turns)", 1, 500, 3, key="ledger_window_turns")
    elif strategy == "window":
        window = st.number_input("Window (messages)", 1, 200, 10, key="ledger_window_msgs")
    fidelity = st.radio("Dify memory rules", FIDELITIES, horizontal=True, key="ledger_fidelity",
                        format_func=FIDELITY_LABELS.get, disabled=strategy != "dify",
                        help="Dify 1.x as shipped: what Dify's code runs (N gives N−1 earlier turns; no token "
                             "pruning unless plugin token counting is on). As Dify's docs describe: N earlier "
                             "turns, always pruned by tokens.")
    counting = st.toggle("Plugin token counting", key="ledger_counting", disabled=strategy != "dify" or fidelity != "code",
                         help="Dify's PLUGIN_BASED_TOKEN_COUNTING_ENABLED, off as Dify ships it.")
    model = st.text_input("Model", "gpt-4o-mini", key="ledger_model")
    context = st.number_input("Context size (0 = from the model)", 0, 10_000_000, 0, step=1000, key="ledger_context")
    max_tokens = st.number_input("max_tokens", 0, 1_000_000, 0, step=256, key="ledger_max_tokens")
    granularity = st.radio("Granularity", ["query_answer", "all_messages"], key="ledger_granularity",
                           disabled=strategy == "window")
    scope = st.radio("Scope", ["thread", "session", "call"], horizontal=True, key="ledger_scope")

try:
    config = MemoryConfig(strategy=strategy, window=int(window) if window else None, fidelity=fidelity,
                          plugin_token_counting=bool(counting),
                          model=model.strip() or "gpt-4o-mini", context_size=int(context) or None,
                          max_tokens=int(max_tokens), granularity=granularity, scope=scope, **extra).validate()
except ConfigError as e:
    st.error(plain(e))
    st.stop()

if stored_id is not None:
    replay = _stored_replay(resolve_url(), stored_id, data.stamp(data.service().info(stored_id)),
                            config)
else:
    replay = _replay(name, int(index), config)
conversation = replay.conversation
summaries = replay.summaries()
if not summaries:
    st.warning("This conversation has no user turn.")
    st.stop()

numbers = [s.turn for s in summaries]
turn = st.select_slider("Turn", options=numbers, value=numbers[-1], key="ledger_turn")
ledger = replay.ledger(turn)
query = conversation.turns[replay.position_of(turn)].query

st.markdown(f"**Turn {turn}** — the user asks:")
st.text(query)
cols = st.columns(5)
cols[0].metric("Kept", len(ledger.kept))
cols[1].metric("Dropped", len(ledger.dropped))
cols[2].metric("History tokens", f"{ledger.history_tokens:,}")
cols[3].metric("Budget", f"{ledger.budget:,}" if ledger.budget is not None else "none")
cols[4].metric("Prompt tokens", f"{ledger.prompt_tokens:,}")
st.caption(plain(f"Tokens: {replay.counter.describe()}"
                 + (f" · budget: {ledger.budget_note}" if ledger.budget_note else "")))
if ledger.exceeds_context:
    st.warning(f"The prompt plus max_tokens exceeds the model's context size of {ledger.context_size:,} tokens.")
render_ledger_table(ledger, conversation, key="ledger_table")
