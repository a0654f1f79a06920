"""The memory-config editor: one set of widgets for a :class:`~core.memory.config.MemoryConfig`, used by the
switchboard (per LLM node), Compare (per config) and the Ledger explorer.

The widgets come from the declarations: every config's common settings
(:data:`core.memory.strategies.settings.COMMON`) and the chosen memory system's own, each drawn as its
:class:`~core.memory.strategies.settings.Widget` says — so a new memory system's settings show up here
with no change to this module. Every widget's key is ``{prefix}_{key}`` (the caller's prefix namespaces
it, the declaration names the key); its first value comes from the caller's ``base`` config, and
:func:`load_config` puts a whole config into the widgets (before they are drawn, or from a callback).
What the widgets give is validated by :meth:`MemoryConfig.validate` — the one rule for every caller — and
an invalid config comes back with its error instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import streamlit as st

from core.errors import MemLensError
from core.memory import (
    CHANGE,
    CHOICE,
    COMMON,
    LAST_TURN,
    NUMBER,
    SLIDER,
    SWITCHED,
    TOGGLE,
    ZERO_UNSET,
    MemoryConfig,
    Setting,
    Strategy,
)
from core.memory.strategies import STRATEGIES as STRATEGY_REGISTRY
from core.memory.strategies import get_strategy

#: What a caller may leave out: the switchboard edits a node's recorded settings, not its label.
OPTIONAL = frozenset({"granularity", "scope", "label"})


def strategy_help() -> str:
    """Every registered memory system in a line (the strategy box's help)."""
    return " · ".join(f"{name}: {system.help or name}" for name, system in STRATEGY_REGISTRY.items())


@dataclass
class Edited:
    """What the editor gives: the config (``None`` when invalid, with ``error``), the settings as the
    widgets set them (what the switchboard compares with its baseline), and the label typed."""

    config: MemoryConfig | None
    error: str | None
    values: dict = field(default_factory=dict)
    label: str = ""


def _widget_value(system: str, setting: Setting, value: Any) -> dict[str, Any]:
    """The values of a setting's widget(s), by key, that show ``value``."""
    w = setting.widget
    keys = w.keys(system, setting.name)
    if w.kind == TOGGLE:
        return {keys[0]: bool(value)}
    if w.kind == CHOICE:
        return {keys[0]: w.unset_value if value is None else value}
    if w.kind == NUMBER:
        return {keys[0]: int(w.unset_value if value is None else value)}
    if w.kind == SLIDER:
        return {keys[0]: float(value)}
    if w.kind == ZERO_UNSET:
        return {keys[0]: int(value or 0)}
    if w.kind == SWITCHED:
        return {keys[0]: value is not None, keys[1]: int(w.unset_value if value is None else value)}
    if w.kind == CHANGE:
        first = next(iter(sorted(value)), (0, 0))
        return {keys[0]: int(first[0]), keys[1]: int(first[1])}
    return {keys[0]: value}  # TEXT_INPUT


def widget_values(
    config: MemoryConfig, label: str = "", starts: Mapping[str, Any] | None = None, systems: Sequence[str] | None = None
) -> dict:
    """The widgets' values that show ``config`` (the inverse of what :func:`edit_config` reads): its own
    system's settings, the other systems' at ``starts`` (settings by name, for every system that has
    one so named) or their defaults (a key two systems share holds this config's). ``systems`` limits
    the others to those an editor offers: a switchboard offering a node's own memory or none holds
    no other system's widgets."""
    starts = starts or {}
    out: dict[str, Any] = {"strategy": config.strategy}
    own = config.system
    others = [s for name, s in STRATEGY_REGISTRY.items() if s is not own and (systems is None or name in systems)]
    for system in [own, *others]:
        for setting in system.settings:
            if setting.widget is not None:
                value = (
                    getattr(config.settings, setting.name)
                    if system is own
                    else starts.get(setting.name, setting.default)
                )
                for key, shown in _widget_value(system.name, setting, value).items():
                    out.setdefault(key, shown)
    for setting in COMMON:
        out.update(_widget_value("", setting, getattr(config, setting.name)))
    # A label that only repeats the settings stays automatic, so it follows later edits.
    out["label"] = "" if label == config.label() else label
    return out


def load_config(prefix: str, config: MemoryConfig, label: str = "", systems: Sequence[str] | None = None) -> None:
    """Put ``config`` into the editor's widgets (call before they are drawn, or from a callback); ``systems``
    as :func:`widget_values` takes it."""
    for name, value in widget_values(config, label, systems=systems).items():
        st.session_state[f"{prefix}_{name}"] = value


def _bounds(setting: Setting) -> tuple[Any, Any]:
    w = setting.widget
    return (
        w.minimum if w.minimum is not None else setting.minimum,
        w.maximum if w.maximum is not None else setting.maximum,
    )


def _draw(system: str, setting: Setting, k: Callable[[str], str], disabled: bool, unchanged: Any) -> Any:
    """Draw a setting's widget(s) and give the value they set (``unchanged``: what a blank text keeps)."""
    w = setting.widget
    keys = [k(key) for key in w.keys(system, setting.name)]
    helps = w.help or setting.help
    low, high = _bounds(setting)
    steps = {"step": w.step} if w.step is not None else {}
    if w.kind == TOGGLE:
        return st.toggle(w.label, key=keys[0], help=helps, disabled=disabled)
    if w.kind == CHOICE:
        options = [w.unset_value if c is None else c for c in (w.offered or setting.choices)]
        words = setting.labels or {}
        show = (lambda c: words.get(c, c)) if words else str
        if w.select:
            picked = st.selectbox(w.label, options, key=keys[0], format_func=show, help=helps, disabled=disabled)
        else:
            picked = st.radio(
                w.label, options, key=keys[0], format_func=show, horizontal=True, help=helps, disabled=disabled
            )
        return None if setting.optional and picked == w.unset_value else picked
    if w.kind == NUMBER:
        return int(st.number_input(w.label, low, high, key=keys[0], help=helps, disabled=disabled, **steps))
    if w.kind == SLIDER:
        return float(st.slider(w.label, low, high, key=keys[0], help=helps, disabled=disabled, **steps))
    if w.kind == ZERO_UNSET:
        return int(st.number_input(w.label, 0, high, key=keys[0], help=helps, disabled=disabled, **steps)) or None
    if w.kind == SWITCHED:
        on = st.toggle(w.second_label, key=keys[0], help=helps, disabled=disabled)
        n = st.number_input(w.label, low, high, key=keys[1], disabled=disabled or not on)
        return int(n) if on else None
    if w.kind == CHANGE:
        a, b = st.columns(2)
        turn = a.number_input(w.label, 0, LAST_TURN, key=keys[0], help=helps, disabled=disabled)
        to = b.number_input(w.second_label, 0, high, key=keys[1], disabled=disabled)
        return ((int(turn), int(to)),) if turn and to else ()
    return st.text_input(w.label, key=keys[0], help=helps, disabled=disabled).strip() or unchanged


def _system_values(system: Strategy, base: MemoryConfig, k: Callable[[str], str]) -> dict:
    """Draw the system's settings that have a widget, in their declared order; a widget shown (or
    enabled) only while an earlier setting has some value follows what that one's widget set. A setting
    without a widget keeps the base's value when the base is a config of this system."""
    values: dict[str, Any] = {}
    for setting in system.settings:
        w = setting.widget
        if w is None:
            if base.system is system:
                values[setting.name] = getattr(base.settings, setting.name)
            continue
        if w.shown_if is not None and values.get(w.shown_if[0]) != w.shown_if[1]:
            continue
        disabled = w.enabled_if is not None and values.get(w.enabled_if[0]) != w.enabled_if[1]
        unchanged = getattr(base.settings, setting.name) if base.system is system else setting.default
        values[setting.name] = _draw(system.name, setting, k, disabled, unchanged)
    return values


def edit_config(
    prefix: str,
    base: MemoryConfig,
    *,
    strategies: Sequence[str] | None = None,
    hide: frozenset[str] = frozenset(),
    starts: Mapping[str, Any] | None = None,
) -> Edited:
    """Draw the widgets for one config, starting from ``base``; ``strategies`` are the choices
    offered (default: every registered memory system), ``hide`` the :data:`OPTIONAL` fields left out
    (they keep ``base``'s values), ``starts`` what another system's settings start from, by name."""
    state = st.session_state
    strategies = tuple(strategies or STRATEGY_REGISTRY)

    def k(name: str) -> str:
        return f"{prefix}_{name}"

    for name, value in widget_values(base, starts=starts, systems=strategies).items():
        state.setdefault(k(name), value)
    if state[k("strategy")] not in strategies:
        state[k("strategy")] = strategies[0]
    strategy = st.selectbox(
        "Strategy", list(strategies), key=k("strategy"), help=strategy_help(), disabled=len(strategies) < 2
    )
    system = get_strategy(strategy)
    values: dict = {"strategy": strategy, **_system_values(system, base, k)}
    for setting in COMMON:
        if setting.name in hide:
            values[setting.name] = getattr(base, setting.name)  # the base's, not the widget's
            continue
        if setting.name == "granularity" and not (system.remembers and system.uses_granularity):
            continue
        values[setting.name] = _draw("", setting, k, False, getattr(base, setting.name))
    label = "" if "label" in hide else st.text_input("Label (blank: automatic)", key=k("label")).strip()
    shown = {n: v for n, v in values.items() if n not in hide}
    try:
        config = MemoryConfig(**values).validate()
    except MemLensError as e:
        return Edited(None, str(e), shown, label)
    return Edited(config, None, shown, label)


__all__ = ["Edited", "OPTIONAL", "edit_config", "load_config", "strategy_help", "widget_values"]
