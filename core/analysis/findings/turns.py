"""What one node's (or config's) memory did at each turn, in the numbers the ledger-based findings read."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from core.memory.replay import Replay
from core.memory.strategies.base import PathView
from core.model.ledger import (
    EMPTY,
    GRANULARITY,
    KEPT,
    MEMORY_OFF,
    OTHER_BRANCH,
    OUTSIDE_WINDOW,
    OVER_BUDGET,
    SCOPE,
    TRIMMED_EARLIER,
    Ledger,
    LedgerEntry,
)

_NOT_CANDIDATES = frozenset({MEMORY_OFF, SCOPE, OTHER_BRANCH, GRANULARITY})


@dataclass(frozen=True)
class MemoryTurn:
    """The numbers the ledger-based findings need, for one turn of one node or config.

    ``candidates`` counts the thread's messages eligible for this memory (everything but other
    branches, scope, memory off and granularity); ``in_window`` those at or after the window's
    start (kept, pruned by the budget, or empty). ``largest`` is the ``(position, index)`` of the
    largest kept message.
    """

    turn: int
    position: int
    kept: int
    history_tokens: int
    budget: int | None
    pruned: int
    trimmed: int
    outside: int
    candidates: int
    in_window: int
    largest_tokens: int = 0
    largest: tuple[int, int] | None = None


def memory_turn(ledger: Ledger, position: int) -> MemoryTurn:
    """A turn's numbers read from its ledger."""
    counts: Counter = Counter()
    largest: LedgerEntry | None = None
    for e in ledger.entries:
        counts[e.reason] += 1
        if e.kept and (largest is None or e.tokens > largest.tokens):
            largest = e
    candidates = sum(n for r, n in counts.items() if r not in _NOT_CANDIDATES)
    return MemoryTurn(
        turn=ledger.turn,
        position=position,
        kept=counts[KEPT],
        history_tokens=ledger.history_tokens,
        budget=ledger.budget,
        pruned=counts[OVER_BUDGET],
        trimmed=counts[TRIMMED_EARLIER],
        outside=counts[OUTSIDE_WINDOW],
        candidates=candidates,
        in_window=counts[KEPT] + counts[OVER_BUDGET] + counts[EMPTY],
        largest_tokens=largest.tokens if largest else 0,
        largest=(largest.position, largest.index) if largest else None,
    )


#: Tokens per block of :class:`_FlatTokens`' block maxima.
_BLOCK = 64


class _FlatTokens:
    """The token count of every message of the walk's current thread view, as one flat list kept
    in step with the depth-first walk, with the maximum of each block of :data:`_BLOCK` counts,
    so the largest kept message of a turn costs C-speed maxima over the blocks, not over every
    message of a history that keeps everything."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.positions: list[int] = []
        self.blocks: list[int] = []

    def sync(self, view: PathView) -> list[int]:
        k = min(len(self.positions), len(view.positions))
        # A thread is fixed by its last turn, so equal last turns mean equal prefixes.
        while k and self.positions[k - 1] != view.positions[k - 1]:
            k -= 1
        keep = view.starts[k] if k < len(view.starts) else view.length
        tokens = self.tokens
        del tokens[keep:]
        first = len(tokens) // _BLOCK  # the blocks from here on changed
        prefix = view.prefix
        tokens.extend(prefix[i + 1] - prefix[i] for i in range(len(tokens), view.length))
        del self.positions[k:]
        self.positions.extend(view.positions[k:])
        del self.blocks[first:]
        self.blocks.extend(max(tokens[b * _BLOCK : (b + 1) * _BLOCK]) for b in range(first, -(-len(tokens) // _BLOCK)))
        return tokens

    def largest(self, lo: int, hi: int) -> tuple[int, int]:
        """The largest count in ``tokens[lo:hi]`` (not empty) and the index of its first occurrence."""
        tokens = self.tokens
        b0, b1 = -(-lo // _BLOCK), hi // _BLOCK  # the whole blocks inside the range
        if b1 - b0 < 2:
            best = max(tokens[lo:hi])
            return best, tokens.index(best, lo, hi)
        head_end, tail_start = b0 * _BLOCK, b1 * _BLOCK
        head = max(tokens[lo:head_end], default=-1)
        middle = max(self.blocks[b0:b1])
        tail = max(tokens[tail_start:hi], default=-1)
        best = max(head, middle, tail)
        if head == best:
            start, end = lo, head_end
        elif middle == best:
            b = self.blocks.index(best, b0, b1)
            start, end = b * _BLOCK, (b + 1) * _BLOCK
        else:
            start, end = tail_start, hi
        return best, tokens.index(best, start, end)


def memory_turns(replay: Replay) -> list[MemoryTurn]:
    """Every answered turn's numbers for one config, in turn order.

    Read from the engine's walk where it offers one (O(1) a turn for window strategies, plus a
    slice for the largest kept message); strategies that plan their own decision are read
    message by message along the thread; without a walk, from each turn's ledger.
    """
    conv = replay.conversation
    turns = conv.turns
    walk = getattr(replay, "_walk", None)
    if walk is None:
        return [memory_turn(replay.ledger_at(p), p) for p in conv.answered_turns()]
    budgets = {s.turn: s for s in replay.summaries()}
    flat = _FlatTokens()
    out: dict[int, MemoryTurn] = {}
    for p, view, d in walk():
        if turns[p].query_index is None:
            continue
        number = replay.numbers[p]
        summary = budgets[number]
        if d.blocked:
            out[p] = MemoryTurn(number, p, 0, 0, summary.budget, 0, 0, 0, 0, 0)
            continue
        if d.plan is not None:
            counts: Counter = Counter()
            best, best_at = 0, None
            for i in range(view.length):
                q, j = view.seq_pos[i], view.seq_msg[i]
                msg = turns[q].messages[j]
                r = d.plan.reason(i, msg)
                if r == KEPT and msg.is_empty and replay.drops_empty:
                    r = EMPTY
                counts[r] += 1
                if r == KEPT:
                    t = view.prefix[i + 1] - view.prefix[i]
                    if t > best:
                        best, best_at = t, (q, j)
            out[p] = MemoryTurn(
                number,
                p,
                summary.kept,
                summary.history_tokens,
                summary.budget,
                counts[OVER_BUDGET],
                counts[TRIMMED_EARLIER],
                counts[OUTSIDE_WINDOW],
                view.length,
                counts[KEPT] + counts[OVER_BUDGET] + counts[EMPTY],
                best,
                best_at,
            )
            continue
        best, best_at = 0, None
        if d.end > d.budget_cut:
            flat.sync(view)
            best, i = flat.largest(d.budget_cut, d.end)
            best_at = (view.seq_pos[i], view.seq_msg[i])
        out[p] = MemoryTurn(
            number,
            p,
            summary.kept,
            summary.history_tokens,
            summary.budget,
            d.budget_cut - d.window_start,
            d.trimmed_before,
            d.window_start - d.trimmed_before,
            d.end,
            d.end - d.window_start,
            best if summary.kept else 0,
            best_at if summary.kept else None,
        )
    return [out[p] for p in sorted(out)]
