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

from core.model.conversation import REASONING, Message, source_platform
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
    """The orphan pass over every item up to a message, as the next message finds it (no limit: every stored
    item is read, so each turn's pass is the last one's plus its own items), in counts: the questions, the
    calls still without every result and the reasoning items leading them (with their tokens), and the
    results whose call id no call sent carries."""

    questions: int = 0
    calls: int = 0
    call_tokens: int = 0
    reasoning: int = 0
    reasoning_tokens: int = 0
    lone: int = 0


class _Pass:
    """The orphan pass carried along the view walked: :class:`Carried` after each message, and which calls
    got every result (:meth:`answered`). The call ids are looked up in indexes kept on the replay, an entry
    counting only while its message is still at its index of the view (another branch may have put another
    message there)."""

    def __init__(self, view, replay):
        self.view, self.replay = view, replay
        # results and calls by call id: [(index, message)]; a call's index: (call, index of the result that
        # completed it, that result)
        self.outputs, self.calls, self.completed = replay.__dict__.setdefault("_agents_pass", ({}, {}, {}))
        self.carried = along_view(view, replay, "openai_agents", [Carried()], self._step)

    def _here(self, j: int, message) -> bool:
        return message_at(self.view, self.replay, j) is message

    def _before(self, index: dict, key, end: int) -> list[tuple[int, Message]]:
        return [(j, m) for j, m in index.get(key, ()) if j < end and self._here(j, m)]

    def _seen(self, key, end: int) -> bool:  # the newest first: a reused call id is found at once
        return any(j < end and self._here(j, m) for j, m in reversed(self.outputs.get(key, ())))

    def answered(self, j: int, message, end: int) -> bool:
        """Whether the call ``message`` at ``j`` has every result among the items before ``end``."""
        found = self.completed.get(j)
        return found is not None and found[0] is message and found[1] < end and self._here(found[1], found[2])

    def _kept_call(self, key, end: int) -> bool:
        """Whether a call with this id before ``end`` had every result before ``end``."""
        return any(self.answered(j, m, end) for j, m in self._before(self.calls, key, end))

    def _lead(self, j: int) -> tuple[int, int]:
        """How many reasoning items lead the call at ``j`` (they go with it), and their tokens."""
        view, k = self.view, j
        while k > 0 and message_at(view, self.replay, k - 1).kind == REASONING:
            k -= 1
        return j - k, view.prefix[j] - view.prefix[k]

    def _note(self, index: dict, key, i: int, message) -> None:
        entries = index.setdefault(key, [])
        if not any(j == i and m is message for j, m in entries):
            entries.append((i, message))

    def _step(self, values: list, message) -> None:
        i, view = len(values) - 1, self.view
        c = values[-1]
        questions, calls, call_tokens, reasoning, reasoning_tokens, lone = (
            c.questions,
            c.calls,
            c.call_tokens,
            c.reasoning,
            c.reasoning_tokens,
            c.lone,
        )
        if message.role == "user":
            questions += 1
        if message.role == "tool":
            key = message.tool_call_id
            now: set = set()  # the ids of the calls this result completes (an earlier walk's record is no proof)
            for j, call in self._before(self.calls, key, i):  # the calls this result may complete
                ids = [t.id for t in call.tool_calls]
                if self.answered(j, call, i) or not all(k == key or self._seen(k, i) for k in ids):
                    continue
                for k in dict.fromkeys(ids):  # their results so far now have a call sent
                    if k not in now and not self._kept_call(k, i):
                        lone -= len(self._before(self.outputs, k, i))
                now.update(ids)
                self.completed[j] = (call, i, message)
                lead, lead_tokens = self._lead(j)
                calls, call_tokens = calls - 1, call_tokens - (view.prefix[j + 1] - view.prefix[j])
                reasoning, reasoning_tokens = reasoning - lead, reasoning_tokens - lead_tokens
            if key not in now and not self._kept_call(key, i):
                lone += 1
            self._note(self.outputs, key, i, message)
        if message.tool_calls:
            ids = [t.id for t in message.tool_calls]
            if all(self._seen(k, i) for k in ids):  # its results came first: sent
                for k in dict.fromkeys(ids):
                    if not self._kept_call(k, i):
                        lone -= len(self._before(self.outputs, k, i))
                self.completed[i] = (message, i, message)
            else:
                lead, lead_tokens = self._lead(i)
                calls, call_tokens = calls + 1, call_tokens + view.prefix[i + 1] - view.prefix[i]
                reasoning, reasoning_tokens = reasoning + lead, reasoning_tokens + lead_tokens
            for k in dict.fromkeys(ids):
                self._note(self.calls, k, i, message)
        values.append(Carried(questions, calls, call_tokens, reasoning, reasoning_tokens, lone))

    def dropped(self, i: int, end: int) -> bool:
        """Whether the pass over the items before ``end`` drops the one at ``i``: a call without every result,
        or a reasoning item leading one."""
        view, replay = self.view, self.replay
        message = message_at(view, replay, i)
        if message.tool_calls:
            return not self.answered(i, message, end)
        if message.kind != REASONING:
            return False
        k = i + 1
        while k < end and message_at(view, replay, k).kind == REASONING:
            k += 1
        return k < end and bool(message_at(view, replay, k).tool_calls) and self.dropped(k, end)


def _reasoning_calls(replay) -> bool:
    """Whether a reasoning item holds calls (read from a format other than the SDK's): the pass then both drops
    it as a call and gives it to the next item's lead, which :class:`_Pass`'s counts do not follow."""
    found = replay.__dict__.get("_agents_reasoning_calls")
    if found is None:
        found = replay.__dict__["_agents_reasoning_calls"] = any(
            m.kind == REASONING and m.tool_calls for t in replay.conversation.turns for m in t.messages
        )
    return found


class EveryItemPlan(Plan):
    """No limit: every stored item is read and the orphan pass drops the calls without every result and the
    reasoning leading them, read from the pass carried along the thread (:class:`_Pass`); a turn costs its
    own items, not the session's."""

    def __init__(self, budget: Budget, found: _Pass, carried: Carried, view, replay):
        end = view.length
        first = next((i for i in range(end) if not found.dropped(i, end)), None)
        super().__init__(
            budget,
            None,
            end - carried.calls - carried.reasoning,
            view.prefix[end] - carried.call_tokens - carried.reasoning_tokens,
            turn_at(view, replay, first),
        )
        self.found, self.end = found, end

    def reason(self, i, message):
        return OMITTED if self.found.dropped(i, self.end) else KEPT


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


def turn_note(limit: int | None, dropped: tuple[int, int, int], sent: int, questions: int, lone: int) -> str:
    """The turn in plain words, from the number of items it sent, the questions and the tool results without
    their call among them, and what the orphan pass dropped: ``"limit 6 counts items: this turn sent 5 items
    (2 questions, 1 tool result without its call); the orphan pass dropped 1 tool result whose call the limit
    cut"``. ``dropped``: how many results, calls and reasoning items the orphan pass dropped."""
    parts = [plural(questions, "question")] if questions else []
    if lone:
        parts.append(f"{plural(lone, 'tool result')} without its call")
    note = f"{_limit_words(limit)}: this turn sent {plural(sent, 'item')}"
    if parts:
        note += f" ({', '.join(parts)})"
    outputs, calls, reasoning = dropped
    said = []
    if outputs:
        said.append(f"{plural(outputs, 'tool result')} whose call the limit cut")
    if calls:
        said.append(f"{plural(calls, 'call')} without a result")
    if reasoning:
        said.append(f"{plural(reasoning, 'reasoning item')} before such a call")
    if said:
        note += "; the orphan pass dropped " + " and ".join(said)
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
        context = replay.config.context_size or replay.facts.context_size
        if own.limit is None and not _reasoning_calls(replay):  # every item: the pass carried along the thread
            found = _Pass(view, replay)
            carried = found.carried[end]
            sent = end - carried.calls - carried.reasoning
            note = turn_note(None, (0, carried.calls, carried.reasoning), sent, carried.questions, carried.lone)
            return EveryItemPlan(Budget(None, note, context), found, carried, view, replay)
        start = limit_start(end, own.limit)
        stored = [message_at(view, replay, i) for i in range(start, end)]
        items = orphan_pass(stored, start, prune_outputs=own.limit is not None and not own.input_callback)
        questions, lone = sent_counts([m for i, m in enumerate(stored, start) if i not in items.dropped])
        sent = end - items.start - len(items.dropped)
        note = turn_note(own.limit, (len(items.outputs), len(items.calls), len(items.reasoning)), sent, questions, lone)
        return SessionPlan(Budget(None, note, context), items, view, replay)


__all__ = ["OpenAIAgentsStrategy", "Items", "limit_start", "orphan_pass", "sent_counts", "turn_note"]
