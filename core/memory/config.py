"""A memory config: which memory system a node runs, the settings every config has, and the system's
own settings, declared by its module (:mod:`core.memory.strategies.settings`).

The stored form (:meth:`MemoryConfig.to_dict`, what recorded node runs, config sets, report bundles
and ledgers hold) is one flat mapping: ``strategy``, the common settings, the node-shape flags a
flow sets, then the system's own settings by name — e.g. ``{"strategy": "window", "model": …,
"window": 6, "window_changes": []}``. Configs stored before the systems declared their settings
held every system's settings in that mapping; :meth:`MemoryConfig.from_dict` still reads them,
leaving out the settings of the systems not chosen, as those were never read.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from .errors import ConfigError
from .strategies import DEFAULT_STRATEGY, STRATEGIES, get_strategy
from .strategies.base import Strategy
from .strategies.settings import COMMON, NODE_SHAPE, Setting

#: Every config's own settings, by name: the common ones and the node-shape flags a flow sets.
OWN: dict[str, Setting] = {s.name: s for s in COMMON + NODE_SHAPE}


def setting_names() -> frozenset[str]:
    """Every name a config's flat form may hold: ``strategy``, every config's own settings and each
    registered memory system's (what an override or a stored config may set)."""
    return frozenset({"strategy", *OWN, *(s.name for system in STRATEGIES.values() for s in system.settings)})


def _known(name: str) -> bool:
    """Whether ``name`` is a setting of some registered memory system (a flat stored config of the
    earlier layout holds every system's)."""
    return any(strategy.setting(name) is not None for strategy in STRATEGIES.values())


@dataclass(frozen=True, init=False)
class MemoryConfig:
    """One node's memory settings: ``strategy`` names its memory system (a key of
    :data:`core.memory.strategies.STRATEGIES`); ``settings`` holds the values of that system's own
    settings (``config.settings.window``); the other fields are every config's.

    Made from keywords: ``MemoryConfig(strategy="window", window=6)`` puts ``window`` in the window
    system's settings. A setting of another system is left out (a flat config holds every system's
    settings); a name no system declares is refused.

    Common to all systems:

    * ``model``; ``context_size`` (``None``: the model's); ``max_tokens``, what the reply may take;
    * ``granularity``: ``query_answer`` (a turn's query and answer are candidates, for the systems
      that use granularity) or ``all_messages`` (every message);
    * ``scope``: ``thread``, ``session`` or ``call``.

    Set by a flow for the node the config runs in (the node's shape):

    * ``history_as_text``: the node reads its history as text lines (a completion model's prompt,
      §2.6; a Question Classifier's, §1.7), so an empty message is an empty ``Assistant: `` line that
      is sent, not a message the chat filter drops (§2.7);
    * ``prompt_reserve``: how Dify as shipped budgets the history of a node that counts its own
      prompt — ``None``: the LLM node's rule (an empty list counted, the prompt not subtracted); a
      number: the prompt without history and that many tokens more are subtracted (the Question
      Classifier 0, the Parameter Extractor 1,000);
    * ``history_budget``: a node that passes its memory no limit, so Dify's default budget applies
      whatever the context (the Agent node; ``None`` otherwise);
    * ``sends_empty``: the node's history skips the chat filter, so an empty message in the window is
      sent as it is (the Agent node);
    * ``query_after_budget``: the current query joins the prompt after the history's budget is worked
      out, so the prompt the budget subtracts leaves it out (a basic Chatbot: its system message alone).
    """

    strategy: str
    model: str
    context_size: int | None
    max_tokens: int
    granularity: str
    scope: str
    history_as_text: bool
    prompt_reserve: int | None
    history_budget: int | None
    sends_empty: bool
    query_after_budget: bool
    settings: Any

    def __init__(self, strategy: str = DEFAULT_STRATEGY, *, settings: Any = None, **values: Any):
        system = get_strategy(strategy)
        own: dict[str, Any] = {}
        for name, value in values.items():
            if name in OWN:
                continue
            setting = system.setting(name)
            if setting is not None:
                own[name] = setting.stored_value(value)
            elif not _known(name):
                raise ConfigError(f"unknown memory setting(s): {name}")
        set_ = object.__setattr__
        set_(self, "strategy", strategy)
        for name, setting in OWN.items():
            set_(self, name, values.get(name, setting.default))
        if settings is None:
            settings = system.Settings(**own)
        elif own:
            from dataclasses import replace

            settings = replace(settings, **own)
        set_(self, "settings", settings)

    @property
    def system(self) -> Strategy:
        """The memory system this config runs (its module's :class:`Strategy`)."""
        return get_strategy(self.strategy)

    @property
    def remembers(self) -> bool:
        """Whether the memory sends any history at all (every system but ``off``)."""
        return self.system.remembers

    def values(self) -> dict[str, Any]:
        """Every setting's value by name, flat: the common ones, the node-shape flags and the system's."""
        out = {name: getattr(self, name) for name in OWN}
        out.update((s.name, getattr(self.settings, s.name)) for s in self.system.settings)
        return out

    def validate(self) -> "MemoryConfig":
        """This config, checked: each setting's value against its declaration (type, choices, range),
        then the system's own check (:meth:`Strategy.validate`). Raises :class:`ConfigError` in one line."""
        system = self.system
        if not isinstance(self.settings, system.Settings):
            raise ConfigError(f"the settings of memory {self.strategy!r} are not its own: {self.settings!r}")
        for name, setting in OWN.items():
            setting.check(getattr(self, name))
        for setting in system.settings:
            setting.check(getattr(self.settings, setting.name))
        system.validate(self)
        return self

    def to_dict(self) -> dict:
        """The stored form: one flat mapping (see the module's docstring). A setting that says so
        (``omit_default``) is left out at its default, as configs stored before it have none."""
        out: dict[str, Any] = {"strategy": self.strategy}
        for setting in COMMON + NODE_SHAPE + self.system.settings:
            holder = self if setting.name in OWN else self.settings
            value = getattr(holder, setting.name)
            if setting.omit_default and value == setting.default:
                continue
            out[setting.name] = setting.to_stored(value)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "MemoryConfig":
        """A stored config (:meth:`to_dict`, or the flat form of the earlier layout), checked."""
        values = dict(data)
        strategy = values.pop("strategy", DEFAULT_STRATEGY)
        get_strategy(strategy)  # an unknown memory is named before an unknown setting
        unknown = sorted(n for n in values if n not in OWN and not _known(n))
        if unknown:
            raise ConfigError(f"unknown memory setting(s): {', '.join(unknown)}")
        return cls(strategy, **values).validate()

    def label(self) -> str:
        """The config in a few words, as its system words it (:meth:`Strategy.label`)."""
        return self.system.label(self)

    def with_(self, **changes: Any) -> "MemoryConfig":
        """This config with ``changes`` (settings by name, flat). A change of ``strategy`` keeps the
        common settings and the settings of the same name the new system declares."""
        strategy = changes.pop("strategy", self.strategy)
        values = self.values()
        if "settings" in changes:
            values = {n: v for n, v in values.items() if n in OWN}
        return MemoryConfig(strategy, **{**values, **changes})


assert [f.name for f in fields(MemoryConfig)] == ["strategy", *OWN, "settings"], "MemoryConfig's fields are OWN's"


def config_of(stored: Mapping[str, Any] | MemoryConfig) -> MemoryConfig:
    """A config, or a stored one read back (a ledger's ``config`` holds its budget too: left out)."""
    if isinstance(stored, MemoryConfig):
        return stored
    return MemoryConfig.from_dict({k: v for k, v in stored.items() if k != "budget"})


__all__ = ["MemoryConfig", "OWN", "config_of", "setting_names"]
