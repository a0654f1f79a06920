"""An OpenAI Agents SDK session (``SQLiteSession``) as ``Runner.run(agent, question, session=…)`` reads it.

The session stores one item per row and the runner sends the stored items before the new question
(openai-agents 0.24, ``prepare_input_with_session`` and ``drop_orphan_function_calls``):

* the items are the messages MemLens reads from a session (one message per item: the question, a
  ``reasoning`` item, a ``message`` — an empty answer is a message with empty text —, each
  ``function_call`` and each ``function_call_output``), so a tool turn of one call is four items or more;
* ``limit`` (``SessionSettings.limit``) counts items: unset or negative, every stored item (SQLite's
  ``LIMIT -1``); 0, none; N, the newest N, oldest first — so the limit may cut between a call and its
  output;
* then the orphan pass over those items: a call whose output is not among them is dropped (an approval
  still pending), limit or not, and so is each reasoning item that leads to a dropped call; an output
  whose call is not among them is dropped only when a limit is set and no ``session_input_callback`` is
  (the callback turns that half off). So a turn may send fewer items than ``limit``.

For example, a session of six items, ``q1 a1 | q2 call output a2``, and the question ``q3``: ``limit=4``
sends the tool turn ``q2 call output a2``; ``limit=3`` sends ``call output a2``; ``limit=2`` reads
``output a2`` and drops the output, whose call the limit cut — one item is sent.

Decisions pinned here:

* an item is a message of the thread, whatever the granularity (every message counts, as in the
  session); nothing is summarised or rewritten, so reasons are ``outside_window`` (before the limit's
  items) and ``omitted`` (dropped by the orphan pass);
* a message that holds several calls (read from another format) stands for its calls together: it is
  dropped when one of them has no output among the items;
* the SDK's last step, dropping a second item with the same call id, is not applied: a session the
  SDK wrote holds each call and output once.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.model.conversation import REASONING, source_platform
from core.model.ledger import KEPT, OMITTED, OUTSIDE_WINDOW
from core.words import plural

from .base import Budget, Plan, Strategy, along_view, message_at, tokens_between, turn_at
from .settings import BOOL, SWITCHED, TOGGLE, Setting, Widget

#: The most items the config editor offers for ``limit``, and the number it shows while no limit is set.
EDITOR_MAX_LIMIT, EDITOR_LIMIT = 10_000, 20


def limit_start(length: int, limit: int | None) -> int:
    """Where the items a session's ``get_items(limit)`` returns start among ``length`` stored items:
    unset or negative, all of them; 0, none; N, the newest N."""
    if limit is None or limit < 0:
        return 0
    return max(0, length - limit)


@dataclass(frozen=True)
class Items:
    """What the orphan pass did to the items ``[start, end)``: the indices it dropped, by kind."""

    start: int
    calls: frozenset[int] = frozenset()  # calls without their output
    outputs: frozenset[int] = frozenset()  # outputs without their call
    reasoning: frozenset[int] = frozenset()  # reasoning leading to a dropped call

    @property
    def dropped(self) -> frozenset[int]:
        return self.calls | self.outputs | self.reasoning


def orphan_pass(items, start: int, prune_outputs: bool) -> Items:
    """``drop_orphan_function_calls`` over ``items``, the stored items the limit gave (the thread's
    messages from index ``start`` on; the new question after them holds no call nor output): the indices
    each half of the pass drops."""
    end = start + len(items)
    answered = {m.tool_call_id for m in items if m.role == "tool"}
    calls = frozenset(
        start + j for j, m in enumerate(items) if m.tool_calls and not all(c.id in answered for c in m.tool_calls)
    )
    outputs: frozenset[int] = frozenset()
    if prune_outputs:
        available = {c.id for j, m in enumerate(items) if start + j not in calls for c in m.tool_calls}
        outputs = frozenset(
            start + j
            for j, m in enumerate(items)
            if m.role == "tool" and m.tool_call_id and m.tool_call_id not in available
        )
    # A reasoning item belongs to the next item that is not reasoning: it goes when that is a dropped call.
    reasoning: set[int] = set()
    lead: list[int] = []
    for i in range(start, end):
        if items[i - start].kind == REASONING:
            lead.append(i)
            continue
        if i in calls:
            reasoning.update(lead)
        lead = []
    return Items(start, calls, outputs, frozenset(reasoning))


class SessionPlan(Plan):
    def __init__(self, budget: Budget, items: Items, view, replay):
        end, dropped = view.length, items.dropped
        first = next((i for i in range(items.start, end) if i not in dropped), None)
        super().__init__(
            budget,
            None,
            end - items.start - len(dropped),
            tokens_between(view, items.start, end) - sum(view.prefix[i + 1] - view.prefix[i] for i in dropped),
            turn_at(view, replay, first),
        )
        self.items = items

    def reason(self, i, message):
        if i < self.items.start:
            return OUTSIDE_WINDOW
        return OMITTED if i in self.items.dropped else KEPT


@dataclass(frozen=True)
class Carried:
    """The orphan pass over every item up to a message, as the next message finds it (no limit: every
    stored item is read, so each turn's pass is the last one's plus its own items): the calls still without
    an output, each with the call ids it waits for; how many questions; how many outputs have no call."""

    pending: tuple[tuple[int, frozenset], ...] = ()
    questions: int = 0
    unmatched: int = 0


def _at(view, replay, entries, end: int) -> list[int]:
    """The indices of ``entries`` (``(index, message)``) before ``end`` whose message is still there in the view."""
    return [j for j, m in entries if j < end and message_at(view, replay, j) is m]


def _carry(view, replay) -> list[Carried]:
    """:class:`Carried` after each message of the view (``[0]``: before the first), carried along the thread
    (:func:`~core.memory.strategies.base.along_view`). The call ids are looked up in two indexes kept on the
    replay, an entry counting only while its message is still at its index of the view walked."""
    outputs, calls = replay.__dict__.setdefault("_agents_ids", ({}, {}))

    def seen(index: dict, key, end: int) -> bool:  # the newest first: a reused call id is found at once
        return any(j < end and message_at(view, replay, j) is m for j, m in reversed(index.get(key, ())))

    def note(index: dict, key, i: int, message) -> None:
        entries = index.setdefault(key, [])
        if not any(j == i and m is message for j, m in entries):
            entries.append((i, message))

    def step(values: list, message) -> None:
        i, last = len(values) - 1, values[-1]
        pending, questions, unmatched = last.pending, last.questions, last.unmatched
        if message.role == "user":
            questions += 1
        if message.role == "tool":
            key = message.tool_call_id
            if any(key in waiting for _, waiting in pending):
                pending = tuple((c, waiting - {key}) for c, waiting in pending if waiting - {key})
            if not seen(calls, key, i):
                unmatched += 1
            note(outputs, key, i, message)
        if message.tool_calls:
            ids = [c.id for c in message.tool_calls]
            waiting = frozenset(k for k in ids if not seen(outputs, k, i))
            if waiting:
                pending += ((i, waiting),)
            for k in dict.fromkeys(ids):
                if not seen(calls, k, i):  # its outputs so far now have a call
                    unmatched -= len(_at(view, replay, outputs.get(k, ()), i))
                note(calls, k, i, message)
        values.append(Carried(pending, questions, unmatched))

    return along_view(view, replay, "openai_agents", [Carried()], step)


def every_item(view, replay) -> tuple[Items, int, int]:
    """The orphan pass over every stored item, read from what was carried along the thread: the items it
    dropped, how many questions and how many results without their call were sent. Equal to
    :func:`orphan_pass` over all of them with no output pruned, in the time of the turn's own items."""
    end = view.length
    carried = _carry(view, replay)[end]
    dropped_calls = frozenset(c for c, _ in carried.pending)
    reasoning: set[int] = set()
    for c in dropped_calls:
        if message_at(view, replay, c).kind == REASONING:
            continue  # a reasoning item is its own lead, given to the next item that is not one
        j = c - 1
        while j >= 0 and message_at(view, replay, j).kind == REASONING:
            reasoning.add(j)
            j -= 1
    # A result is sent without its call when its call id is nowhere among the items (carried), or only in
    # calls the pass dropped.
    outputs, calls = replay.__dict__["_agents_ids"]
    lone = carried.unmatched
    cut = {c.id for i in dropped_calls for c in message_at(view, replay, i).tool_calls}
    for key in cut:
        if all(j in dropped_calls for j in _at(view, replay, calls.get(key, ()), end)):
            lone += len(_at(view, replay, outputs.get(key, ()), end))
    return Items(0, dropped_calls, frozenset(), frozenset(reasoning)), carried.questions, lone


def _limit_words(limit: int | None) -> str:
    if limit is None:
        return "no limit (every stored item)"
    if limit < 0:
        return f"limit {limit} (SQLite's LIMIT {limit}: every stored item)"
    return f"limit {limit} counts items"


def sent_counts(sent) -> tuple[int, int]:
    """How many questions, and how many tool results without their call, the items ``sent`` hold."""
    calls = {c.id for m in sent for c in m.tool_calls}
    questions = sum(1 for m in sent if m.role == "user")
    return questions, sum(1 for m in sent if m.role == "tool" and m.tool_call_id not in calls)


def turn_note(limit: int | None, items: Items, sent: int, questions: int, lone: int) -> str:
    """The turn in plain words, from the number of items it sent, the questions and the tool results without
    their call among them, and what the orphan pass dropped: ``"limit 6 counts items: this turn sent 5 items
    (2 questions, 1 tool result without its call); the orphan pass dropped 1 tool result whose call the limit
    cut"``."""
    parts = [plural(questions, "question")] if questions else []
    if lone:
        parts.append(f"{plural(lone, 'tool result')} without its call")
    note = f"{_limit_words(limit)}: this turn sent {plural(sent, 'item')}"
    if parts:
        note += f" ({', '.join(parts)})"
    dropped = []
    if items.outputs:
        dropped.append(f"{plural(len(items.outputs), 'tool result')} whose call the limit cut")
    if items.calls:
        dropped.append(f"{plural(len(items.calls), 'call')} without a result")
    if items.reasoning:
        dropped.append(f"{plural(len(items.reasoning), 'reasoning item')} before such a call")
    if dropped:
        note += "; the orphan pass dropped " + " and ".join(dropped)
    return note


class OpenAIAgentsStrategy(Strategy):
    name = "openai_agents"
    help = "an OpenAI Agents SDK session: the newest `limit` items, calls and outputs without their pair dropped"
    settings = (
        Setting(
            "limit",
            None,
            "SessionSettings.limit: how many of the newest stored items are sent (unset or "
            "negative: every item; 0: none); a tool turn is four items or more",
            optional=True,
            words="session limit",
            flag="--session-limit",
            widget=Widget(
                SWITCHED,
                "Item limit",
                key=("agents_limit_on", "agents_limit"),
                minimum=0,
                maximum=EDITOR_MAX_LIMIT,
                unset_value=EDITOR_LIMIT,
                second_label="Limit the session's items",
                help="SessionSettings.limit counts items (question, call, output, reasoning, "
                "answer), not turns; off: the SDK's default, every item",
            ),
        ),
        Setting(
            "input_callback",
            False,
            "a session_input_callback is set: a tool result whose call the limit cut "
            "is sent (the SDK drops it otherwise)",
            kind=BOOL,
            flag="--session-input-callback",
            widget=Widget(TOGGLE, "session_input_callback set", key="agents_input_callback"),
        ),
    )
    lenses = (("Agents SDK session, no limit", {}), ("Agents SDK session, limit 6 items", {"limit": 6}))
    uses_granularity = False
    plans = True
    drops_empty = False

    def label(self, config):
        limit = config.settings.limit
        words = "every item" if limit is None or limit < 0 else f"limit {limit} items"
        return f"agents session {words}" + (" +callback" if config.settings.input_callback else "")

    def explain(self, entry, config):
        limit = config.get("limit")
        if entry.reason == OUTSIDE_WINDOW:
            return f"older than the session's newest {plural(limit, 'item')} (SessionSettings.limit counts items)"
        if entry.reason != OMITTED:
            return None
        if entry.role == "tool":
            return f"a tool result whose call the limit of {plural(limit, 'item')} cut: the SDK drops it"
        if entry.kind == REASONING:
            return "reasoning before a call without a result: the SDK drops it with the call"
        return "a call without its result among the items sent (an approval still pending?): the SDK drops it"

    def finding_kinds(self, config):
        return ("platform_rule",)

    def turn_surprise(self, replay, ledger):
        # Items the orphan pass dropped, or a result sent without its call (an input callback): the turn's note.
        history = replay.history_messages(ledger)
        calls = {c.id for m in history for c in m.tool_calls}
        lone = any(m.role == "tool" and m.tool_call_id not in calls for m in history)
        return ledger.budget_note if lone or any(e.reason == OMITTED for e in ledger.entries) else None

    def claims(self, conversation):
        # A session the SDK stored opens as the SDK reads it by default: every item (the limit is the run's,
        # not the session's, so it is not in what was stored).
        return {} if source_platform(conversation.source_format) == self.name else None

    def pruning_words(self, config):
        return (
            "The session's limit counts items — a question, each call, each result, each reasoning item and "
            "the answer — so a tool turn takes four or more, and the orphan pass drops a result whose call "
            "the limit cut. Raise the limit or count a turn's items.",
            False,
        )

    def plan(self, view, current, replay):
        own = replay.config.settings
        end = view.length
        if own.limit is None:  # every item, no output pruned: the pass carried along the thread
            items, questions, lone = every_item(view, replay)
        else:
            start = limit_start(end, own.limit)
            stored = [message_at(view, replay, i) for i in range(start, end)]
            items = orphan_pass(stored, start, prune_outputs=not own.input_callback)
            questions, lone = sent_counts([m for i, m in enumerate(stored, start) if i not in items.dropped])
        note = turn_note(own.limit, items, end - items.start - len(items.dropped), questions, lone)
        budget = Budget(None, note, replay.config.context_size or replay.facts.context_size)
        return SessionPlan(budget, items, view, replay)


__all__ = ["OpenAIAgentsStrategy", "Items", "every_item", "limit_start", "orphan_pass", "sent_counts", "turn_note"]
