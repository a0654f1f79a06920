"""Reading every message's reason at each turn during one walk of the turn tree.

At each turn the engine's thread view and decision say where every message of the thread stands, so
a cell of the retention matrix or a fact's presence costs O(1) instead of a full ledger per row (a
ledger at turn 2,000 lists ~5,000 messages). Reasons are computed exactly as
:meth:`core.memory.replay.Replay.ledger_at` computes them; the tests check every cell against the
ledgers.
"""

from __future__ import annotations

from typing import Any, Iterator

from core.memory.decision import Decision
from core.memory.replay import Replay
from core.memory.strategies.base import PathView
from core.model.conversation import Message
from core.model.ledger import EMPTY, GRANULARITY, KEPT, OTHER_BRANCH, OUTSIDE_WINDOW, OVER_BUDGET, TRIMMED_EARLIER

# Reasons given by position alone (the thread's first i messages): every older message shares them.
_CUT_OFFS = frozenset((TRIMMED_EARLIER, OUTSIDE_WINDOW, OVER_BUDGET))


class _RowReasons:
    """Where each earlier message stands at one turn, read from the engine's thread view and
    decision — the same rules, in the same order, as :meth:`Replay.ledger_at`."""

    __slots__ = ("replay", "view", "decision", "plan", "drops_empty", "depth", "turns", "eligible_at", "drops_older")

    def __init__(self, replay: Replay, view: PathView, decision: Decision, eligible_at: list[dict[int, int] | None]):
        self.replay = replay
        self.view = view
        self.decision = decision
        self.plan = getattr(decision, "plan", None)
        self.drops_empty = replay.drops_empty
        self.depth = replay.conversation.tree.depth
        self.turns = replay.conversation.turns
        self.eligible_at = eligible_at
        # The reasons that leave out every older message of the thread too: the memory's own block,
        # and a cut-off by position when nothing prunes by a per-message plan.
        blocked = decision.blocked
        self.drops_older = frozenset((blocked,)) if blocked else _CUT_OFFS if self.plan is None else frozenset()

    def reason(self, q: int, j: int) -> str:
        return self.decision.blocked or self.thread_reason(q, j) or OTHER_BRANCH

    def sent_from(self) -> tuple[int, bool]:
        """``(lo, exact)``: no message of the thread below sequence index ``lo`` is sent; ``exact``: each
        one from ``lo`` on is sent or not by itself alone (its eligibility and emptiness), so only a
        message ``lo`` moves past changes. A cut is exact; a plan is bounded by its oldest kept turn."""
        d, end = self.decision, self.view.length
        if d.blocked:
            return end, True
        if self.plan is None:
            return max(d.trimmed_before, d.window_start, d.budget_cut), True
        oldest = self.plan.oldest_kept_turn
        if oldest is None:
            return end, False
        q = oldest - self.replay.numbers[0]
        k = self.depth[q] - 1 if 0 <= q < len(self.depth) else -1
        positions = self.view.positions
        return (self.view.starts[k] if 0 <= k < len(positions) and positions[k] == q else 0), False

    def thread_reason(self, q: int, j: int) -> str | None:
        """:meth:`reason` of a message on the turn's thread; ``None`` for one that is not."""
        k = self.depth[q] - 1  # a turn at depth k + 1 is on the thread when the view holds it there
        positions = self.view.positions
        if k >= len(positions) or positions[k] != q:
            return None
        return self.decision.blocked or self._placed(q, j)

    def _placed(self, q: int, j: int) -> str:
        """Where a message of the thread stands, the memory not blocked."""
        table = self.eligible_at[q]  # message index -> offset among the turn's eligible messages
        if table is None:
            table = self.eligible_at[q] = {m: k for k, m in enumerate(self.replay.eligible(q))}
        offset = table.get(j)
        if offset is None:
            return GRANULARITY
        return self._at(self.view.starts[self.depth[q] - 1] + offset, self.turns[q].messages[j])

    def _at(self, i: int, msg: Message) -> str:
        """The reason of ``msg``, at sequence index ``i`` of the thread."""
        if self.plan is not None:
            r = self.plan.reason(i, msg)
            return EMPTY if r == KEPT and msg.is_empty and self.drops_empty else r
        d = self.decision
        if i < d.trimmed_before:
            return TRIMMED_EARLIER
        if i < d.window_start:
            return OUTSIDE_WINDOW
        if i < d.budget_cut:
            return OVER_BUDGET
        if msg.is_empty and self.drops_empty:
            return EMPTY
        return KEPT

    @property
    def budget(self) -> int | None:
        return self.decision.budget.limit

    def sent_texts(self) -> Iterator[str]:
        """The texts this turn's memory sends: each earlier message kept as it is, then what is sent in
        place of others (a summary, a scratchpad); what the ledger's kept entries and synthetic
        messages hold, without listing every earlier message."""
        if self.decision.blocked:
            return
        view, turns = self.view, self.turns
        for i in range(self.sent_from()[0], view.length):
            msg = turns[view.seq_pos[i]].messages[view.seq_msg[i]]
            if self._at(i, msg) == KEPT:
                yield msg.content
        if self.plan is not None:
            for s in self.plan.synthetic(view, self.replay):
                yield s.content


class _LedgerReasons:
    """The same questions answered from a built ledger (when the engine offers no walk)."""

    drops_older = frozenset()  # a built ledger makes no promise about order

    def __init__(self, replay: Replay, position: int):
        self.ledger = replay.ledger_at(position)
        self.turns = replay.conversation.turns
        self.by_key = {(e.position, e.index): e.reason for e in self.ledger.entries}
        tree = replay.conversation.tree
        self.thread = set(tree.thread(position)[:-1])

    def reason(self, q: int, j: int) -> str:
        return self.by_key[(q, j)]

    def thread_reason(self, q: int, j: int) -> str | None:
        return self.by_key[(q, j)] if q in self.thread else None

    def sent_from(self) -> tuple[int, bool]:
        return 0, False

    @property
    def budget(self) -> int | None:
        return self.ledger.budget

    def sent_texts(self) -> Iterator[str]:
        turns = self.turns
        for e in self.ledger.kept:
            yield turns[e.position].messages[e.index].content
        for s in self.ledger.synthetic:
            yield s.content


def _engine_walk(replay: Replay) -> Any:
    """The engine's depth-first walk over (position, thread view, decision), if it offers one.

    It is what makes a cell O(1); without it every row falls back to a full ledger, which is
    exact but costs O(turns) per row.
    """
    return getattr(replay, "_walk", None)


def walk_rows(replay: Replay) -> Iterator[tuple[int, Any]]:
    """(position, reasons) for every answered turn, in depth-first order of the turn tree (turn order for
    a conversation that never branched). The reasons object answers what that turn's ledger would say
    without listing every earlier message: ``reason(position, index)`` of any earlier message,
    ``thread_reason`` (``None`` off the turn's thread), ``sent_texts()`` and ``budget``.

    The reasons object is valid only until the next item: it reads the walk's live view.
    """
    turns = replay.conversation.turns
    walk = _engine_walk(replay)
    if walk is None:
        for p in replay.conversation.answered_turns():
            yield p, _LedgerReasons(replay, p)
        return
    eligible_at: list[dict[int, int] | None] = [None] * len(turns)
    for p, view, decision in walk():
        if turns[p].query_index is None:
            continue
        plan = getattr(decision, "plan", None)
        if plan is not None and not hasattr(plan, "reason"):
            yield p, _LedgerReasons(replay, p)
        else:
            yield p, _RowReasons(replay, view, decision, eligible_at)
