"""The interface every memory strategy implements, and the thread view (:class:`PathView`) it reads.

Most strategies only place a window on the thread's message sequence (:meth:`Strategy.window`)
and name a token budget; the engine does the rest with running sums. Strategies that rewrite
history — fold it into a summary, clear tool results, trim it with start/end rules — set
``plans = True`` and return their own per-turn :class:`Plan` instead.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from core.limits import DIFY_ROW_CAP, MAX_DIFY_WINDOW
from core.model.ledger import KEPT

from ..errors import ConfigError
from ..summarize import OFFLINE

if TYPE_CHECKING:  # pragma: no cover
    from core.model.conversation import Message
    from core.model.ledger import SyntheticMessage
    from ..replay import MemoryConfig, Replay
    from core.model.tokens import ModelFacts


class PathView:
    """The thread before the current turn, as one message sequence with running sums.

    Pushed and popped turn by turn during the depth-first walk, so every turn sees exactly its
    own thread without copying.
    """

    __slots__ = ("positions", "starts", "marks", "prefix", "kept_prefix", "count_prefix", "seq_pos",
                 "seq_msg", "numbers", "states")

    def __init__(self, numbers: Sequence[int]):
        self.positions: list[int] = []
        # Machine integers, not lists of int objects: a long thread's sums take a fifth of the memory.
        self.starts = array("q")
        self.marks = array("q")
        self.prefix = array("q", (0,))        # tokens, empty messages included (what pruning counts)
        self.kept_prefix = array("q", (0,))   # tokens of non-empty messages (what is sent)
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

    def push(self, position: int, mark: int, eligible: tuple[int, ...], tokens: tuple[int, ...],
             empty: tuple[bool, ...], state: object = None) -> None:
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
        del self.prefix[start + 1:], self.kept_prefix[start + 1:], self.count_prefix[start + 1:]
        del self.seq_pos[start:], self.seq_msg[start:]


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

    def __init__(self, budget: Budget, state: object, kept: int, history_tokens: int,
                 oldest_kept_turn: int | None):
        self.budget = budget
        self.state = state
        self.kept = kept                      # earlier messages sent as they are (its kept entries)
        self.history_tokens = history_tokens  # everything sent from the past, synthetic included
        self.oldest_kept_turn = oldest_kept_turn

    def reason(self, i: int, message: "Message") -> str:
        """The reason for the message at index ``i`` of the view's sequence (``kept`` = sent as
        it is; for a strategy that ``drops_empty`` the engine turns a kept empty one into ``empty``)."""
        return KEPT

    def synthetic(self, view: PathView, replay: "Replay") -> list["SyntheticMessage"]:
        return []


def message_at(view: PathView, replay: "Replay", i: int) -> "Message":
    """The message at index ``i`` of a view's sequence."""
    return replay.conversation.turns[view.seq_pos[i]].messages[view.seq_msg[i]]


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
    name = ""
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
        """Raise :class:`ConfigError` (one line: what is wrong, what to do) when this strategy cannot
        run ``config``. :meth:`MemoryConfig.validate` calls it after checking each value's range.
        The default: window sizes are Dify's turns."""
        for n in config.window_sizes():
            if not -MAX_DIFY_WINDOW <= n <= MAX_DIFY_WINDOW:
                raise ConfigError(f"window {n} is out of range: Dify windows are 1..{DIFY_ROW_CAP} turns (larger ones "
                                  f"run as {DIFY_ROW_CAP}, 0 or less means no limit); give at most {MAX_DIFY_WINDOW:,}")

    def check(self, config: "MemoryConfig", facts: "ModelFacts") -> str | None:
        """A problem that makes the config unusable with this model, or ``None``."""
        return None

    def window(self, view: PathView, current: int, config: "MemoryConfig") -> tuple[int, int]:
        """(trimmed_before, window_start) as indices into ``view``'s message sequence.

        Messages before ``trimmed_before`` were removed permanently in earlier turns; those
        from there up to ``window_start`` fall outside the window now.
        """
        return 0, 0

    def chain_windows(self, starts: np.ndarray, numbers: np.ndarray,
                      config: "MemoryConfig") -> tuple[np.ndarray, np.ndarray]:
        """:meth:`window` for every turn of a thread that never branched, at once: turn ``k`` is the
        thread's ``k``-th turn (its position too), so its view is turns ``0..k-1``; ``starts[k]`` is
        where turn ``k``'s messages start in the thread's message sequence (where its view ends) and
        ``numbers[k]`` is its turn number. Every turn's ``trimmed_before`` and ``window_start``, as two
        arrays. The same rule as :meth:`window`, written for a whole thread (a test holds the two
        equal for every strategy that does not plan). The default: the whole thread, always."""
        zeros = np.zeros(len(starts), dtype=np.int64)
        return zeros, zeros

    def reach(self, config: "MemoryConfig") -> int | None:
        """How many of the thread's newest turns before the current one a decision reads, when that
        is bounded; ``None`` when older turns or what was marked or stored with them matter.

        A strategy with a bounded reach never trims permanently (``trimmed_before`` is 0) and
        reads no marks: every eligible message older than its reach is outside the window. A
        replay then builds a turn's view from those turns only, so one turn's ledger or summary
        costs the reach, not the thread (:meth:`core.memory.replay.Replay.near_view`)."""
        return None

    def mark(self, trimmed_before: int, window_start: int) -> int:
        """State remembered for this turn, read back by its thread's later turns."""
        return window_start

    def budget_limit(self, config: "MemoryConfig", facts: "ModelFacts",
                     fixed_prompt_tokens: int) -> tuple[int | None, int]:
        """Just the numbers :meth:`budget` would give — ``(limit, overhead)`` — for the per-turn
        fast path (no note text)."""
        b = self.budget(config, facts, fixed_prompt_tokens)
        return b.limit, b.overhead

    def budget(self, config: "MemoryConfig", facts: "ModelFacts", fixed_prompt_tokens: int) -> Budget:
        return Budget(None, "", config.context_size or facts.context_size)
