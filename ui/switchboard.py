"""The per-node memory switchboard: change a node's memory and see every ledger recomputed at once."""

from __future__ import annotations

import streamlit as st

from core.flow import Flow
from core.memory import FIDELITIES, FIDELITY_LABELS, MemoryConfig
from ui.html import plain


def _diff(base: MemoryConfig, values: dict) -> dict:
    return {k: v for k, v in values.items() if getattr(base, k) != v}


def render_switchboard(flow: Flow, baselines: dict[str, MemoryConfig], *, key: str) -> dict[str, dict]:
    """Controls for every LLM node; returns ``{node_id: changed settings}`` (empty: as recorded)."""
    overrides: dict[str, dict] = {}
    st.caption("Changes recompute every ledger of the conversation at once, without calling a model.")
    for node in flow.llm_nodes:
        base = baselines[node.id]
        with st.container(border=True):
            st.markdown(f"**{plain(node.title or node.id)}** · <code>{plain(node.id)}</code>", unsafe_allow_html=True)
            on = st.toggle("Memory", value=base.strategy != "off", key=f"{key}-{node.id}-on")
            c1, c2 = st.columns(2)
            window_on = c1.toggle("Window", value=bool(base.window), key=f"{key}-{node.id}-win-on",
                                  disabled=not on)
            size = c2.number_input("Window (turns)", 1, 500, int(base.window or 3), key=f"{key}-{node.id}-win",
                                   disabled=not (on and window_on))
            c3, c4 = st.columns(2)
            fidelity = c3.selectbox("Dify memory rules", FIDELITIES, index=FIDELITIES.index(base.fidelity),
                                    format_func=FIDELITY_LABELS.get, key=f"{key}-{node.id}-fid", disabled=not on,
                                    help="Dify 1.x as shipped: what Dify's code runs (a window of N gives N−1 "
                                         "earlier turns). As Dify's docs describe: N earlier turns, always "
                                         "pruned by tokens.")
            model = c4.text_input("Model", base.model, key=f"{key}-{node.id}-model",
                                  help="e.g. memlens/demo, gpt-4o-mini, anthropic/claude-sonnet-4-5, ollama/llama3")
            counting = st.toggle("Plugin token counting", value=base.plugin_token_counting,
                                 key=f"{key}-{node.id}-counting", disabled=not on or fidelity != "code",
                                 help="Dify's PLUGIN_BASED_TOKEN_COUNTING_ENABLED, off as Dify ships it: history is "
                                      "then never pruned by tokens. On: the oldest message is dropped while the "
                                      "history is over context size − max_tokens − 3.")
            c5, c6 = st.columns(2)
            max_tokens = c5.number_input("max_tokens", 0, 1_000_000, int(base.max_tokens), step=256,
                                         key=f"{key}-{node.id}-max")
            context = c6.number_input("Context size (0 = the model's)", 0, 10_000_000, int(base.context_size or 0),
                                      step=1024, key=f"{key}-{node.id}-ctx")
            values = {"strategy": ("dify" if base.strategy == "off" else base.strategy) if on else "off",
                      "window": int(size) if (on and window_on) else (None if on else base.window),
                      "fidelity": fidelity, "plugin_token_counting": bool(counting), "model": model.strip() or base.model, "max_tokens": int(max_tokens),
                      "context_size": int(context) or None}
            changed = _diff(base, values)
            if changed:
                overrides[node.id] = changed
                st.markdown(":orange-badge[changed] " + plain(", ".join(f"{k} → {v}" for k, v in changed.items())))
    return overrides
