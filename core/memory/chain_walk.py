"""A conversation that never branched, decided for all its turns at once over columns of its messages:
the same decisions as the turn-by-turn walk (:meth:`core.memory.replay.Replay._fast_walk`), made with
running sums, each memory system's window rule read over columns (:class:`ChainView`) and the budget's
cut by bisection."""

from __future__ import annotations

from array import array
from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING

import numpy as np

from core.model.ledger import (
    TurnSummaries,
)
from core.model.tokens import REPLY_PRIMING

from .decision import not_kept
from .strategies.base import NO_LIMIT_ROOM, ChainView, budget_cut

if TYPE_CHECKING:  # pragma: no cover
    from .replay import Replay

#: The share of the texts this process counts itself (:data:`core.memory.replay.OWN_PART`) for a conversation
#: that never branched: its turns are decided together once every text is counted, and this process meanwhile
#: lays out the columns that need no counts.
CHAIN_OWN_PART = 0.9

_messages_of = attrgetter("messages")


def _running(values: np.ndarray, dtype: type = np.int64) -> np.ndarray:
    """0, then the running sums of ``values``: ``out[i]`` is the sum of the first ``i``."""
    out: np.ndarray = np.zeros(len(values) + 1, dtype=dtype)
    np.cumsum(values, out=out[1:])
    return out


def chain_summaries(replay: Replay) -> TurnSummaries:
    """:meth:`Replay._fast_walk`'s decisions for a conversation whose thread is every turn in order,
    made for all turns at once over columns of its messages: running sums, the strategy's
    window rule read over columns for every turn (:meth:`Strategy.window` on a :class:`ChainView`) and the
    budget's cut by bisection (:func:`budget_cut`, the walk's own).
    The texts are counted first, across the cores; meanwhile this process lays out what needs
    no counts (which messages are candidates, where each turn starts, the windows)."""
    turns = replay.conversation.turns
    n = len(turns)
    strategy, config = replay.strategy, replay.config
    counting = replay.counter.counted_groups((t.messages for t in turns), own_part=CHAIN_OWN_PART)
    try:
        next(counting)  # this process's share is counted; child processes may still count the rest
        offsets = replay._message_offsets()
        total = offsets[-1]  # messages, read from the turns as needed (no list of every message is held)
        # Positions and counts of messages and turns (not of tokens) in half the bytes, when they fit.
        index = np.int32 if max(total, n + 1) < 2**31 - 1 else np.int64  # (turn numbers go up to n)
        before = np.array(offsets, dtype=index)  # a copy: the array grows with the conversation
        numbers = np.array(replay.numbers, dtype=index)
        asked = np.array([t.query_index is not None for t in turns])
        # Each question's place among the messages (of the turns that have one).
        query_at = np.array(
            [b + t.query_index for b, t in zip(offsets, turns) if t.query_index is not None], dtype=index
        )
        # The candidates, in thread order: under query_answer each turn's query and answer (eligible()).
        if strategy.uses_granularity and config.granularity == "query_answer":
            candidate = np.zeros(total, dtype=bool)
            candidate[query_at] = True
            candidate[[b + t.answer_index for b, t in zip(offsets, turns) if t.answer_index is not None]] = True
        else:
            candidate = np.ones(total, dtype=bool)
        # An empty message is Dify's filter's, unless it is sent like any other (_set_counts).
        sends_empty = replay.sends_empty
        sent = np.fromiter(
            (sends_empty or m.content != "" or not m.is_empty for t in turns for m in t.messages),
            dtype=bool,
            count=total,
        )[candidate]  # (a message with text is never empty)
        seq_pos = np.repeat(np.arange(n, dtype=index), np.diff(before))[candidate]  # each candidate's turn
        starts = np.zeros(n, dtype=index)  # where each turn's candidates start in the sequence
        np.cumsum(np.bincount(seq_pos, minlength=n)[:-1], out=starts[1:])
        count_prefix = _running(sent, index)
        blocked = replay.blocked()
        every_turn = ChainView(starts, numbers)
        if blocked:
            start = starts  # nothing from the past is a candidate
        else:  # the strategy's window rule, read over every turn at once
            start = np.broadcast_to(strategy.window(every_turn, every_turn.turn_count, config)[1], n)
        for _ in counting:  # the rest of the texts, as the child processes send their counts
            pass
    finally:
        counting.close()  # a child still counting is stopped if this failed
    # Each array is let go once used, and the columns are written in place, so the replay's peak
    # memory holds a few columns of the conversation, not every intermediate array at once.
    messages = chain.from_iterable(map(_messages_of, turns))  # (no Python frame per message)
    tokens = np.fromiter(replay.counter.message_counts(messages), dtype=np.int64, count=total)
    end = starts
    # The prompt each turn's budget subtracts (fixed_prompt_tokens, budget_prompt_tokens).
    if replay._prompt_tokens is None:  # the system prompt, and the turn's query when it has one
        fixed = np.full(n, replay._system_tokens + REPLY_PRIMING)
        fixed[asked] += tokens[query_at]
    else:
        fixed = np.array([replay._prompt_tokens(p) for p in range(n)])
    del query_at
    sequence = tokens[candidate]  # a copy, of the candidates alone
    del tokens, candidate
    prefix = _running(sequence)
    sequence[~sent] = 0  # what is sent of each
    del sent
    kept_prefix = _running(sequence)
    del sequence
    counted = fixed
    if config.query_after_budget:
        counted = np.array([replay.budget_prompt_tokens(p, f) for p, f in enumerate(fixed.tolist())])
    # One budget per prompt size, as the walk's: (limit, overhead), no limit as the summaries' NONE.
    none = TurnSummaries.NONE
    values, which = np.unique(counted, return_inverse=True)
    del counted
    limits = [strategy.budget_limit(config, replay.facts, v) for v in values.tolist()]
    limit = np.array([none if lim is None else lim for lim, _ in limits])[which]
    # The history's room under each turn's limit.
    room = np.array([NO_LIMIT_ROOM if lim is None else lim - o for lim, o in limits])[which]
    del values, which
    cut = budget_cut(every_turn, prefix, start, end, room)
    del prefix, room, start, every_turn
    kept = count_prefix[end] - count_prefix[cut]
    history = kept_prefix[end] - kept_prefix[cut]
    del kept_prefix
    # The oldest kept message's turn: the first sent candidate from the cut on.
    first = np.searchsorted(count_prefix, count_prefix[cut] + 1) - 1
    del count_prefix, cut
    oldest = np.full(n, none)
    oldest[kept > 0] = numbers[seq_pos[first[kept > 0]]]
    del first, seq_pos
    # Every earlier message is on the thread.
    dropped, not_eligible = not_kept(before[:-1], before[:-1], kept, blocked)
    del before
    pending: list[np.ndarray | None] = [
        numbers,
        kept,
        dropped,
        not_eligible,
        history,
        fixed + history,
        limit,
        oldest,
    ]
    del numbers, kept, dropped, not_eligible, history, fixed, limit, oldest
    columns = []
    for k, held in enumerate(pending):
        # Each column is made as the array it holds is let go, and written straight into its machine
        # integers; a turn without a query has no summary: its turn stays 0.
        column = array("q", bytes(8 * n))
        assert held is not None  # each slot is let go only after its column is written
        np.copyto(np.frombuffer(column, dtype=np.int64), held, where=asked)
        columns.append(column)
        pending[k] = held = None
    return TurnSummaries(n, columns)


__all__ = ["chain_summaries"]
