"""The workflow tool's Window Memory node (spec/memory-models.md §C.1, §C.6).

Keeps the last N messages (1..200, default 10) and every message counts — user, assistant,
tool calls and tool results. Trimming is permanent: after each turn the store is the last N of
the previous store plus the new round (reading 1(a) of the spec's ambiguity list), so a message
cut once is ``trimmed_earlier`` from then on, even if N later grows.

Decisions pinned here (the node's documentation is silent on them):

* the cut is a pure message count, so it may separate a tool call from its result or leave a
  tool result first — the node as written does not repair pairs;
* the system prompt is node configuration, never stored nor counted;
* an N outside 1..200 is rejected, not clamped.

Scopes: ``thread`` keeps history per chat thread across turns; ``session`` lives for one
execution and ``call`` for one call, so across turns both see nothing; without a thread the
node behaves like ``session``.

History written over by an input (the node's ``overwrite_from_input``; the replay's
``history_inputs``) replaces the store before the call: every stored message of the thread is
then ``trimmed_earlier`` and the input's messages are the store, windowed like any stored list
— those in the window are sent as synthetic messages of origin ``history set``. Without a
thread, an input is still this call's history (nothing of it persists).

Because the store is always a suffix of the latest input followed by a suffix of the thread's
messages, a turn's state is that input suffix and two indices: where the stored messages start
(everything before was trimmed earlier) and where the window starts. A replay without inputs
needs only the indices (:meth:`WindowStrategy.window`, on the engine's per-turn fast path); with
inputs the strategy plans (:meth:`WindowStrategy.plan`); both place the window with
:func:`_window_start`.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.limits import WINDOW_DEFAULT_MESSAGES as DEFAULT_WINDOW
from core.limits import WINDOW_MAX_MESSAGES as MAX_WINDOW
from core.model.ledger import KEPT, OUTSIDE_WINDOW, TRIMMED_EARLIER, SyntheticMessage
from core.words import plural

from ..errors import ConfigError
from .base import Budget, PathView, Plan, Strategy, window_sizes
from .settings import CHANGE, CHANGES, NUMBER, Setting, Widget

if TYPE_CHECKING:  # pragma: no cover
    from core.model.conversation import Message

HISTORY_SET = "history set"  # origin of the synthetic messages an input wrote into the store


@dataclass(frozen=True)
class WindowStore:
    """What one call of the memory saw: ``inputs`` (``(turn position, index in its input,
    message)``, oldest first) and the thread's messages from ``window_start`` on; those from
    ``stored_from`` up to ``window_start`` were stored but outside the window.
    ``written_over`` counts the thread's messages an input has replaced so far."""

    inputs: tuple[tuple[int, int, "Message"], ...] = ()
    stored_from: int = 0
    window_start: int = 0
    written_over: int = 0


class WindowPlan(Plan):
    def __init__(self, budget: Budget, store: WindowStore, view, replay, notes: tuple[str, ...]):
        end = view.length
        self.notes = notes
        self.inputs = [(p, j, m) for p, j, m in store.inputs if not m.is_empty]  # an empty one is not sent
        self.input_tokens = [replay.counter.message(m) for _, _, m in self.inputs]
        start = store.window_start
        counts = view.count_prefix
        kept = counts[end] - counts[start]
        # The oldest turn with a stored message sent (an empty message takes a place but is not sent).
        oldest = replay.numbers[view.seq_pos[bisect_left(counts, counts[start] + 1) - 1]] if kept else None
        super().__init__(
            budget, store, kept, view.kept_prefix[end] - view.kept_prefix[start] + sum(self.input_tokens), oldest
        )

    def reason(self, i, message):
        if i >= self.state.window_start:
            return KEPT
        return OUTSIDE_WINDOW if i >= self.state.stored_from else TRIMMED_EARLIER

    def synthetic(self, view, replay):
        return [
            SyntheticMessage(
                role=m.role,
                content=m.content,
                tokens=tokens,
                origin=HISTORY_SET,
                turn=replay.numbers[p],
                ref=f"history-set:{replay.numbers[p]}:{j + 1}",
            )
            for (p, j, m), tokens in zip(self.inputs, self.input_tokens)
        ]


def _window_start(stored_from: int, end: int, size: int) -> int:
    """Where the call's window starts in a store of the thread's messages ``[stored_from, end)``
    (after any input's messages): the last ``size`` messages, counted one by one."""
    return max(stored_from, end - size)


def size_at(view, settings, number):
    """The window's size at turn ``number`` (the window, or the last change made by then; unset: 10),
    as a window rule reads it: for a :class:`PathView` a number, for a chain's columns a column."""
    size = settings.window or DEFAULT_WINDOW
    for start, n in sorted(settings.window_changes):
        size = view.where(number >= start, n, size)
    return size


def grows(settings) -> bool:
    """Whether a later change makes the window larger than it was: what the smaller one trimmed is then
    gone for good (the trimmed-window finding)."""
    size = settings.window or DEFAULT_WINDOW
    for _, n in sorted(settings.window_changes):
        if n > size:
            return True
        size = n
    return False


_KEEPS = f"the Window Memory node keeps 1..{MAX_WINDOW} messages"


class WindowStrategy(Strategy):
    name = "window"
    help = "the Window Memory node (last N messages, trimmed permanently)"
    settings = (
        Setting(
            "window",
            None,
            f"the last N messages kept (unset: {DEFAULT_WINDOW})",
            optional=True,
            minimum=1,
            maximum=MAX_WINDOW,
            rule=_KEEPS,
            flag="--window",
            widget=Widget(NUMBER, "Window (messages)", key="window_msgs", unset_value=DEFAULT_WINDOW),
        ),
        Setting(
            "window_changes",
            (),
            "later changes of N, as TURN:N pairs (from turn TURN the window is N): what an "
            "earlier, smaller N trimmed stays gone",
            kind=CHANGES,
            flag="--window-change",
            widget=Widget(
                CHANGE,
                "Grow at turn",
                key=("grow_turn", "grow_to"),
                maximum=MAX_WINDOW,
                second_label="…to (messages)",
                help="0 = never; try a larger window later to see permanent trimming",
            ),
        ),
    )
    lenses = ((f"Window Memory node, {DEFAULT_WINDOW} messages", {"window": DEFAULT_WINDOW}),)
    uses_granularity = False
    plans = True
    plans_without_thread = True  # an input is the call's history even when nothing persists

    def label(self, config):
        return f"window {config.settings.window or DEFAULT_WINDOW} msgs"

    def explain(self, entry, config):
        return self.short_words(entry.reason, config)

    def short_words(self, reason, config):
        return (
            f"outside window of {config.get('window') or DEFAULT_WINDOW} messages" if reason == OUTSIDE_WINDOW else None
        )

    def finding_kinds(self, config):
        return ("trimmed_window",)

    def validate(self, config):
        for n in window_sizes(config.settings):
            if not 1 <= n <= MAX_WINDOW:
                raise ConfigError(f"window {n} is out of range: {_KEEPS}")

    def plans_for(self, replay) -> bool:
        # Without inputs the store is a suffix of the thread, so two indices carry the whole
        # decision and the engine's per-turn fast path applies (:meth:`window`).
        return replay.history_inputs is not None

    def window(self, view, current, config):
        # The store a call finds starts where the previous call's window started; its window is the
        # last ``size`` messages of it.
        return view.trim_for_good(view.length - size_at(view, config.settings, view.turn_number(current)))

    def plan(self, view, current, replay):
        config = replay.config
        blocked = config.scope != "thread" or not replay.has_thread
        end = view.length
        before = view.states[-1] if view.positions and not blocked else None
        if before is None:
            # Nothing stored yet, or nothing persists: the thread's messages are not this call's store.
            inputs, stored_from, written_over = (), end, 0
        else:
            # The store this call finds: the previous call's window plus that call's round.
            inputs, stored_from, written_over = before.inputs, before.window_start, before.written_over
        notes = []
        written = replay.history_inputs(current)
        if written is not None:
            written_over += end - stored_from
            inputs, stored_from = tuple((current, j, m) for j, m in enumerate(written)), end
            notes.append(f"history set from the input: {plural(len(inputs), 'message')}")
        size = size_at(PathView, config.settings, replay.numbers[current])
        room = size - (end - stored_from)  # places left in the window for the input's messages
        store = WindowStore(
            inputs[-room:] if room > 0 else (), stored_from, _window_start(stored_from, end, size), written_over
        )
        if written_over:
            notes.append(f"{plural(written_over, 'earlier message')} written over by an input")
        budget = Budget(None, "; ".join(notes), config.context_size or replay.facts.context_size)
        return WindowPlan(budget, store, view, replay, tuple(notes))


__all__ = [
    "WindowStrategy",
    "WindowStore",
    "WindowPlan",
    "HISTORY_SET",
    "DEFAULT_WINDOW",
    "MAX_WINDOW",
    "grows",
    "size_at",
]
