"""The memory-config editor: one set of widgets for a :class:`~core.memory.replay.MemoryConfig`, used by the
switchboard (per LLM node), Compare (per config) and the Ledger explorer.

Every widget's key is ``{prefix}_{field}`` (the caller's prefix namespaces it); its first value
comes from the caller's ``base`` config, and :func:`load_config` puts a whole config into the
widgets (before they are drawn, or from a callback). What the widgets give is validated by
:meth:`MemoryConfig.validate` — the one rule for every caller — and an invalid config comes back
with its error instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import streamlit as st

from core.errors import MemLensError
from core.limits import DIFY_ROW_CAP, WINDOW_MAX_MESSAGES
from core.memory.replay import (FIDELITIES, FIDELITY_LABELS, GRANULARITIES, SCOPES, TRIM_COUNTERS, TRIM_STRATEGIES,
                                MemoryConfig)
from core.memory.strategies import AGENT_STRATEGIES, STRATEGIES as STRATEGY_REGISTRY
from core.memory.strategies.compaction import COMPACTION_PROFILES

#: Every registered strategy, in the registry's order (a new strategy shows up here by itself).
STRATEGIES = tuple(STRATEGY_REGISTRY)
STRATEGY_HELP = ("dify: Dify's LLM-node memory (window in turns + token budget) · window: the Window Memory node "
                 "(last N messages, trimmed permanently) · buffer: everything · off: no memory · summary_buffer: "
                 "recent messages within a limit, older ones folded into a summary · compaction: clear old tool "
                 "results, then summarise older history · trim: LangChain's trim_messages · dify_agent: a Dify Agent app "
                 "(agent-chat): the whole thread with its tool calls (a ReAct agent: one scratchpad text per turn), "
                 "cut by whole turns when token counting is on")
#: What a caller may leave out: the switchboard edits a node's recorded settings, not its label.
OPTIONAL = frozenset({"granularity", "scope", "label"})
ANY_START = "(any)"


@dataclass
class Edited:
    """What the editor gives: the config (``None`` when invalid, with ``error``), the settings as the
    widgets set them (what the switchboard compares with its baseline), and the label typed."""

    config: MemoryConfig | None
    error: str | None
    values: dict = field(default_factory=dict)
    label: str = ""


def widget_values(config: MemoryConfig, label: str = "") -> dict:
    """The widgets' values that show ``config`` (the inverse of what :func:`edit_config` reads)."""
    c = config
    grow = next(iter(sorted(c.window_changes)), None)
    window_turns = c.window if c.strategy != "window" and c.window is not None else 3
    return {
        "strategy": c.strategy, "window_on": c.window is not None, "window_turns": int(window_turns),
        "window_msgs": int(c.window or 10) if c.strategy == "window" else 10,
        "grow_turn": int(grow[0]) if grow else 0, "grow_to": int(grow[1]) if grow else 0,
        "fidelity": c.fidelity, "counting": c.plugin_token_counting, "model": c.model,
        "context": int(c.context_size or 0), "max_tokens": int(c.max_tokens), "granularity": c.granularity,
        "scope": c.scope, "history_limit": int(c.max_history_tokens or 0), "trim_counter": c.trim_counter,
        "trim_strategy": c.trim_strategy, "start_on": c.start_on or ANY_START, "allow_partial": c.allow_partial,
        "compaction_profile": c.compaction_profile, "compaction_trigger": float(c.compaction_trigger),
        "compaction_keep": int(c.compaction_keep_messages), "agent_strategy": c.agent_strategy,
        # A label that only repeats the settings stays automatic, so it follows later edits.
        "label": "" if label == c.label() else label,
    }


def load_config(prefix: str, config: MemoryConfig, label: str = "") -> None:
    """Put ``config`` into the editor's widgets (call before they are drawn, or from a callback)."""
    for name, value in widget_values(config, label).items():
        st.session_state[f"{prefix}_{name}"] = value


def edit_config(prefix: str, base: MemoryConfig, *, strategies: Sequence[str] = STRATEGIES,
                hide: frozenset[str] = frozenset()) -> Edited:
    """Draw the widgets for one config, starting from ``base``; ``strategies`` are the choices
    offered, ``hide`` the :data:`OPTIONAL` fields left out (they keep ``base``'s values)."""
    state = st.session_state

    def k(name: str) -> str:
        return f"{prefix}_{name}"

    for name, value in widget_values(base).items():
        state.setdefault(k(name), value)
    if state[k("strategy")] not in strategies:
        state[k("strategy")] = strategies[0]
    strategy = st.selectbox("Strategy", list(strategies), key=k("strategy"), help=STRATEGY_HELP,
                            disabled=len(strategies) < 2)
    values: dict = {"strategy": strategy}
    if strategy == "dify":
        on = st.toggle("Window", key=k("window_on"),
                       help=f"Off: no window (Dify's {DIFY_ROW_CAP}-turn cap); 0 is what Dify also reads as no limit")
        n = st.number_input("Window (turns)", 0, DIFY_ROW_CAP, key=k("window_turns"), disabled=not on)
        values["window"] = int(n) if on else None
        values["fidelity"] = st.radio("Dify memory rules", FIDELITIES, key=k("fidelity"),
                                      format_func=FIDELITY_LABELS.get, horizontal=True,
                                      help="Dify 1.x as shipped: what Dify's code runs (N gives N−1 earlier turns; "
                                           "no token pruning unless plugin token counting is on). As Dify's docs "
                                           "describe: N earlier turns, always pruned by tokens.")
        values["plugin_token_counting"] = st.toggle(
            "Plugin token counting", key=k("counting"), disabled=values["fidelity"] != "code",
            help="Dify's PLUGIN_BASED_TOKEN_COUNTING_ENABLED (off as shipped). On: prune the oldest message while "
                 "the history is over context size − max_tokens − 3.")
    elif strategy == "dify_agent":
        values["agent_strategy"] = st.radio(
            "Agent runner", list(AGENT_STRATEGIES), format_func=AGENT_STRATEGIES.get, key=k("agent_strategy"),
            horizontal=True,
            help="Dify runs an Agent app with function calling when its model has tool calls, else with ReAct. "
                 "ReAct sends each earlier turn as one assistant text: its first step's words, its last tool call "
                 "and the last tool result (the final answer is not sent again).")
        values["plugin_token_counting"] = st.toggle(
            "Plugin token counting", key=k("counting"),
            help="Dify's PLUGIN_BASED_TOKEN_COUNTING_ENABLED (off as shipped). On: keep whole turns, newest first, "
                 "while the system message and the history fit in context size − max_tokens − the query "
                 "(ReAct: the history alone, in context size − max_tokens − the system message and the query).")
    elif strategy == "window":
        values["window"] = int(st.number_input("Window (messages)", 1, WINDOW_MAX_MESSAGES, key=k("window_msgs")))
        a, b = st.columns(2)
        turn = a.number_input("Grow at turn", 0, 100_000, key=k("grow_turn"),
                              help="0 = never; try a larger window later to see permanent trimming")
        to = b.number_input("…to (messages)", 0, WINDOW_MAX_MESSAGES, key=k("grow_to"))
        values["window_changes"] = ((int(turn), int(to)),) if turn and to else ()
    if strategy in ("summary_buffer", "trim"):
        limit = st.number_input("History limit (tokens; 0 = 2,000)", 0, 10_000_000, step=100,
                                key=k("history_limit"))
        values["max_history_tokens"] = int(limit) or None
        values["trim_counter"] = st.radio("Count with", list(TRIM_COUNTERS), horizontal=True, key=k("trim_counter"),
                                          help="LangChain's counters: tokens = the chat model's own "
                                               "(get_num_tokens_from_messages), messages = len, "
                                               "approximate = count_tokens_approximately")
    if strategy == "trim":
        values["trim_strategy"] = st.radio("Keep", list(TRIM_STRATEGIES), horizontal=True, key=k("trim_strategy"))
        if values["trim_strategy"] == "last":
            start = st.selectbox("Start on", [ANY_START, "human", "ai"], key=k("start_on"))
            values["start_on"] = None if start == ANY_START else start
        values["allow_partial"] = st.toggle("Allow partial messages", key=k("allow_partial"))
    if strategy == "compaction":
        values["compaction_profile"] = st.radio(
            "Profile", list(COMPACTION_PROFILES), format_func=COMPACTION_PROFILES.get, key=k("compaction_profile"),
            help="Dify 1.17 as shipped: checked before every model request (inside the tool loop too), estimated "
                 "from the provider's reported usage plus characters/4, summaries pile up on reload. "
                 "Exact estimate: MemLens's own variant, an exact token count checked once per turn.")
        values["compaction_trigger"] = float(st.slider("Compact at (share of context)", 0.1, 1.0, step=0.05,
                                                       key=k("compaction_trigger")))
        values["compaction_keep_messages"] = int(st.number_input("Keep newest messages", 1, 500,
                                                                 key=k("compaction_keep")))
    values["model"] = st.text_input("Model", key=k("model"),
                                    help="e.g. memlens/demo, gpt-4o-mini, anthropic/claude-sonnet-4-5, "
                                         "ollama/llama3").strip() or base.model
    values["context_size"] = int(st.number_input("Context size (0 = the model's)", 0, 10_000_000, step=1000,
                                                 key=k("context"))) or None
    values["max_tokens"] = int(st.number_input("max_tokens", 0, 1_000_000, step=256, key=k("max_tokens")))
    if strategy != "off" and STRATEGY_REGISTRY[strategy].uses_granularity and "granularity" not in hide:
        values["granularity"] = st.selectbox("Granularity", list(GRANULARITIES), key=k("granularity"))
    if "scope" not in hide:
        values["scope"] = st.selectbox("Scope", list(SCOPES), key=k("scope"))
    label = "" if "label" in hide else st.text_input("Label (blank: automatic)", key=k("label")).strip()
    try:
        config = MemoryConfig(**{**_kept(base, hide), **values}).validate()
    except MemLensError as e:
        return Edited(None, str(e), values, label)
    return Edited(config, None, values, label)


def _kept(base: MemoryConfig, hide: frozenset[str]) -> dict:
    """The hidden fields keep the base's values; the rest start from the defaults."""
    out = {}
    if "granularity" in hide:
        out["granularity"] = base.granularity
    if "scope" in hide:
        out["scope"] = base.scope
    return out


__all__ = ["Edited", "STRATEGIES", "STRATEGY_HELP", "OPTIONAL", "edit_config", "load_config", "widget_values"]
