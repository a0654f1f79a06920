"""The interface every memory system implements, and the thread views it reads.

A memory system is one module: a :class:`Strategy` subclass that declares its settings (names, types,
defaults, ranges, help: :mod:`core.memory.strategies.settings`), its label, its own words for the
reasons (:meth:`Strategy.explain`) and its rule. Most systems only place a window on the thread's
message sequence (:meth:`Strategy.window`) and name a token budget; the engine does the rest with
running sums. The window rule is written once and read two ways: for one turn over its thread
(:class:`PathView`), and for every turn of a thread that never branched at once, over columns
(:class:`ChainView`), so a replay's summaries and its ledgers cannot disagree. Systems that rewrite
history — fold it into a summary, clear tool results, trim it with start/end rules — set
``plans = True`` and return their own per-turn :class:`Plan` instead.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from core.model.ledger import KEPT

from ..summarize import OFFLINE
from .settings import Setting, settings_class

if TYPE_CHECKING:  # pragma: no cover
    from core.model.conversation import Conversation, Message
    from core.model.ledger import Ledger, LedgerEntry, SyntheticMessage
    from core.model.tokens import ModelFacts

    from ..config import MemoryConfig
    from ..replay import Replay


class PathView:
    """The thread before the current turn, as one message sequence with running sums.

    Pushed and popped turn by turn during the depth-first walk, so every turn sees exactly its
    own thread without copying.

    What a window rule reads of it (:meth:`Strategy.window`) is also what a :class:`ChainView`
    gives for every turn of a chain at once: :attr:`length`, :attr:`turn_count`,
    :meth:`turn_start`, :meth:`turn_number`, :meth:`first_turn_from`, :meth:`trim_for_good` and
    the arithmetic :meth:`maximum`, :meth:`minimum` and :meth:`where`. A rule that reads only those
    is one rule for both.
    """

    __slots__ = (
        "positions",
        "starts",
        "marks",
        "prefix",
        "kept_prefix",
        "count_prefix",
        "seq_pos",
        "seq_msg",
        "numbers",
        "states",
    )

    def __init__(self, numbers: Sequence[int]):
        self.positions: list[int] = []
        # Machine integers, not lists of int objects: a long thread's sums take 8 bytes an entry.
        self.starts = array("q")
        self.marks = array("q")  # each turn's window start, which a store that trims for good starts from next
        self.prefix = array("q", (0,))  # tokens, empty messages included (what pruning counts)
        self.kept_prefix = array("q", (0,))  # tokens of non-empty messages (what is sent)
        self.count_prefix = array("q", (0,))  # number of non-empty messages
        self.seq_pos: list[int] = []
        self.seq_msg: list[int] = []
        self.numbers = numbers
        self.states: list[object] = []  # a planning strategy's state after each turn's decision

    @property
    def length(self) -> int:
        return len(self.seq_pos)

    def turn_start(self, i: int) -> int:
        return self.starts[i] if i < len(self.starts) else len(self.seq_pos)

    def turn_number(self, position: int) -> int:
        return self.numbers[position]

    # -- what a window rule reads (see ChainView for the same over columns) ------------------------
    @property
    def turn_count(self) -> int:
        """How many turns of the thread come before the current one."""
        return len(self.positions)

    def first_turn_from(self, position: int) -> int:
        """The index of the thread's first turn at ``position`` or later (:attr:`turn_count` if none)."""
        return bisect_left(self.positions, position)

    def trim_for_good(self, start: int) -> tuple[int, int]:
        """A store that trims for good (what it cut once never comes back): ``(trimmed_before,
        window_start)`` for a window that would start at ``start`` — never before where the previous
        turn's window started, and everything before that trimmed earlier."""
        previous = self.marks[-1] if self.positions else 0
        return previous, max(previous, start)

    maximum = staticmethod(max)
    minimum = staticmethod(min)

    @staticmethod
    def where(condition, yes, no):
        """``yes`` if ``condition`` else ``no`` (over columns: element by element)."""
        return yes if condition else no

    @staticmethod
    def first_at_least(sums, value) -> int:
        """The first index of ascending ``sums`` holding ``value`` or more."""
        return bisect_left(sums, value)

    def push(
        self,
        position: int,
        mark: int,
        eligible: tuple[int, ...],
        tokens: tuple[int, ...],
        empty: tuple[bool, ...],
        state: object = None,
    ) -> None:
        seq_pos = self.seq_pos
        self.positions.append(position)
        self.starts.append(len(seq_pos))
        self.marks.append(mark)
        self.states.append(state)
        prefix, kept_prefix, count_prefix = self.prefix, self.kept_prefix, self.count_prefix
        p, k, c = prefix[-1], kept_prefix[-1], count_prefix[-1]
        for j in eligible:
            t = tokens[j]
            p += t
            if not empty[j]:
                k += t
                c += 1
            prefix.append(p)
            kept_prefix.append(k)
            count_prefix.append(c)
        seq_pos.extend([position] * len(eligible))
        self.seq_msg.extend(eligible)

    def pop(self) -> None:
        self.positions.pop()
        self.marks.pop()
        self.states.pop()
        start = self.starts.pop()
        del self.prefix[start + 1 :], self.kept_prefix[start + 1 :], self.count_prefix[start + 1 :]
        del self.seq_pos[start:], self.seq_msg[start:]


class ChainView:
    """Every turn of a thread that never branched, at once, as a window rule reads a :class:`PathView`
    for one turn: turn ``k`` is the thread's ``k``-th turn and its position, and its view is turns
    ``0..k-1``. ``starts[k]`` is where turn ``k``'s messages start in the thread's message sequence —
    so its view's length — and ``numbers[k]`` its turn number. Each thing read is a column, one
    value per turn, and the arithmetic works element by element; a rule given this view and
    ``current = arange(n)`` returns its decision for every turn."""

    __slots__ = ("starts", "numbers", "turn_count")

    def __init__(self, starts: np.ndarray, numbers: np.ndarray):
        self.starts = starts
        self.numbers = numbers
        self.turn_count = np.arange(len(starts), dtype=starts.dtype)

    @property
    def length(self) -> np.ndarray:
        return self.starts

    def turn_start(self, i):
        return self.starts[i]

    def turn_number(self, position):
        return self.numbers[position]

    def first_turn_from(self, position):
        # Turn k's thread is positions 0..k-1: the first at ``position`` or later is its index.
        return np.clip(position, 0, self.turn_count)

    def trim_for_good(self, start):
        # Each window starts where the previous one did or later: a running maximum (none before 0).
        window_start = np.maximum.accumulate(np.maximum(start, 0))
        trimmed = np.zeros_like(window_start)  # where the store a turn found starts: the previous window's start
        trimmed[1:] = window_start[:-1]
        return trimmed, window_start

    maximum = staticmethod(np.maximum)
    minimum = staticmethod(np.minimum)
    where = staticmethod(np.where)
    first_at_least = staticmethod(np.searchsorted)


#: A budget with no limit leaves this much room: more than any history holds.
NO_LIMIT_ROOM = 1 << 62


def budget_cut(view: PathView | ChainView, prefix, start, end, room):
    """Where the budget cuts a window ``[start, end)`` of the sequence whose running sums of the tokens
    the budget counts are ``prefix``: the first message from which the rest fits in ``room`` tokens,
    inside the window and never past its last message (Dify keeps that one even when it alone is
    over); a window with nothing in it is cut where it starts. The one rule for a turn (``view`` a
    :class:`PathView`, numbers) and for a whole chain (a :class:`ChainView`, columns); no limit is a
    ``room`` of :data:`NO_LIMIT_ROOM`."""
    last = view.maximum(end - 1, start)
    return view.minimum(view.maximum(view.first_at_least(prefix, prefix[end] - room), start), last)


@dataclass(frozen=True)
class Budget:
    """The token budget for history: ``limit`` None means no pruning applies.

    ``overhead`` is what the pruning count adds to the history's own tokens: Dify counts the
    history as one list, with the list's +3 reply priming (code profile with token counting on).
    """

    limit: int | None
    note: str = ""
    context_size: int | None = None
    overhead: int = 0


class Plan:
    """A strategy's own decision for one turn.

    The numbers a per-turn summary needs come first and must be cheap; the per-message reasons
    and the synthetic messages are asked for only when a full ledger is built. ``state`` is
    what the memory holds after this turn's decision; the next turn of the same thread reads it
    back from ``view.states[-1]``, which is how destructive strategies carry their summary.
    """

    def __init__(self, budget: Budget, state: object, kept: int, history_tokens: int, oldest_kept_turn: int | None):
        self.budget = budget
        self.state = state
        self.kept = kept  # earlier messages sent as they are (its kept entries)
        self.history_tokens = history_tokens  # everything sent from the past, synthetic included
        self.oldest_kept_turn = oldest_kept_turn

    def reason(self, i: int, message: "Message") -> str:
        """The reason for the message at index ``i`` of the view's sequence (``kept`` = sent as
        it is; for a strategy that ``drops_empty`` the engine turns a kept empty one into ``empty``)."""
        return KEPT

    def synthetic(self, view: PathView, replay: "Replay") -> list["SyntheticMessage"]:
        return []


class SuffixPlan(Plan):
    """A plan that sends the view's messages from index ``first`` on, as they are (the newest ones)."""

    def __init__(self, budget: Budget, state: object, first: int, view: PathView, replay: "Replay"):
        end = view.length
        self.first = first
        super().__init__(
            budget,
            state,
            end - first,
            tokens_between(view, first, end),
            turn_at(view, replay, first if first < end else None),
        )


def message_at(view: PathView, replay: "Replay", i: int) -> "Message":
    """The message at index ``i`` of a view's sequence."""
    return replay.conversation.turns[view.seq_pos[i]].messages[view.seq_msg[i]]


def along_view(
    view: PathView, replay: "Replay", key: Hashable, seed: Sequence, step: Callable[[list, "Message"], None]
) -> list:
    """Values carried along a view's sequence: ``seed``, then what ``step(values, message)`` appends for each
    message in turn (it may read the values before it: running sums, a running state). They are kept on the
    replay under ``key`` and only extended: the view is a thread walked depth first, so what was carried is
    still valid up to the last message it shares with the view (found by bisection — a message's thread
    fixes everything before it)."""
    cache = replay.__dict__.setdefault("_along_view", {})
    keys, values = cache.setdefault(key, ([], list(seed)))
    lead = len(values) - len(keys)
    lo, hi = 0, min(len(keys), view.length)
    while lo < hi:  # how many leading messages the cache shares with the view
        mid = (lo + hi + 1) // 2
        if keys[mid - 1] == (view.seq_pos[mid - 1], view.seq_msg[mid - 1]):
            lo = mid
        else:
            hi = mid - 1
    del keys[lo:], values[lead + lo :]
    for i in range(lo, view.length):
        keys.append((view.seq_pos[i], view.seq_msg[i]))
        step(values, message_at(view, replay, i))
    return values


def tokens_between(view: PathView, lo: int, hi: int) -> int:
    """Tokens of the messages in ``[lo, hi)`` of the view's sequence."""
    return view.prefix[hi] - view.prefix[lo] if hi > lo else 0


def turn_at(view: PathView, replay: "Replay", i: int | None) -> int | None:
    """The turn number of the message at index ``i`` (``None`` for ``None``)."""
    return None if i is None else replay.numbers[view.seq_pos[i]]


Spans = tuple[tuple[int, int], ...]


def add_turns(spans: Spans, numbers) -> Spans:
    """Turn-number spans extended by ``numbers`` (ascending, none older than the spans), so
    the turns a summary covers cost O(branches), not O(turns), to carry along a thread."""
    out = list(spans)
    for n in numbers:
        if out and out[-1][0] <= n <= out[-1][1]:
            continue
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return tuple(out)


def span_turns(spans: Spans) -> tuple[int, ...]:
    return tuple(n for a, b in spans for n in range(a, b + 1))


class Strategy:
    """A memory system (ARCHITECTURE.md, "A memory system"): its name, its declared settings, its label,
    its words for the reasons and its rule. A config of it holds the values of its settings as
    ``config.settings`` (an instance of :attr:`Settings`, made from :attr:`settings`). Everything
    another package needs to know about a system is asked here, never decided by its name."""

    name = ""
    #: One line: what this memory is (the command line's and the config editor's help).
    help = ""
    #: Its settings, each declared once with its default, range, help, flag and widget.
    settings: tuple[Setting, ...] = ()
    #: The frozen dataclass a config holds its settings' values in (made from :attr:`settings`).
    Settings: type
    #: Lenses the Debugger offers on any conversation: ``(label, settings)`` pairs.
    lenses: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    #: Whether query_answer granularity applies (dify, buffer) or every message counts (window).
    uses_granularity = True
    #: Whether the strategy sends any history at all.
    remembers = True
    #: Whether the strategy returns its own per-turn :class:`Plan` (and ignores ``window``).
    plans = False
    #: Whether an empty message it keeps is dropped before the call (Dify's filter, ``empty``).
    drops_empty = True
    #: Whether a planning strategy still plans when scope leaves it no thread (every earlier message
    #: is then ``scope``): its plan may send what an input gave this call (``Replay.history_inputs``).
    plans_without_thread = False
    #: Whether its budget follows a conversation's Dify profile (fidelity, plugin token counting):
    #: an agent node's memory takes the profile unless its own setting gives one.
    follows_dify_profile = False
    #: Whether a config of it has two profiles to compare, Dify 1.x as shipped and as its docs describe
    #: (:meth:`profiles`): the Debugger's receipt and the findings then show where they differ.
    has_profiles = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "settings" in cls.__dict__:
            from .settings import COMMON_NAMES

            clash = sorted(COMMON_NAMES & {s.name for s in cls.settings})
            if clash:
                raise TypeError(
                    f"{cls.__name__}: setting {clash[0]!r} is a setting of every config; name the "
                    f"system's own differently"
                )
            cls.Settings = settings_class(cls.__name__, cls.settings)

    # -- its settings and how it reads to people ------------------------------------------------------
    def setting(self, name: str) -> Setting | None:
        """The declaration of its setting ``name`` (``None``: it has no such setting)."""
        return next((s for s in self.settings if s.name == name), None)

    def label(self, config: "MemoryConfig") -> str:
        """A config of it in a few words (a column's, a lens's name). The default: its name and each
        setting that is not at its default (``last_n keep=4``)."""
        changed = [
            f"{s.name}={getattr(config.settings, s.name)}"
            for s in self.settings
            if getattr(config.settings, s.name) != s.default
        ]
        return " ".join([self.name, *changed])

    def describe(self, config: Mapping[str, Any]) -> str:
        """The rules a stored config (``MemoryConfig.to_dict``) ran under, in words its label leaves
        out; ``""`` when there are none (Dify's profile: "Dify 1.x as shipped · plugin token counting off")."""
        return ""

    def explain(self, entry: "LedgerEntry", config: Mapping[str, Any]) -> str | None:
        """Its own words for why ``entry`` has its reason, under a stored config (a ledger's
        ``config``: ``MemoryConfig.to_dict`` and the budget); ``None`` leaves the shared words
        (:func:`core.model.ledger_words.shared_words`). :func:`core.memory.words.explain` asks it first."""
        return None

    def short_words(self, reason: str, config: Mapping[str, Any]) -> str | None:
        """Its own few words for ``reason`` under a stored config, for markers, short tables and
        command-line lines (``"outside window of 4"``); ``None`` leaves the shared ones
        (:func:`core.model.ledger_words.shared_short_words`). :meth:`explain` is the whole sentence."""
        return None

    def pruning_words(self, config: Mapping[str, Any]) -> tuple[str, bool]:
        """What a finding says of its budget pruning messages (a stored config), and whether that
        pruning is silent — the run does not say it — and so a warning rather than information."""
        return (
            "The oldest messages are dropped while the history is over its token budget, and nothing in the "
            "run says so. Raise the context size or lower max_tokens.",
            True,
        )

    def finding_kinds(self, config: "MemoryConfig") -> tuple[str, ...]:
        """The kinds of finding whose analyses (:data:`core.analysis.findings.configs.SYSTEM_FINDINGS`) apply to
        ``config`` besides those of every config."""
        return ()

    def turn_surprise(self, replay: "Replay", ledger: "Ledger") -> str | None:
        """What a turn's ledger shows of this system's own rule that its users do not expect, in plain words
        (an Agents SDK session: ``"limit 2 counts items: this turn sent 1 item; the orphan pass dropped 1
        tool result whose call the limit cut"``), for the platform-rule finding (``platform_rule`` among
        :meth:`finding_kinds`); ``None`` when the turn shows none."""
        return None

    def claims(self, conversation: "Conversation") -> Mapping[str, Any] | None:
        """The config values a conversation opens under when its platform remembers this way (a Dify
        Agent app's log, a transcript of a tool that sends the whole thread); ``None`` when it does
        not. The registry's order decides between two claims; with none, the default memory."""
        return None

    def profiles(self, config: "MemoryConfig") -> tuple["MemoryConfig", "MemoryConfig"] | None:
        """For a system that :attr:`has_profiles`: ``config`` as shipped and as documented."""
        return None

    def later_turns_take_rows(self, config: "MemoryConfig") -> bool:
        """Whether turns written after a turn (on any branch) take places of its window when it is
        re-run as the conversation's newest turn (Dify as shipped fetches the newest rows)."""
        return False

    def compacts_per_request(self, config: "MemoryConfig") -> bool:
        """Whether it is checked before every model request of an agent's run, its tool loop too (Dify
        1.17's compaction as shipped): a run records the compactions and summaries, and the agent
        counts the whole request against it, its system prompt included."""
        return False

    # -- its rule -----------------------------------------------------------------------------------
    def plans_for(self, replay: "Replay") -> bool:
        """Whether this replay asks :meth:`plan` (else :meth:`window` and :meth:`budget`)."""
        return self.plans

    def plan(self, view: PathView, current: int, replay: "Replay") -> Plan:
        """This turn's decision, from the thread before it (``view``) and the previous state."""
        raise NotImplementedError

    def default_summarizer(self, config: "MemoryConfig"):
        """The summariser a replay uses when none is given (the offline fact summariser)."""
        return OFFLINE

    def new_view(self, replay: "Replay") -> PathView:
        """The thread view the engine walks; a strategy may extend it with its own running sums."""
        return PathView(replay.numbers)

    def validate(self, config: "MemoryConfig") -> None:
        """Raise :class:`ConfigError` (one line: what is wrong, what to do) when this system cannot run
        ``config``. :meth:`MemoryConfig.validate` calls it after checking each setting's own values
        (type, choices, range) from its declaration."""

    def check(self, config: "MemoryConfig", facts: "ModelFacts") -> str | None:
        """A problem that makes the config unusable with this model, or ``None``."""
        return None

    def window(self, view, current, config: "MemoryConfig"):
        """``(trimmed_before, window_start)`` as indices into the view's message sequence: messages
        before ``trimmed_before`` were removed permanently in earlier turns; those from there up to
        ``window_start`` fall outside the window now.

        The one window rule, read two ways: for one turn (``view`` a :class:`PathView` of its thread,
        ``current`` its position: numbers) and for every turn of a thread that never branched at once
        (``view`` a :class:`ChainView`, ``current`` every position: columns). So it reads only what
        both views give and does its arithmetic with their :meth:`~PathView.maximum`,
        :meth:`~PathView.minimum` and :meth:`~PathView.where` (Python's ``max`` cannot take a
        column); e.g. the last two messages: ``return 0, view.maximum(0, view.length - 2)``. The
        default: the whole thread."""
        return 0, 0

    def reach(self, config: "MemoryConfig") -> int | None:
        """How many of the thread's newest turns before the current one a decision reads, when that
        is bounded; ``None`` when older turns or what was marked or stored with them matter.

        A strategy with a bounded reach never trims permanently (``trimmed_before`` is 0) and
        reads no marks: every eligible message older than its reach is outside the window. A
        replay then builds a turn's view from those turns only, so one turn's ledger or summary
        costs the reach, not the thread (:meth:`core.memory.replay.Replay.near_view`)."""
        return None

    def budget_limit(
        self, config: "MemoryConfig", facts: "ModelFacts", fixed_prompt_tokens: int
    ) -> tuple[int | None, int]:
        """Just the numbers :meth:`budget` would give — ``(limit, overhead)`` — for the per-turn
        fast path (no note text)."""
        b = self.budget(config, facts, fixed_prompt_tokens)
        return b.limit, b.overhead

    def budget(self, config: "MemoryConfig", facts: "ModelFacts", fixed_prompt_tokens: int) -> Budget:
        return Budget(None, "", config.context_size or facts.context_size)


Strategy.Settings = settings_class("Strategy", ())


def window_at(settings, turn_number: int) -> int | None:
    """The window in force at a turn, for a system whose settings hold a ``window`` and its later
    ``window_changes`` (``(from_turn, size)`` pairs): the last change made by that turn, else the
    window."""
    size = settings.window
    for start, n in sorted(settings.window_changes):
        if start <= turn_number:
            size = n
    return size


def window_sizes(settings) -> list[int]:
    """Every window size such settings set: the window and each change's."""
    return [n for n in [settings.window] + [n for _, n in settings.window_changes] if n is not None]
