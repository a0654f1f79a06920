"""Replaying memory over a conversation: one ledger per turn, for any strategy.

For a turn, the candidates are every message of every earlier turn, in creation order. Those on
the turn's thread and eligible under the granularity form one sequence, oldest first; the
strategy places the window on it, the budget cuts it from the front, and every message gets
the reason of the first removal step that applies (see :mod:`core.model.ledger`).

Cost: each message is tokenised once (cached per text). Summaries for every turn are computed
in one depth-first walk of the turn tree with running prefix sums, so a turn costs O(log n) —
never a re-count of the history (Dify's own loop re-counts the whole list after every pop and
is quadratic). A thread that never branched — most conversations — is decided in one pass over
columns of its messages instead (the strategy's one window rule, :meth:`Strategy.window`, read over a
:class:`~core.memory.strategies.base.ChainView`: every turn at once). The full per-message ledger of one turn is built on demand in O(turns). A
strategy whose decision reads only the thread's newest turns (its ``reach``: Dify's window)
decides one turn — its ledger, or the summaries of a page of turns — from those turns alone,
so a what-if on a long conversation costs its window, not its length.

Strategies that rewrite history (``summary_buffer``, ``compaction``, ``trim``) return their own
per-turn plan instead of a window (:class:`core.memory.strategies.base.Plan`). They ride the same
walk: their state (the running summary, what was cleared) is pushed with each turn and read
back by the next turn of the thread, so it is computed incrementally, not replayed per turn.
The synthetic messages they send (summaries, placeholders) are part of the ledger and of its
token totals.
"""

from __future__ import annotations

import gc
from array import array
from bisect import bisect_left
from contextlib import contextmanager
from itertools import accumulate
from typing import Callable, Generator, Iterable, Iterator, Sequence, cast

from core.model.conversation import Conversation, Message
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
    RunLedger,
    TurnSummaries,
    TurnSummary,
)
from core.model.tokens import REPLY_PRIMING, ModelFacts, TokenCounter, counter_for, model_facts

from .chain_walk import chain_summaries
from .config import MemoryConfig
from .decision import Decision, budgeted_prompt, not_kept
from .entries import expand_runs, history_of, pick_entries
from .errors import ConfigError
from .strategies import get_strategy
from .strategies.base import NO_LIMIT_ROOM, Budget, PathView, Strategy, budget_cut
from .summarize import Summarizer

#: The part of an equal share of a long replay's new text this process tokenises itself when the
#: work is split across processes: it also decides every turn meanwhile, which takes about half
#: as long again as tokenising that turn, so the child processes take the larger part.
OWN_PART = 0.5


#: How many turns' messages a replay sets its token counts for at once (:meth:`Replay._set_counts`).
COUNT_CHUNK = 1024


@contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """Pauses Python's cycle collector for a block that makes no reference cycles.

    A replay allocates a few objects per turn (counts, summaries); on a long conversation that
    sets off a full collection, which walks every object of the conversation too and frees
    nothing, since the replay leaves no cycles. Reference counting still frees everything as
    usual meanwhile.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def turn_number(conversation: Conversation, position: int) -> int:
    """The 1-based number of the turn at ``position``; an opening turn without a query is turn 0."""
    turns = conversation.turns
    return position + (0 if turns and turns[0].query_index is None else 1)


def turn_numbers(conversation: Conversation, start: int = 0) -> list[int]:
    """:func:`turn_number` of every turn (``start``: of the turns from that position on)."""
    first = turn_number(conversation, start)
    return list(range(first, first + max(len(conversation.turns) - start, 0)))


class Replay:
    """One memory config replayed over a conversation.

    ``prompt_tokens`` may give, per turn position, the tokens of everything in the prompt except
    the history (system, template, current query, reply priming); by default that is the
    conversation's system prompt plus the turn's query. ``summarizer`` writes the summaries of
    the summarising strategies (default: the offline :class:`core.memory.summarize.FactSummarizer`).
    ``history_inputs`` may give, per turn position, the messages an input wrote over the memory's
    history before that turn's call (the Window Memory node's ``overwrite_from_input``), ``None``
    where there was none; strategies without such an input ignore it.
    """

    def __init__(
        self,
        conversation: Conversation,
        config: MemoryConfig,
        *,
        system_prompt: str | None = None,
        has_thread: bool = True,
        prompt_tokens: Callable[[int], int] | None = None,
        counter: TokenCounter | None = None,
        summarizer: Summarizer | None = None,
        history_inputs: Callable[[int], Sequence[Message] | None] | None = None,
    ):
        self.conversation = conversation
        self.config = config.validate()
        self.strategy: Strategy = get_strategy(config.strategy)
        self.counter: TokenCounter = counter or counter_for(config.model)
        self.facts: ModelFacts = model_facts(config.model)
        problem = self.strategy.check(self.config, self.facts)
        if problem:
            raise ConfigError(problem)
        self.summarizer: Summarizer = summarizer or self.strategy.default_summarizer(self.config)
        self.system_prompt = conversation.system_prompt if system_prompt is None else system_prompt
        self.has_thread = has_thread
        self.history_inputs = history_inputs
        self.plans = self.strategy.plans_for(self)  # else the strategy's window and budget decide
        #: Whether an empty message in the window is sent like any other: a text line when the node
        #: reads its history as text, or a message when no filter runs over its history.
        self.sends_empty = config.history_as_text or config.sends_empty
        #: Else it is left out as ``empty`` (the chat filter), by the strategies that send what they keep.
        self.drops_empty = self.strategy.drops_empty and not self.sends_empty
        self.numbers = array("q", turn_numbers(conversation))  # machine integers: no int object per turn
        self._prompt_tokens = prompt_tokens
        # Per turn: its messages' tokens, emptiness and candidates, set as first needed (_per_turn).
        self._tokens: list[tuple[int, ...] | None] = []
        self._empty: list[tuple[bool, ...] | None] = []
        self._eligible: list[tuple[int, ...] | None] = []
        # Most turns share a few shapes (query and answer; a tool round between): one tuple per
        # shape, not one per turn, keeps a long replay's memory near its conversation's.
        # (Two tables: a tuple of bools equals the tuple of ints with the same values.)
        self._shapes: dict[tuple[bool, ...], tuple[bool, ...]] = {}
        self._index_shapes: dict[object, tuple[int, ...]] = {}
        self._msg_before: array | None = None  # machine integers: no int object per turn
        self._thread_before: array | None = None  # (thread_messages_before)
        self._system_tokens = self.counter.chat("system", self.system_prompt) if self.system_prompt else 0
        self._summaries: TurnSummaries | None = None
        self._budgets: dict[int, Budget] = {}  # by the prompt tokens it subtracts (budget_prompt_tokens)

    # -- per-turn facts, computed once ------------------------------------------------------------
    def _per_turn(self) -> None:
        """Sizes the per-turn tables to the conversation, the first time one is needed: a replay
        that decides every turn at once (:meth:`_chain_summaries`) never reads them, so it never
        holds one slot per turn for each."""
        n = len(self.conversation.turns)
        if len(self._tokens) < n:
            for per_turn in (self._tokens, self._empty, self._eligible):
                per_turn.extend([None] * (n - len(per_turn)))

    def message_tokens(self, position: int) -> tuple[int, ...]:
        self._per_turn()
        toks = self._tokens[position]
        if toks is None:
            self._set_counts(self._missing_near(position))
            toks = self._tokens[position]
        return toks  # type: ignore[return-value]

    def _missing_near(self, position: int) -> Sequence[int]:
        """The turns whose counts a miss at ``position`` sets: that turn alone; once the summaries
        are made every text is counted (:meth:`_chain_summaries` leaves the turns' counts unset), so
        the turns not set yet in its block of COUNT_CHUNK, in one pass: a ledger or a view asks for
        every earlier turn of its thread in turn, and one pass sets them all at once instead of one
        call per turn."""
        if self._summaries is None:
            return (position,)
        tokens = self._tokens
        lo = position - position % COUNT_CHUNK
        return [p for p in range(lo, min(lo + COUNT_CHUNK, len(tokens))) if tokens[p] is None]

    def _set_counts(self, positions: Sequence[int]) -> None:
        """Sets the message tokens and emptiness of the turns at ``positions``, all at once: the
        per-message work runs over one flat list (a replay asks this of every turn, in batches)."""
        turns = self.conversation.turns
        self._per_turn()
        tokens, empties, shapes = self._tokens, self._empty, self._shapes
        lists = [turns[p].messages for p in positions]
        flat = [m for msgs in lists for m in msgs]
        counts = self.counter.message_list(flat)
        # An empty message is Dify's filter's, unless it is sent like any other.
        empty = [False] * len(flat) if self.sends_empty else [m.is_empty for m in flat]
        lo = 0
        for p, msgs in zip(positions, lists):
            hi = lo + len(msgs)
            tokens[p] = tuple(counts[lo:hi])
            # Most turns share a few shapes: one tuple per shape, not per turn.
            shape = tuple(empty[lo:hi])
            empties[p] = shapes.setdefault(shape, shape)
            lo = hi

    def _empties(self, position: int) -> tuple[bool, ...]:
        self._per_turn()
        if self._empty[position] is None:
            self._set_counts(self._missing_near(position))
        return self._empty[position]  # type: ignore[return-value]

    def eligible(self, position: int) -> tuple[int, ...]:
        """Indices of the turn's messages that are candidates under the granularity, ascending."""
        self._per_turn()
        el = self._eligible[position]
        if el is None:
            turn = self.conversation.turns[position]
            # One tuple per shape of turn (a replay is in one granularity mode throughout).
            query_answer = self.strategy.uses_granularity and self.config.granularity == "query_answer"
            key = (turn.query_index, turn.answer_index) if query_answer else len(turn.messages)
            el = self._index_shapes.get(key)
            if el is None:
                el = self._index_shapes[key] = (
                    tuple(sorted(i for i in key if i is not None)) if isinstance(key, tuple) else tuple(range(key))
                )
            self._eligible[position] = el
        return el

    def fixed_prompt_tokens(self, position: int) -> int:
        if self._prompt_tokens is not None:
            return self._prompt_tokens(position)
        q = self.conversation.turns[position].query_index
        return self._system_tokens + (self.message_tokens(position)[q] if q is not None else 0) + REPLY_PRIMING

    def _message_offsets(self) -> Sequence[int]:
        """``messages_before`` for every position, as one list (for bisecting)."""
        self.messages_before(0)
        return self._msg_before  # type: ignore[return-value]

    def messages_before(self, position: int) -> int:
        before = self._msg_before
        if before is None:
            before = self._msg_before = array("q", (0,))
        turns = self.conversation.turns
        if len(before) <= len(turns):  # extended, not recounted, when the conversation grew
            held = len(before)
            before.extend(accumulate((len(t.messages) for t in turns[held - 1 :]), initial=before[-1]))
            del before[held]  # the running total it started from, held already
        return before[position]

    # -- the decision ------------------------------------------------------------------------------
    def budget_prompt_tokens(self, position: int, fixed: int) -> int:
        """:func:`budgeted_prompt` of the turn at ``position``."""
        if not self.config.query_after_budget:
            return fixed
        q = self.conversation.turns[position].query_index
        return budgeted_prompt(fixed, self.message_tokens(position)[q] if q is not None else 0, True)

    def blocked(self) -> str | None:
        """Why no earlier message is this memory's to send, whatever the turn: ``memory_off``, or
        ``scope`` (not the thread's memory, or no thread kept); ``None`` when the thread's are."""
        if not self.strategy.remembers:
            return MEMORY_OFF
        if self.config.scope != "thread" or not self.has_thread:
            return SCOPE
        return None

    def _decide(self, view: PathView, position: int) -> Decision:
        fixed = self.fixed_prompt_tokens(position)
        blocked = self.blocked()
        end = view.length
        if self.plans and (not blocked or blocked == SCOPE and self.strategy.plans_without_thread):
            plan = self.strategy.plan(view, position, self)
            return Decision(0, 0, 0, end, plan.budget, fixed, blocked, plan)
        counted = self.budget_prompt_tokens(position, fixed)
        budget = self._budgets.get(counted)
        if budget is None:  # a pure function of the prompt it counts: made once per value, not per turn
            budget = self._budgets[counted] = self.strategy.budget(self.config, self.facts, counted)
        if blocked:
            return Decision(end, end, end, end, budget, fixed, blocked)
        trimmed, start = self.strategy.window(view, position, self.config)
        room = NO_LIMIT_ROOM if budget.limit is None else budget.limit - budget.overhead
        return Decision(trimmed, start, budget_cut(view, view.prefix, start, end, room), end, budget, fixed)

    def _push(self, view: PathView, position: int, decision: Decision) -> None:
        tokens = self.message_tokens(position)
        state = decision.plan.state if decision.plan is not None else None
        view.push(position, decision.window_start, self.eligible(position), tokens, self._empties(position), state)

    def thread_messages_before(self, position: int) -> int:
        """How many of the messages before ``position`` are on its thread (the rest are on other
        branches): one pass over the tree, the first time any turn's is asked for."""
        held = self._thread_before
        turns = self.conversation.turns
        if held is None or len(held) < len(turns):  # (re)made when the conversation grew
            parent = self.conversation.tree.thread_parent
            before = self._message_offsets()
            held = self._thread_before = array("q", bytes(8 * len(turns)))
            for i, p in enumerate(parent):
                if p is not None:
                    held[i] = held[p] + before[p + 1] - before[p]
        return held[position]

    def _summary(self, view: PathView, position: int, d: Decision) -> TurnSummary:
        total, on_thread = self.messages_before(position), self.thread_messages_before(position)
        if d.plan is not None:
            p = d.plan
            dropped, not_eligible = not_kept(total, on_thread, p.kept, d.blocked)
            return TurnSummary(
                turn=self.numbers[position],
                kept=p.kept,
                dropped=dropped,
                not_eligible=not_eligible,
                history_tokens=p.history_tokens,
                prompt_tokens=d.fixed_prompt_tokens + p.history_tokens,
                budget=p.budget.limit,
                oldest_kept_turn=p.oldest_kept_turn,
            )
        kept = view.count_prefix[d.end] - view.count_prefix[d.budget_cut]
        history = view.kept_prefix[d.end] - view.kept_prefix[d.budget_cut]
        oldest = None
        if kept:
            j = bisect_left(view.count_prefix, view.count_prefix[d.budget_cut] + 1) - 1
            oldest = self.numbers[view.seq_pos[j]]
        dropped, not_eligible = not_kept(total, on_thread, kept, d.blocked)
        return TurnSummary(
            turn=self.numbers[position],
            kept=kept,
            dropped=dropped,
            not_eligible=not_eligible,
            history_tokens=history,
            prompt_tokens=d.fixed_prompt_tokens + history,
            budget=d.budget.limit,
            oldest_kept_turn=oldest,
        )

    def _walk(self) -> Iterator[tuple[int, PathView, Decision]]:
        """Every turn with its thread's view, depth first, parents before children."""
        tree = self.conversation.tree
        view = self.strategy.new_view(self)
        roots = [i for i, p in enumerate(tree.thread_parent) if p is None]
        stack: list[tuple[int, bool]] = [(r, True) for r in reversed(roots)]
        while stack:
            position, entering = stack.pop()
            if not entering:
                view.pop()
                continue
            decision = self._decide(view, position)
            yield position, view, decision
            self._push(view, position, decision)
            stack.append((position, False))
            for child in reversed(tree.thread_children[position]):
                stack.append((child, True))

    def _tokens_in_order(self) -> Generator[int, None, None]:
        """Sets every turn's message tokens and emptiness, in position order, as their texts are
        counted, yielding how many leading positions are set: the texts not counted yet are
        tokenised in one batch across the cores, the later turns' by child processes while the
        first turns are used (this process takes OWN_PART of an equal share, since it also walks
        every turn meanwhile). The per-message counts below are then look-ups."""
        self._per_turn()
        tokens = self._tokens
        turns = self.conversation.turns
        todo = array("q", (p for p in range(len(turns)) if tokens[p] is None))  # no int object per turn
        done = 0
        for counted in self.counter.counted_groups((turns[p].messages for p in todo), own_part=OWN_PART):
            for lo in range(done, counted, COUNT_CHUNK):  # a chunk at a time: its flat lists stay short
                self._set_counts(todo[lo : min(lo + COUNT_CHUNK, counted)])
            done = counted
            yield todo[counted] if counted < len(todo) else len(turns)

    def _fast_summaries(self) -> TurnSummaries:
        """Per-turn summaries for the strategies that cut a suffix of the thread (dify, window,
        buffer, off): the same decision as :meth:`_decide`, without building Decision objects.
        A conversation that never branched is decided all at once (:meth:`_chain_summaries`);
        otherwise a turn is decided as soon as its texts are counted (:meth:`_tokens_in_order`)."""
        if self.conversation.one_thread():  # the thread is turns 0, 1, …, n−1
            return self._chain_summaries()
        counting = self._tokens_in_order()
        try:
            return self._fast_walk(counting)
        finally:
            counting.close()  # a child still counting is stopped if the walk failed

    def _fast_walk(self, counting: Iterator[int]) -> TurnSummaries:
        ready = next(counting)
        turns = self.conversation.turns
        tree = self.conversation.tree
        strategy, config, facts = self.strategy, self.config, self.facts
        blocked = self.blocked()
        numbers = self.numbers
        view = strategy.new_view(self)
        prefix, kept_prefix, count_prefix, seq_pos = view.prefix, view.kept_prefix, view.count_prefix, view.seq_pos
        budget_limit, window = strategy.budget_limit, strategy.window
        # The default prompt is the system prompt plus the turn's query, whose tokens are known
        # (worked out in the loop, not by a method call per turn in this hot walk).
        fixed_of: Callable[[int], int] | None = self.fixed_prompt_tokens if self._prompt_tokens is not None else None
        system = self._system_tokens + REPLY_PRIMING
        after_query, budget_prompt = config.query_after_budget, self.budget_prompt_tokens  # (a call only then)
        self._per_turn()
        # Only the turns below ``ready`` are read, and _tokens_in_order has set their counts.
        all_tokens = cast(list[tuple[int, ...]], self._tokens)
        all_empty = cast(list[tuple[bool, ...]], self._empty)
        eligibles, eligible_of = self._eligible, self.eligible
        before = self._message_offsets()
        out = TurnSummaries(len(turns))  # by position, in columns of machine integers
        turn_of, kept_of, dropped_of, not_eligible_of, history_of, prompt_of, budget_of, oldest_of = out.columns()
        on_thread = self.thread_messages_before
        none = TurnSummaries.NONE
        limits: dict[int, tuple[int | None, int]] = {}
        thread_parent, positions = tree.thread_parent, view.positions
        # Each turn's children straight from the tree's two tables (ChildLists), without a list
        # built per turn: most turns have one child, a branch point a few.
        first_child, more_children = tree.thread_children.first, tree.thread_children.more
        # Only the turns still to enter are stacked: before one is decided, the view is popped
        # back to its thread parent (a stacked marker per turn to leave by held a list as long
        # as the conversation for a moment).
        stack = [i for i, p in enumerate(thread_parent) if p is None]
        stack.reverse()
        while stack:
            position = stack.pop()
            while position >= ready:
                ready = next(counting)
            parent = thread_parent[position]
            while positions and positions[-1] != parent:
                view.pop()
            end = len(seq_pos)
            qi = turns[position].query_index
            if fixed_of is None:
                fixed = system + all_tokens[position][qi] if qi is not None else system
            else:
                fixed = fixed_of(position)
            counted = budget_prompt(position, fixed) if after_query else fixed
            limit_overhead = limits.get(counted)
            if limit_overhead is None:  # one per prompt size: the summaries share its numbers
                limit_overhead = limits[counted] = budget_limit(config, facts, counted)
            limit, overhead = limit_overhead
            if blocked:
                start = cut = end
            else:
                start = window(view, position, config)[1]
                cut = budget_cut(view, prefix, start, end, NO_LIMIT_ROOM if limit is None else limit - overhead)
            if qi is not None:
                kept = count_prefix[end] - count_prefix[cut]
                history = kept_prefix[end] - kept_prefix[cut]
                turn_of[position] = numbers[position]
                kept_of[position] = kept
                dropped_of[position], not_eligible_of[position] = not_kept(
                    before[position], on_thread(position), kept, blocked
                )
                history_of[position] = history
                prompt_of[position] = fixed + history
                budget_of[position] = none if limit is None else limit
                oldest_of[position] = none  # the oldest kept message's turn, when one is kept
                if kept:
                    oldest_of[position] = numbers[seq_pos[bisect_left(count_prefix, count_prefix[cut] + 1) - 1]]
            view.push(
                position,
                start,
                eligibles[position] or eligible_of(position),
                all_tokens[position],
                all_empty[position],
                None,
            )
            child = first_child[position]
            if child >= 0:  # stacked newest first, so the oldest child is entered first
                later = more_children.get(position)
                if later:
                    stack.extend(reversed(later))
                stack.append(child)
        return out

    def _chain_summaries(self) -> TurnSummaries:
        return chain_summaries(self)  # all turns at once: core/memory/chain_walk.py

    def summaries(self) -> TurnSummaries:
        """One summary per answered turn, in turn order (a sequence of :class:`TurnSummary`)."""
        if self._summaries is not None:
            return self._summaries
        if not self.plans:
            with _without_cycle_collection():
                by_position = self._fast_summaries()
        else:
            # Not paused here: a planning strategy may call a summarising model on the way.
            turns = self.conversation.turns
            by_position = TurnSummaries(len(turns))
            for position, view, decision in self._walk():
                if turns[position].query_index is not None:
                    by_position.put(position, self._summary(view, position, decision))
        self._summaries = by_position.keep()
        return self._summaries

    def summaries_at(self, positions: Iterable[int]) -> dict[int, TurnSummary]:
        """The summaries of the answered turns among ``positions``, by position — each what
        :meth:`summaries` gives for it — built from the turns their decisions read
        (:meth:`near_view`), not from the whole conversation; a turn that follows the previous
        one on its thread (a page of the transcript) extends that turn's view by one turn."""
        turns, parent = self.conversation.turns, self.conversation.tree.thread_parent
        out: dict[int, TurnSummary] = {}
        view: PathView | None = None
        last, last_decision = -1, None
        for position in sorted(set(positions)):
            if view is not None and parent[position] == last:
                assert last_decision is not None  # set with the view, at the previous position
                self._push(view, last, last_decision)
                decision = self._decide(view, position)
            else:
                view, decision, _ = self.near_view(position)
            last, last_decision = position, decision
            if turns[position].query_index is not None:
                out[position] = self._summary(view, position, decision)
        return out

    # -- the full ledger ---------------------------------------------------------------------------
    def view_for(self, position: int) -> tuple[PathView, Decision]:
        """The thread view and decision of one turn, built along its thread only."""
        view = self.strategy.new_view(self)
        for p in self.conversation.tree.thread(position)[:-1]:
            self._push(view, p, self._decide(view, p))
        return view, self._decide(view, position)

    def reach(self) -> int | None:
        """How many earlier turns of its thread one turn's decision reads: 0 when no earlier
        message is a candidate (memory off, no thread kept), the strategy's own bound
        (:meth:`Strategy.reach`), ``None`` when every earlier turn may matter."""
        if self.plans:
            return None
        if self.blocked():
            return 0
        return self.strategy.reach(self.config)

    def near_view(self, position: int) -> tuple[PathView, Decision, list[int]]:
        """The view and decision of one turn built from the newest :meth:`reach` turns of its
        thread (all of them when the reach is unbounded) — the decision :meth:`view_for` makes,
        at a cost that does not grow with the thread — and the thread's older turns left out
        (``head``, oldest first: every eligible message of theirs is outside the window)."""
        reach, parent = self.reach(), self.conversation.tree.thread_parent
        near: list[int] = []
        cur = parent[position]
        while cur is not None and (reach is None or len(near) < reach):
            near.append(cur)
            cur = parent[cur]
        head: list[int] = []
        while cur is not None:
            head.append(cur)
            cur = parent[cur]
        view = self.strategy.new_view(self)
        for p in reversed(near):
            self._push(view, p, self._decide(view, p))
        head.reverse()
        return view, self._decide(view, position), head

    def position_of(self, turn_number: int) -> int:
        try:
            return self.numbers.index(turn_number)
        except ValueError:
            raise ConfigError(
                f"turn {turn_number} does not exist; this conversation has turns {self.numbers[0]}..{self.numbers[-1]}"
            ) from None

    def ledger(self, turn_number: int) -> Ledger:
        return self.ledger_at(self.position_of(turn_number))

    def ledger_at(self, position: int, *, lazy: bool = False) -> Ledger:
        """The ledger of the turn at ``position``; ``lazy``: a cutting strategy's as a
        :class:`RunLedger`, its kept entries and reason counts at hand and every earlier message
        listed only when first read (a view showing counts of a long conversation's turn)."""
        view, d, head = self.near_view(position)
        if d.plan is None:
            ledger = self.cut_ledger(view, d, position, head=head)
            return ledger if lazy else ledger.plain()
        on_thread = set(view.positions)
        seq_index: dict[tuple[int, int], int] = {}
        for i, (p, m) in enumerate(zip(view.seq_pos, view.seq_msg)):
            seq_index[(p, m)] = i
        entries: list[LedgerEntry] = []
        history = 0
        turns = self.conversation.turns
        for p in range(position):
            toks = self.message_tokens(p)
            number = self.numbers[p]
            for m, msg in enumerate(turns[p].messages):
                if d.blocked:
                    reason = d.blocked
                elif p not in on_thread:
                    reason = OTHER_BRANCH
                else:
                    at = seq_index.get((p, m))
                    if at is None:
                        reason = GRANULARITY
                    else:
                        reason = d.plan.reason(at, msg)
                        if reason == KEPT and msg.is_empty and self.drops_empty:
                            reason = EMPTY
                kept = reason == KEPT
                if kept:
                    history += toks[m]
                entries.append(
                    LedgerEntry(
                        ref=msg.ref,
                        turn=number,
                        role=msg.role,
                        tokens=toks[m],
                        kept=kept,
                        reason=reason,
                        kind=msg.kind,
                        position=p,
                        index=m,
                    )
                )
        synthetic = d.plan.synthetic(view, self)
        history += sum(s.tokens for s in synthetic)
        return Ledger(
            entries=entries,
            synthetic=synthetic,
            compactions=list(getattr(d.plan, "compactions", None) or []),
            **self._ledger_header(position, d, history),
        )

    def _ledger_header(self, position: int, d: Decision, history: int) -> dict:
        fixed = d.fixed_prompt_tokens
        context = d.budget.context_size
        cfg = self.config.to_dict()
        cfg["budget"] = d.budget.limit
        return dict(
            turn=self.numbers[position],
            prompt_tokens=fixed + history,
            history_tokens=history,
            budget=d.budget.limit,
            budget_note=d.budget.note,
            config=cfg,
            context_size=context,
            exceeds_context=bool(context and fixed + history + self.config.max_tokens > context),
        )

    def cut_ledger(
        self, view: PathView, d: Decision, position: int, clean: int = 0, head: Sequence[int] = ()
    ) -> RunLedger:
        """The ledger of a strategy that cuts the thread (no plan) as reason runs and kept entries,
        in time that grows with the thread's turns (or less), not its messages; the full
        entries are built when first read. ``clean``: how many of the view's first turns are
        positions ``0, 1, …`` with every message in the sequence and none empty — those are
        classified as one range. ``head``: the thread's turns older than the view's
        (:meth:`near_view`), their eligible messages outside the window."""
        runs = self._runs(view, d, position, clean, head)
        turns, numbers = self.conversation.turns, self.numbers
        kept: list[LedgerEntry] = []
        if not d.blocked:
            for i in range(max(d.trimmed_before, d.window_start, d.budget_cut), d.end):
                p, m = view.seq_pos[i], view.seq_msg[i]
                if self._empties(p)[m]:
                    continue
                msg = turns[p].messages[m]
                kept.append(
                    LedgerEntry(
                        ref=msg.ref,
                        turn=numbers[p],
                        role=msg.role,
                        tokens=self.message_tokens(p)[m],
                        kept=True,
                        reason=KEPT,
                        kind=msg.kind,
                        position=p,
                        index=m,
                    )
                )
        with_messages = (turns[p].messages for p in range(position) if turns[p].messages)
        first = next(with_messages, None)
        last = next((turns[p].messages for p in range(position - 1, -1, -1) if turns[p].messages), None)
        conversation, tokens = self.conversation, self.message_tokens
        return RunLedger(
            runs=runs,
            kept=kept,
            count=self.messages_before(position),
            first_ref=first[0].ref if first else None,
            last_ref=last[-1].ref if last else None,
            expand=lambda r: expand_runs(conversation, position, r, numbers, tokens),
            pick=lambda ranges: pick_entries(conversation, runs, ranges, numbers, tokens, self._message_offsets()),
            offset=lambda p: self.messages_before(min(p, position)),
            tokens=tokens,
            **self._ledger_header(position, d, sum(e.tokens for e in kept)),
        )

    def _runs(self, view: PathView, d: Decision, position: int, clean: int, head: Sequence[int] = ()) -> list[list]:
        """Every earlier message's reason, as runs: the first removal step that applies."""
        runs: list[list] = []

        def add(reason: str, n: int) -> None:
            if n > 0:
                if runs and runs[-1][0] == reason:
                    runs[-1][1] += n
                else:
                    runs.append([reason, n])

        before = self.messages_before
        if d.blocked:
            add(d.blocked, before(position))
            return runs
        cuts = ((d.trimmed_before, TRIMMED_EARLIER), (d.window_start, OUTSIDE_WINDOW), (d.budget_cut, OVER_BUDGET))

        def add_range(lo: int, hi: int) -> None:
            # the sequence indices lo..hi-1, none of them empty
            for cut, reason in cuts:
                to = min(max(cut, lo), hi)
                add(reason, to - lo)
                lo = to
            add(KEPT, hi - lo)

        add_range(0, view.turn_start(clean))
        done = clean  # positions before it are classified
        turns = self.conversation.turns
        if head and head[-1] == len(head) - 1 and not done:  # a linear start: positions 0, 1, …
            eligible_of = self.eligible
            if all(len(eligible_of(p)) == len(turns[p].messages) for p in head):  # and every message a candidate
                add(OUTSIDE_WINDOW, before(len(head)))
                done, head = len(head), ()
        for p in head:  # older than the view: before its window (a bounded reach trims nothing for good)
            add(OTHER_BRANCH, before(p) - before(done))
            eligible, n = self.eligible(p), len(turns[p].messages)
            if len(eligible) == n:
                add(OUTSIDE_WINDOW, n)
            else:
                for m in range(n):
                    add(OUTSIDE_WINDOW if m in eligible else GRANULARITY, 1)
            done = p + 1
        for k in range(clean, len(view.positions)):
            p = view.positions[k]
            add(OTHER_BRANCH, before(p) - before(done))
            start, eligible, empties = view.starts[k], self.eligible(p), self._empties(p)
            n = len(turns[p].messages)
            if len(eligible) == n and not any(empties):
                add_range(start, start + n)
            else:
                where = {m: start + j for j, m in enumerate(eligible)}
                for m in range(n):
                    i = where.get(m)
                    if i is None:
                        add(GRANULARITY, 1)
                    elif empties[m] and i >= d.trimmed_before and i >= d.window_start and i >= d.budget_cut:
                        add(EMPTY, 1)
                    else:
                        add_range(i, i + 1)
            done = p + 1
        add(OTHER_BRANCH, before(position) - before(done))
        return runs

    def history_messages(self, ledger: Ledger) -> list[Message]:
        """The history part of the prompt (see :func:`history_of`)."""
        return history_of(self.conversation, ledger)


def compute_ledger(conversation: Conversation, position: int, config: MemoryConfig, **kwargs) -> Ledger:
    """The ledger of the turn at ``position`` — a pure function of history, config and prompt."""
    return Replay(conversation, config, **kwargs).ledger_at(position)
