"""The per-node memory switchboard: change a node's memory and see every ledger recomputed at once."""

from __future__ import annotations

import streamlit as st

from core.flow.graph import Flow
from core.memory.replay import MemoryConfig
from ui.config_editor import OPTIONAL, edit_config
from ui.html import plain


def _diff(base: MemoryConfig, values: dict) -> dict:
    return {k: v for k, v in values.items() if getattr(base, k) != v}


def render_switchboard(flow: Flow, baselines: dict[str, MemoryConfig], *, key: str) -> dict[str, dict]:
    """The memory-config editor for every LLM node, starting from its baseline; returns
    ``{node_id: changed settings}`` (empty: as recorded). A node keeps its own strategy or goes off."""
    overrides: dict[str, dict] = {}
    st.caption("Changes recompute every ledger of the conversation at once, without calling a model.")
    for node in flow.llm_nodes:
        base = baselines[node.id]
        with st.container(border=True):
            st.markdown(f"**{plain(node.title or node.id)}** · <code>{plain(node.id)}</code>", unsafe_allow_html=True)
            own = "dify" if base.strategy == "off" else base.strategy
            edited = edit_config(f"{key}-{node.id}", base, strategies=(own, "off"), hide=OPTIONAL)
            if edited.error:
                st.error(plain(edited.error))
                continue
            changed = _diff(base, edited.values)
            if changed:
                overrides[node.id] = changed
                st.markdown(":orange-badge[changed] " + plain(", ".join(f"{k} → {v}" for k, v in changed.items())))
    return overrides
