"""The compare page's memory configs: 2–6 side by side, each a small form, and saved sets.

Each config's settings live in session state under ``{prefix}_c{i}_{field}``; :func:`load_configs`
writes a list of configs into those keys (before the widgets are drawn, or from a button's
callback), and :func:`edit_configs` draws the forms and returns the configs as they stand.
Saved sets are kept in the store's settings (:data:`core.config_sets.CONFIG_SETS_KEY`).
"""

from __future__ import annotations

import streamlit as st

from core.compare import MAX_CONFIGS, MIN_CONFIGS, NamedConfig
from core.errors import MemLensError
from core.memory import DEFAULT_FIDELITY, FIDELITIES, FIDELITY_LABELS, MemoryConfig
from core.config_sets import delete_config_set, save_config_set, saved_config_sets
from ui import state as keys
from ui.html import plain

STRATEGIES = ["dify", "window", "buffer", "off", "summary_buffer", "compaction", "trim"]
STRATEGY_HELP = ("dify: Dify's LLM-node memory (window in turns + token budget) · window: the Window Memory node "
                 "(last N messages, trimmed permanently) · buffer: everything · off: no memory · summary_buffer, "
                 "compaction, trim: strategies that rewrite history")




def current_configs() -> list[NamedConfig] | None:
    """The compare page's configs in this session, if it has been opened."""
    saved = st.session_state.get(keys.COMPARE_CONFIGS)
    return [NamedConfig.from_dict(c) for c in saved] if saved else None


def _k(prefix: str, i: int, field: str) -> str:
    return f"{prefix}_c{i}_{field}"


def load_configs(prefix: str, configs: list[NamedConfig]) -> None:
    """Put configs into the forms' state (call before the forms are drawn, or from a callback)."""
    state = st.session_state
    state[f"{prefix}_n"] = max(MIN_CONFIGS, min(MAX_CONFIGS, len(configs)))
    for i, named in enumerate(configs[:MAX_CONFIGS]):
        c = named.config
        # A label that only repeats the settings stays automatic, so it follows later edits.
        state[_k(prefix, i, "label")] = "" if named.label == c.label() else named.label
        state[_k(prefix, i, "strategy")] = c.strategy
        if c.strategy == "window":
            state[_k(prefix, i, "window_msgs")] = int(c.window or 10)
            grow = next(iter(sorted(c.window_changes)), None)
            state[_k(prefix, i, "grow_turn")] = int(grow[0]) if grow else 0
            state[_k(prefix, i, "grow_to")] = int(grow[1]) if grow else 0
        else:
            state[_k(prefix, i, "window_turns")] = int(c.window) if c.window is not None else -1
        state[_k(prefix, i, "fidelity")] = c.fidelity
        state[_k(prefix, i, "counting")] = c.plugin_token_counting
        state[_k(prefix, i, "model")] = c.model
        state[_k(prefix, i, "context")] = int(c.context_size or 0)
        state[_k(prefix, i, "max_tokens")] = int(c.max_tokens)
        state[_k(prefix, i, "granularity")] = c.granularity
        state[_k(prefix, i, "scope")] = c.scope
        state[_k(prefix, i, "history_limit")] = int(c.max_history_tokens or 0)


def _form(prefix: str, i: int) -> tuple[NamedConfig | None, str | None]:
    """One config's widgets; returns the config or the error that makes it invalid."""
    state = st.session_state

    def default(field, value):
        state.setdefault(_k(prefix, i, field), value)

    default("strategy", "dify")
    default("label", "")
    strategy = st.selectbox("Strategy", STRATEGIES, key=_k(prefix, i, "strategy"), help=STRATEGY_HELP)
    values: dict = {"strategy": strategy}
    if strategy == "dify":
        default("window_turns", 3)
        n = st.number_input("Window (turns; −1 = no window)", -1, 500, key=_k(prefix, i, "window_turns"),
                            help="0 is what Dify also reads as no limit (its 500-turn cap)")
        values["window"] = None if n < 0 else int(n)
        default("fidelity", DEFAULT_FIDELITY)
        values["fidelity"] = st.radio("Dify memory rules", FIDELITIES, key=_k(prefix, i, "fidelity"),
                                      format_func=FIDELITY_LABELS.get, horizontal=True,
                                      help="Dify 1.x as shipped: what Dify's code runs (N gives N−1 earlier turns; "
                                           "no token pruning unless plugin token counting is on). As Dify's docs "
                                           "describe: N earlier turns, always pruned by tokens.")
        default("counting", False)
        values["plugin_token_counting"] = st.toggle(
            "Plugin token counting", key=_k(prefix, i, "counting"), disabled=values["fidelity"] != "code",
            help="Dify's PLUGIN_BASED_TOKEN_COUNTING_ENABLED (off as shipped). On: prune the oldest message while "
                 "the history is over context size − max_tokens − 3.")
    elif strategy == "window":
        default("window_msgs", 10)
        values["window"] = int(st.number_input("Window (messages)", 1, 200, key=_k(prefix, i, "window_msgs")))
        default("grow_turn", 0)
        default("grow_to", 0)
        a, b = st.columns(2)
        turn = a.number_input("Grow at turn", 0, 100_000, key=_k(prefix, i, "grow_turn"),
                              help="0 = never; try a larger window later to see permanent trimming")
        to = b.number_input("…to (messages)", 0, 200, key=_k(prefix, i, "grow_to"))
        if turn and to:
            values["window_changes"] = ((int(turn), int(to)),)
    if strategy in ("summary_buffer", "trim"):
        default("history_limit", 0)
        limit = st.number_input("History limit (tokens; 0 = 2,000)", 0, 10_000_000, step=100,
                                key=_k(prefix, i, "history_limit"))
        values["max_history_tokens"] = int(limit) or None
    default("model", "gpt-4o-mini")
    values["model"] = st.text_input("Model", key=_k(prefix, i, "model")).strip() or "gpt-4o-mini"
    default("context", 0)
    values["context_size"] = int(st.number_input("Context size (0 = the model's)", 0, 10_000_000, step=1000,
                                                 key=_k(prefix, i, "context"))) or None
    default("max_tokens", 0)
    values["max_tokens"] = int(st.number_input("max_tokens", 0, 1_000_000, step=256, key=_k(prefix, i, "max_tokens")))
    if strategy in ("dify", "buffer", "summary_buffer", "compaction", "trim"):
        default("granularity", "query_answer")
        values["granularity"] = st.selectbox("Granularity", ["query_answer", "all_messages"],
                                             key=_k(prefix, i, "granularity"))
    default("scope", "thread")
    values["scope"] = st.selectbox("Scope", ["thread", "session", "call"], key=_k(prefix, i, "scope"))
    label = st.text_input("Label (blank: automatic)", key=_k(prefix, i, "label")).strip()
    try:
        config = MemoryConfig(**values).validate()
    except MemLensError as e:
        return None, str(e)
    return NamedConfig(label or config.label(), config), None


def edit_configs(prefix: str) -> list[NamedConfig]:
    """Draw the forms; returns the valid configs (an invalid one is shown with its error and left out)."""
    state = st.session_state
    state.setdefault(f"{prefix}_n", 3)
    n = int(st.number_input("How many configs", MIN_CONFIGS, MAX_CONFIGS, key=f"{prefix}_n"))
    out: list[NamedConfig] = []
    cols = st.columns(n)
    for i, col in enumerate(cols):
        with col:
            st.markdown(f"**Config {i + 1}**")
            config, error = _form(prefix, i)
            if error:
                st.error(plain(error))
            else:
                out.append(config)
    state[keys.COMPARE_CONFIGS] = [c.to_dict() for c in out]
    return out


def saved_sets(prefix: str, db, current: list[NamedConfig]) -> None:
    """Load, save and delete named config sets (kept in the store's settings)."""
    sets = saved_config_sets(db)
    left, right = st.columns(2)
    with left:
        if sets:
            name = st.selectbox("Saved config sets", list(sets), key=f"{prefix}_set")
            a, b = st.columns(2)
            a.button("Load", key=f"{prefix}_set_load", on_click=load_configs, args=(prefix, sets[name]),
                     width="stretch")
            b.button("Delete", key=f"{prefix}_set_delete", on_click=delete_config_set, args=(db, name),
                     width="stretch")
        else:
            st.caption("No saved config set yet.")
    with right:
        new = st.text_input("Save these configs as", key=f"{prefix}_set_name", placeholder="a name")
        if st.button("Save", key=f"{prefix}_set_save", disabled=not new.strip()):
            try:
                save_config_set(db, new, current)
                st.success(plain(f"Saved {len(current)} configs as “{new.strip()}”."))
            except MemLensError as e:
                st.error(plain(e))
