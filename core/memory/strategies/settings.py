"""What a memory system's settings are, declared once in the system's own module.

A :class:`Setting` names one setting with its default, the values it takes, its help and how people
give it: a flag of the command line (``--window``, kept as an alias of ``--set window=N``) and a
widget of the config editor (:class:`Widget`, drawn by ``ui/config_editor.py``). The config
(:class:`core.memory.config.MemoryConfig`) checks and stores its values from here; the CLI parses them
from here; the report lists them from here. For example::

    Setting("keep", 2, "how many of the newest messages are sent", minimum=1,
            widget=Widget(NUMBER, "Keep (messages)", maximum=50))

gives a config ``settings.keep`` (2 unless set), refuses ``keep=0`` ("keep 0 is out of range: it must
be at least 1"), reads ``--set keep=4`` and draws a number input labelled "Keep (messages)".
"""

from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass
from typing import Any, Mapping, Sequence

from core.model.tokens import DEFAULT_MODEL

from ..errors import ConfigError

#: The kinds of value a setting holds.
INT, FLOAT, BOOL, TEXT, CHANGES = "int", "float", "bool", "text", "changes"
KINDS = (INT, FLOAT, BOOL, TEXT, CHANGES)

#: The widgets the config editor draws, by kind.
TOGGLE = "toggle"  # a switch (a bool)
CHOICE = "choice"  # radio buttons, or a select box with ``select=True``
NUMBER = "number"  # a whole number from ``minimum`` to ``maximum`` by ``step``
SLIDER = "slider"  # a number slid from ``minimum`` to ``maximum`` by ``step``
TEXT_INPUT = "text"  # a line of text; left blank, the config's value stays
ZERO_UNSET = "zero_unset"  # a whole number where 0 leaves the setting unset (``None``)
SWITCHED = "switched"  # a switch and a whole number: switched off, the setting is unset (``None``)
CHANGE = "change"  # two whole numbers, a turn and a size: one change of a window (``CHANGES``)
WIDGETS = (TOGGLE, CHOICE, NUMBER, SLIDER, TEXT_INPUT, ZERO_UNSET, SWITCHED, CHANGE)
#: The last turn a :data:`CHANGE` widget offers.
LAST_TURN = 100_000

#: Words a command line may give a bool setting.
TRUE_WORDS = frozenset({"true", "on", "yes", "1"})
FALSE_WORDS = frozenset({"false", "off", "no", "0"})
#: Words a command line may give an optional setting to leave it unset.
UNSET_WORDS = frozenset({"none", "null", "unset"})


def or_list(words: Sequence[str]) -> str:
    """``["a"]`` → ``"a"``; ``["a", "b", "c"]`` → ``"a, b or c"``."""
    words = [str(w) for w in words]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


@dataclass(frozen=True)
class Widget:
    """How the config editor shows a setting. ``key`` is the widget's key after the editor's prefix
    (a :data:`SWITCHED` or :data:`CHANGE` widget has two: the switch's and the number's, or the
    turn's and the size's); settings of two systems that mean the same thing share a key, so a value
    set under one stays when the other is picked. Left empty, the key is ``{system}_{setting}``.
    ``shown_if`` and ``enabled_if`` are ``(setting, value)``: the widget is drawn, or can be changed,
    only while that setting of the same system has that value. ``unset_value`` is what a
    :data:`SWITCHED` or :data:`NUMBER` widget shows for ``None``, or what a :data:`CHOICE` offers
    for it; ``offered``: the choices a :data:`CHOICE` offers, when not all. ``second_label`` names the other widget of a pair: a :data:`SWITCHED` one's switch, a
    :data:`CHANGE`'s size (``maximum`` bounds the size; the turn goes up to :data:`LAST_TURN`)."""

    kind: str
    label: str
    key: str | tuple[str, str] = ""
    minimum: float | None = None
    maximum: float | None = None
    step: float | None = None
    help: str = ""
    select: bool = False
    unset_value: Any = None
    offered: tuple = ()
    second_label: str = ""
    shown_if: tuple[str, Any] | None = None
    enabled_if: tuple[str, Any] | None = None

    def __post_init__(self):
        if self.kind not in WIDGETS:
            raise ValueError(f"unknown widget kind {self.kind!r}; expected one of {', '.join(WIDGETS)}")

    def keys(self, system: str, setting: str) -> tuple[str, ...]:
        """The widget's keys (one, or two for a :data:`SWITCHED` or :data:`CHANGE` widget)."""
        key = self.key or f"{system}_{setting}"
        if isinstance(key, tuple):
            return key
        return (
            (f"{key}_on", key)
            if self.kind == SWITCHED
            else (f"{key}_turn", f"{key}_to")
            if self.kind == CHANGE
            else (key,)
        )


@dataclass(frozen=True)
class Setting:
    """One setting of a memory system (or one every config has, :data:`core.memory.config.COMMON`).

    ``minimum`` and ``maximum`` bound every value, inclusively; ``choices`` are the values it takes
    when they are a closed set (``labels``: their words, for the editor). ``optional``: ``None`` is a
    value too, and the help says what it means. Errors name the setting by ``words`` (default: its
    name), say ``rule`` after "is out of range: " and ``expected`` after "expected " when given, else
    words made from the bounds and the choices; ``unknown`` words a value not among the choices in
    full (``"unknown message type {value!r} for start_on"``). ``flag`` is the command line's own option for it (an
    alias of ``--set NAME=VALUE``), which refuses values below ``flag_minimum`` when that is given.
    ``omit_default``: the stored form leaves the setting out at its default, as configs were stored
    before it existed. ``widget``: how the config editor shows it (``None``: set by flows, files and
    the command line only)."""

    name: str
    default: Any
    help: str
    kind: str = INT
    optional: bool = False
    choices: tuple = ()
    labels: Mapping[Any, str] | None = None
    minimum: float | None = None
    maximum: float | None = None
    words: str = ""
    rule: str = ""
    expected: str = ""
    unknown: str = ""
    flag: str = ""
    flag_minimum: int | None = None
    omit_default: bool = False
    widget: Widget | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"setting {self.name!r}: unknown kind {self.kind!r}; expected one of {', '.join(KINDS)}")
        if self.default is not None or not self.optional:
            self.check(self.stored_value(self.default) if self.kind == CHANGES else self.default)

    @property
    def called(self) -> str:
        return self.words or self.name

    # -- values ---------------------------------------------------------------------------------
    def check(self, value: Any) -> None:
        """Raise :class:`ConfigError` (one line) unless ``value`` is one this setting takes."""
        if value is None:
            if self.optional:
                return
            raise ConfigError(f"{self.called} must be set: it has no unset value")
        kind = self.kind
        if kind == INT and (isinstance(value, bool) or not isinstance(value, int)):
            raise ConfigError(f"{self.called} must be a whole number, not {value!r}")
        if kind == FLOAT and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ConfigError(f"{self.called} must be a number, not {value!r}")
        if kind == BOOL and not isinstance(value, bool):
            raise ConfigError(f"{self.called} must be true or false, not {value!r}")
        if kind == TEXT and not isinstance(value, str):
            raise ConfigError(f"{self.called} must be text, not {value!r}")
        if kind == CHANGES:
            if not isinstance(value, tuple) or not all(
                isinstance(c, tuple) and len(c) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in c)
                for c in value
            ):
                raise ConfigError(f"{self.called} must be (turn, size) pairs of whole numbers, not {value!r}")
            return
        if self.choices and value not in self.choices:
            expected = self.expected or or_list([c for c in self.choices if c is not None])
            unknown = self.unknown.format(value=value) if self.unknown else f"unknown {self.called} {value!r}"
            raise ConfigError(f"{unknown}; expected {expected}")
        if self.minimum is not None and value < self.minimum or self.maximum is not None and value > self.maximum:
            raise ConfigError(f"{self.called} {value} is out of range: {self.rule or self._bounds(self.minimum)}")

    def _bounds(self, low) -> str:
        high = self.maximum
        if low is not None and high is not None:
            return f"it must be {low}..{high}"
        if high is not None:
            return f"it must be at most {high}"
        return "it must be 0 or more" if low == 0 else f"it must be at least {low}"

    def stored_value(self, stored: Any) -> Any:
        """The value a stored form (JSON) holds: a window change is a list there, a tuple here."""
        if self.kind == CHANGES and isinstance(stored, (list, tuple)):
            return tuple(tuple(c) if isinstance(c, list) else c for c in stored)
        return stored

    def to_stored(self, value: Any) -> Any:
        """The value as the stored form (JSON) holds it."""
        return [list(c) for c in value] if self.kind == CHANGES else value

    def parse(self, text: str, given: str = "") -> Any:
        """The value a command line's text stands for (``given``: how it was given, e.g. ``--window``,
        which errors name); raises :class:`ConfigError` when it stands for none."""
        given = given or self.called
        word = text.strip().lower()
        if self.optional and word in UNSET_WORDS:
            return None
        kind = self.kind
        if kind in (INT, FLOAT):
            try:
                value = int(text) if kind == INT else float(text)
            except ValueError:
                raise ConfigError(f"{given} must be a {'whole ' if kind == INT else ''}number, not {text!r}") from None
            low = self.flag_minimum if given == self.flag and self.flag_minimum is not None else self.minimum
            if low is not None and value < low or self.maximum is not None and value > self.maximum:
                rule = self.rule if low == self.minimum else ""
                raise ConfigError(f"{given} {text.strip()} is out of range: {rule or self._bounds(low)}")
            return value
        if kind == BOOL:
            if word in TRUE_WORDS:
                return True
            if word in FALSE_WORDS:
                return False
            raise ConfigError(f"{given} must be true or false, not {text!r}")
        if kind == CHANGES:
            changes = []
            for part in filter(None, (p.strip() for p in text.split(","))):
                try:
                    turn, size = (int(x) for x in part.split(":"))
                except ValueError:
                    raise ConfigError(
                        f"{given} must be TURN:N pairs (from turn TURN the window is N), not {text!r}"
                    ) from None
                changes.append((turn, size))
            return tuple(changes)
        return text

    def described(self) -> str:
        """The help, with the values it takes and its default: what ``--set`` lists."""
        values = f"; one of {or_list([c for c in self.choices if c is not None])}" if self.choices else ""
        default = "unset" if self.default is None else "none" if self.default == () else self.default
        return f"{self.help}{values} (default {default})"


#: The settings of every config, whatever its memory system: the model it counts with and answers,
#: what the reply may take, which messages are candidates and whose memory it is.
COMMON = (
    Setting(
        "model",
        DEFAULT_MODEL,
        "the model whose tokens and context to count with",
        kind=TEXT,
        flag="--model",
        widget=Widget(
            TEXT_INPUT,
            "Model",
            key="model",
            help="e.g. memlens/demo, gpt-4o-mini, anthropic/claude-sonnet-4-5, ollama/llama3",
        ),
    ),
    Setting(
        "context_size",
        None,
        "the model's context window in tokens (unset: the model's own)",
        optional=True,
        minimum=1,
        words="context size",
        flag="--context-size",
        widget=Widget(ZERO_UNSET, "Context size (0 = the model's)", key="context", maximum=10_000_000, step=1000),
    ),
    Setting(
        "max_tokens",
        0,
        "tokens kept for the reply (the node's max_tokens)",
        minimum=0,
        flag="--max-tokens",
        widget=Widget(NUMBER, "max_tokens", key="max_tokens", maximum=1_000_000, step=256),
    ),
    Setting(
        "granularity",
        "query_answer",
        "which messages of a turn are candidates: its query and answer, or all",
        kind=TEXT,
        choices=("query_answer", "all_messages"),
        flag="--granularity",
        widget=Widget(CHOICE, "Granularity", key="granularity", select=True),
    ),
    Setting(
        "scope",
        "thread",
        "whose memory it is: the chat thread's, one run's (session) or one call's",
        kind=TEXT,
        choices=("thread", "session", "call"),
        flag="--scope",
        widget=Widget(CHOICE, "Scope", key="scope", select=True),
    ),
)
#: What a flow sets for the node a config runs in (spec/dify-memory.md): whether its history is text
#: lines, what its budget subtracts, whether an empty message is sent (see MemoryConfig).
NODE_SHAPE = (
    Setting("history_as_text", False, "the node reads its history as text lines", kind=BOOL, omit_default=True),
    Setting(
        "prompt_reserve",
        None,
        "tokens Dify as shipped reserves besides the node's own prompt",
        optional=True,
        minimum=0,
        omit_default=True,
    ),
    Setting(
        "history_budget",
        None,
        "a fixed history budget (a node that passes its memory no limit)",
        optional=True,
        minimum=0,
        omit_default=True,
    ),
    Setting("sends_empty", False, "an empty message in the window is sent as it is", kind=BOOL, omit_default=True),
    Setting(
        "query_after_budget",
        False,
        "the query joins the prompt after the budget is worked out",
        kind=BOOL,
        omit_default=True,
    ),
)
#: Names no memory system's own setting may take: every config's, and the config's own fields.
COMMON_NAMES = frozenset({"strategy", "settings", "label", *(s.name for s in COMMON + NODE_SHAPE)})


def settings_class(owner: str, settings: Sequence[Setting]) -> type:
    """The frozen dataclass holding one value per setting (each at its default unless given)."""
    names = [s.name for s in settings]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise TypeError(f"{owner}: setting {twice[0]!r} is declared twice")
    return make_dataclass(f"{owner}Settings", [(s.name, Any, field(default=s.default)) for s in settings], frozen=True)


__all__ = [
    "BOOL",
    "CHANGE",
    "CHANGES",
    "CHOICE",
    "COMMON",
    "COMMON_NAMES",
    "FLOAT",
    "NODE_SHAPE",
    "INT",
    "KINDS",
    "NUMBER",
    "SLIDER",
    "SWITCHED",
    "Setting",
    "TEXT",
    "TEXT_INPUT",
    "TOGGLE",
    "WIDGETS",
    "Widget",
    "ZERO_UNSET",
    "or_list",
    "settings_class",
]
