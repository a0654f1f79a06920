"""The per-node memory switchboard: change a node's memory and see every ledger recomputed at once."""

from __future__ import annotations

from typing import Any, Sequence

import streamlit as st

from core.memory.replay import MemoryConfig
from ui.config_editor import OPTIONAL, edit_config, load_config
from ui.html import plain


def _diff(base: MemoryConfig, values: dict) -> dict:
    return {k: v for k, v in values.items() if getattr(base, k) != v}


def render_switchboard(nodes: Sequence[Any], baselines: dict[str, MemoryConfig], *, key: str,
                       fresh: bool = False) -> dict[str, dict]:
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
            own = "dify" if base.strategy == "off" else base.strategy
            if fresh:
                load_config(f"{key}-{node.id}", base)
            edited = edit_config(f"{key}-{node.id}", base, strategies=(own, "off"), hide=OPTIONAL)
            if edited.error:
                st.error(plain(edited.error))
                continue
            changed = _diff(base, edited.values)
            if changed:
                overrides[node.id] = changed
                st.markdown(":orange-badge[changed] " + plain(", ".join(f"{k} → {v}" for k, v in changed.items())))
    return overrides
