"""The per-node memory switchboard: change a node's memory and see every ledger recomputed at once."""

from __future__ import annotations

from typing import Any, Sequence

import streamlit as st

from core.memory import MemoryConfig
from core.memory.strategies import DEFAULT_STRATEGY, OFF
from ui.config_editor import OPTIONAL, edit_config, load_config
from ui.html import plain


def _diff(base: MemoryConfig, values: dict) -> dict:
    """The settings ``values`` change: against the base's own, and against the defaults of a memory the
    base has switched off (its settings are then the ones switching it on gives)."""
    held = {
        "strategy": base.strategy,
        **base.with_(strategy=values.get("strategy", base.strategy)).values(),
        **base.values(),
    }
    return {k: v for k, v in values.items() if held.get(k) != v}


def render_switchboard(
    nodes: Sequence[Any], baselines: dict[str, MemoryConfig], *, key: str, fresh: bool = False
) -> dict[str, dict]:
    """The memory-config editor for each of ``nodes`` (anything with an ``id`` and a ``title``: a flow's
    LLM and agent nodes, ``Flow.memory_nodes``, or a replay's lenses) that has a baseline, starting from
    it; returns ``{node_id: changed settings}`` (empty: as recorded). A node keeps its own strategy or
    goes off. ``fresh`` puts the baselines into the widgets whatever they hold (the Debugger, when the
    inspected turn changes: widgets left from an earlier look at the same turn, or from an interrupted
    run, would otherwise show settings the turn did not run with)."""
    overrides: dict[str, dict] = {}
    st.caption("Changes recompute every ledger of the conversation at once, without calling a model.")
    for node in nodes:
        base = baselines.get(node.id)
        if base is None:
            continue
        with st.container(border=True):
            st.markdown(f"**{plain(node.title or node.id)}** · <code>{plain(node.id)}</code>", unsafe_allow_html=True)
            own = base.strategy if base.remembers else DEFAULT_STRATEGY  # what switching it on gives
            if fresh:
                load_config(f"{key}-{node.id}", base, systems=(own, OFF))
            edited = edit_config(f"{key}-{node.id}", base, strategies=(own, OFF), hide=OPTIONAL)
            if edited.error:
                st.error(plain(edited.error))
                continue
            changed = _diff(base, edited.values)
            if changed:
                overrides[node.id] = changed
                st.markdown(":orange-badge[changed] " + plain(", ".join(f"{k} → {v}" for k, v in changed.items())))
    return overrides
