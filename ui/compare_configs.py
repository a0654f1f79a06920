"""The compare page's memory configs: 2–6 side by side, each a small form, and saved sets.

Each config is the memory-config editor (:mod:`ui.config_editor`) under the prefix ``{prefix}_c{i}``;
:func:`load_configs` writes a list of configs into its widgets (before the widgets are drawn, or from a button's
callback), and :func:`edit_configs` draws the forms and returns the configs as they stand.
Saved sets are kept in the store's settings (:data:`core.service.config_sets.CONFIG_SETS_KEY`).
"""

from __future__ import annotations

import streamlit as st

from core.analysis.compare import MAX_CONFIGS, MIN_CONFIGS, NamedConfig
from core.errors import MemLensError
from core.memory import MemoryConfig
from core.service import delete_config_set, save_config_set, saved_config_sets
from ui import state as keys
from ui.config_editor import edit_config, load_config
from ui.html import plain


def current_configs() -> list[NamedConfig] | None:
    """The compare page's configs in this session, if it has been opened."""
    saved = st.session_state.get(keys.COMPARE_CONFIGS)
    return [NamedConfig.from_dict(c) for c in saved] if saved else None


def _prefix(prefix: str, i: int) -> str:
    return f"{prefix}_c{i}"


def load_configs(prefix: str, configs: list[NamedConfig]) -> None:
    """Put configs into the forms' state (call before the forms are drawn, or from a callback)."""
    st.session_state[f"{prefix}_n"] = max(MIN_CONFIGS, min(MAX_CONFIGS, len(configs)))
    for i, named in enumerate(configs[:MAX_CONFIGS]):
        load_config(_prefix(prefix, i), named.config, named.label)


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
            edited = edit_config(_prefix(prefix, i), MemoryConfig(window=3))
            if edited.error:
                st.error(plain(edited.error))
            else:
                out.append(NamedConfig(edited.label or edited.config.label(), edited.config))
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
            a.button(
                "Load", key=f"{prefix}_set_load", on_click=load_configs, args=(prefix, sets[name]), width="stretch"
            )
            b.button("Delete", key=f"{prefix}_set_delete", on_click=delete_config_set, args=(db, name), width="stretch")
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
