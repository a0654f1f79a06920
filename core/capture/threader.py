"""Threading model calls into conversations: which conversation, which turn and which node each call
belongs to, and which earlier messages of its thread its payload held.

A call is what a bot sent a model (its payload, as messages) and what came back (its reply). The
payload is read as ``[system…] + history + [query] + steps``: the leading system messages are the
node's own prompt, the last user message is the query, what follows it is the turn's own tool round
(an agent's second and later requests), what precedes it is the history its memory chose.

The rules, applied to each call as it arrives (the proxy) or in time order (an imported trace):

* **Which conversation.** A call joins the conversation whose messages its history repeats: the
  newest history message MemLens has seen is looked up, and among the places it occurs the one
  whose thread holds most of the rest of the history, in order, wins (ties: the conversation used
  most recently). ``pin`` (``X-MemLens-Conversation``, a conversation id in the request's
  ``metadata``) names the conversation outright; ``user`` (OpenAI's field) limits the search to
  that user's conversations and, when nothing matches, continues the user's newest one. A call
  with no pin, no user and no history MemLens has seen starts a conversation.
* **Which turn.** The turn after the one holding the anchor, with the call's query: the calls of
  one turn share their history and query. History MemLens never saw as a call (the capture started
  mid-conversation, an answer the app rewrote) becomes turns of the thread too — the thread holds
  every message ever seen. A second call of the same node on the same history and query is the
  next step of an agent's tool round when its steps extend the previous call's, a retry when the
  previous call failed, and otherwise a regenerated answer: a new turn beside the first (a branch).
  A query that differs on the same history is a branch too (an edited message).
* **Which node.** Calls with a different system prompt or other tools are different nodes (an LLM
  node, a classifier); a node whose prompt carries values that change every turn (a date, a
  retrieved context) is recognised by its prompt's likeness. A call that names its node
  (``X-MemLens-Node``, ``memlens_node`` in its ``metadata``) is that node's, whatever its prompt:
  two nodes with identical prompts and tools are told apart so.
* **History sent as text.** A payload whose history is ``Human: …`` / ``Assistant: …`` lines inside one
  message (Dify's Question Classifier, a completion-style prompt: :mod:`core.capture.text_history`)
  has those lines as its history, and that message without them as its prompt; such a call's query
  may wrap the question (Dify's classifier sends it inside JSON), so a turn whose question it holds
  is its turn.
* **What was kept.** The history is aligned to the thread from the newest message back; each thread
  message it holds is kept, a history message that matches none (a summary, a rewritten message) is
  listed as sent but not from the thread.

A turn's messages only grow while no later turn has a call (every later call's ledger counts them);
after that, a different version of a turn is a branch beside it.
"""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import Callable, Iterable, Sequence
from uuid import uuid4

from core.limits import CAPTURE_NAME_CHARS
from core.model.conversation import REASONING, Message

from .calls import (
    ANCHOR_CANDIDATES,
    HISTORY,
    QUERY,
    SAME_NODE_LIKENESS,
    STEP,
    SUCCEEDED,
    SYSTEM,
    TEMPLATE,
    UNMATCHED,
    Call,
    Key,
    Node,
    Payload,
    Place,
    Placed,
    Thread,
    ThreadTurn,
    message_key,
    node_title,
    split_payload,
)
from .text_history import TextHistory, read_text_history


class Threader:
    """Places calls into conversations (:class:`Thread`), one call at a time, by the rules above.

    ``new_id`` makes conversation and turn ids. The same threader serves the proxy (a call as it
    completes) and an imported trace (:func:`thread_calls`); a proxy restarting on its database is
    given the conversations it captured before (:meth:`adopt`)."""

    def __init__(self, new_id: Callable[[], str] = lambda: str(uuid4())):
        self.new_id = new_id
        self.threads: list[Thread] = []
        self.by_pin: dict[str, Thread] = {}
        self.by_user: dict[str, list[Thread]] = {}
        self.where: dict[Key, list[Thread]] = {}  # a message key → the conversations holding it

    # -- bookkeeping --------------------------------------------------------------------------------
    def _new_thread(self, call: Call) -> Thread:
        thread = Thread(self.new_id(), pin=call.pin, user=call.user, created_at=call.started_at)
        self.threads.append(thread)
        if call.pin:
            self.by_pin[call.pin] = thread
        if call.user:
            self.by_user.setdefault(call.user, []).append(thread)
        return thread

    def adopt(self, thread: Thread) -> None:
        """Take a conversation captured before (read back from the store) into the threader."""
        self.threads.append(thread)
        if thread.pin:
            self.by_pin[thread.pin] = thread
        if thread.user:
            self.by_user.setdefault(thread.user, []).append(thread)
        for key in thread.index:
            self._known(key, thread)

    def _known(self, key: Key, thread: Thread) -> None:
        holders = self.where.setdefault(key, [])
        if thread not in holders[-4:]:
            holders.append(thread)

    def _add_turn(self, thread: Thread, turn: ThreadTurn) -> int:
        position = thread.add_turn(turn)
        for m in turn.raw():
            self._known(message_key(m), thread)
        return position

    def _rewrite(self, thread: Thread, position: int, change: Callable[[ThreadTurn], None]) -> None:
        thread.rewrite(position, change)
        for m in thread.turns[position].raw():
            self._known(message_key(m), thread)

    # -- placing a call -----------------------------------------------------------------------------
    def place(self, call: Call) -> tuple[Thread, Placed]:
        """Place one call: its conversation (made when new), turn and node; returns both."""
        sent = split_payload(call.messages)
        payload, text = node_payload(call.messages, sent)
        keys = [message_key(m) for m in payload.history]
        thread, parent, places, implied = self._locate(call, payload, keys, text is not None)
        node = self._node(thread, call, payload)
        qkey = message_key(payload.query) if payload.query is not None else None
        step_keys = tuple(message_key(m) for m in payload.steps)
        payload_keys = tuple(message_key(m) for m in call.messages)
        position, node = self._turn(
            thread, parent, payload, qkey, node, call, step_keys, payload_keys, text is not None
        )
        node.latest = payload.system
        if text is not None:
            node.text_prefixes = (text.user, text.assistant)
        mine = [c for c in thread.turns[position].calls if c.node == node.id]
        number = sum(1 for c in thread.calls if c.node == node.id) + 1
        roles = [SYSTEM] * payload.system_count
        if text is None:
            roles += [HISTORY if place is not None else UNMATCHED for place in places]
        else:  # the history is inside a message; the messages between the prompt and the query are the node's
            roles += [TEMPLATE] * len(sent.history)
        if payload.query is not None:
            roles.append(QUERY)
        roles += [STEP] * len(payload.steps)
        all_places = (
            [None] * len(roles)
            if text is not None
            else [None] * payload.system_count
            + list(places)
            + [None] * (len(roles) - payload.system_count - len(places))
        )
        placed = Placed(
            call,
            node.id,
            position,
            number,
            len(mine) + 1,
            tuple(sorted({p for p in places if p is not None} | set(implied))),
            tuple(roles),
            tuple(all_places),
            step_keys,
            payload_keys,
            text=text_record(text, places) if text is not None else None,
        )
        thread.turns[position].calls.append(placed)
        thread._conversation = None  # the turn's status follows its calls
        thread.calls.append(placed)
        thread.fresh.append(placed)
        thread.changed.add(position)
        thread.active = position
        thread.last_called = max(thread.last_called, position)
        thread.updated_at = max(thread.updated_at, call.started_at)
        if call.response_id:
            thread.responses[call.response_id] = position
        self._answer(thread, position, call, text is not None)
        if not thread.name and payload.query is not None:
            thread.name = " ".join(payload.query.content.split())[:60] or "captured conversation"
        return thread, placed

    def _locate(
        self, call: Call, payload: Payload, keys: list[Key], text: bool = False
    ) -> tuple[Thread, int | None, list, tuple]:
        """The conversation, the turn the call's turn follows, each history message's place, and the thread
        messages sent without being in the payload (a Responses API chain the server holds). ``text``: the
        history was sent as text lines (:mod:`core.capture.text_history`)."""
        history = payload.history
        if call.previous_response:
            for thread in reversed(self.threads):
                at = thread.responses.get(call.previous_response)
                if at is not None:  # the server holds the chain: everything on it was sent
                    chain = tuple((p, i) for p in thread.path(at) for i in range(len(thread.turns[p].raw())))
                    return thread, at, [None] * len(history), chain
        if call.pin:
            scope = [self.by_pin[call.pin]] if call.pin in self.by_pin else []
        elif call.user:
            scope = self.by_user.get(call.user, [])
        else:
            scope = None  # every conversation
        best = self._anchor(keys, scope)
        if best is None and not history and payload.query is not None:
            # An agent's next request, or a retry, in a turn that began with no history: that turn's conversation.
            started = self._started_turn(
                message_key(payload.query),
                tuple(message_key(m) for m in payload.steps),
                tuple(message_key(m) for m in call.messages),
                scope,
            )
            if started is not None:
                return started, None, [], ()
        if best is not None:
            _, thread, j, place, places = best
            parent, places = self._extend(thread, history, keys, j, place, places)
            return thread, parent, places, ()
        if scope:  # pinned (or the user's) conversation, nothing of the history seen: it continues
            thread = scope[-1] if call.pin else max(scope, key=lambda t: t.updated_at)
            base = thread.active
            if base is not None and not history and _asks(thread.turns[base], payload.query, text):
                base = thread.turns[base].parent  # the same query again: another call of that turn
        else:
            thread = self._new_thread(call)
            base = None
        parent, places = self._observed_turns(thread, base, list(history), call.started_at)
        return thread, parent, places, ()

    def _started_turn(
        self, qkey: Key, step_keys: tuple, payload_keys: tuple, scope: list[Thread] | None
    ) -> Thread | None:
        """The conversation (newest first) with a first turn asking ``qkey`` that has a call this one continues:
        its tool round extended, or the same payload after a failure (a retry)."""

        def continues(c: Placed) -> bool:
            if len(c.step_keys) < len(step_keys) and step_keys[: len(c.step_keys)] == c.step_keys:
                return True
            return c.call.status != SUCCEEDED and c.payload_keys == payload_keys

        for thread in reversed(scope if scope is not None else self.where.get(qkey, [])):
            for position in reversed(thread.children(None)):
                turn = thread.turns[position]
                if turn.query is not None and message_key(turn.query) == qkey and any(map(continues, turn.calls)):
                    return thread
        return None

    def _anchor(self, keys: list[Key], scope: list[Thread] | None):
        """The best place for the newest history message MemLens has seen: ``(score, thread, j, place,
        places)`` — ``j`` the message's index in the history, ``places`` each history message's place
        on that thread (``None``: not found) — or ``None``."""
        for j in range(len(keys) - 1, -1, -1):
            holders = self.where.get(keys[j])
            if not holders:
                continue
            best = None
            for thread in holders:
                if scope is not None and thread not in scope:
                    continue
                for place in thread.index.get(keys[j], [])[-ANCHOR_CANDIDATES:]:
                    places = self._align(thread, keys, j, place)
                    score = sum(1 for p in places if p is not None)
                    rank = (score, thread.updated_at, place)
                    if best is None or rank > best[0]:
                        best = (rank, thread, j, place, places)
            if best is not None:
                return best
        return None

    def _align(self, thread: Thread, keys: list[Key], j: int, place: Place) -> list[Place | None]:
        """Each history message's place on the thread through ``place`` (where message ``j`` is), matched
        from the newest back: the newest earlier occurrence on that thread (``None`` when there is none)."""
        on_path = set(thread.path(place[0]))
        places: list[Place | None] = [None] * len(keys)
        places[j] = place
        pointer = place
        for k in range(j - 1, -1, -1):
            found = [o for o in thread.index.get(keys[k], ()) if o[0] in on_path and o < pointer]
            if found:
                places[k] = pointer = max(found)
        return places

    def _extend(
        self, thread: Thread, history: Sequence[Message], keys: list[Key], j: int, place: Place, places: list
    ) -> tuple[int, list]:
        """The turn a call follows when its newest known history message is at ``place``: that turn, or
        the turns its newer history adds (what follows the anchor in its own turn — the answer as the app
        kept it — and whole turns after)."""
        newer = list(history[j + 1 :])
        position, index = place
        if not newer:
            return position, places
        lead = next((k for k, m in enumerate(newer) if m.role == "user"), len(newer))
        at = [k for k in range(lead) if newer[k].role != "system"]  # a system message is never a turn's
        tail = [newer[k] for k in at]
        base = position
        if tail:
            turn = thread.turns[position]
            answer_only = (
                len(tail) == 1 and tail[0].role == "assistant" and not tail[0].tool_calls and tail[0].kind != REASONING
            )
            if answer_only and not turn.answer_seen and (turn.answer is not None or thread.can_grow(position)):
                # The answer as the app kept it (a reply it reworded, or one MemLens never saw): the turn's own.
                def answer(t: ThreadTurn) -> None:
                    t.answer, t.answer_seen = tail[0], True

                self._rewrite(thread, position, answer)
                places[j + 1 + at[0]] = (position, len(thread.turns[position].raw()) - 1)
            elif not turn.answer_seen and thread.can_grow(position):

                def rest_of(t: ThreadTurn) -> None:
                    _set_tail(t, index + 1, tail)
                    t.answer_seen = True

                self._rewrite(thread, position, rest_of)
                for n, k in enumerate(at):
                    places[j + 1 + k] = (position, index + 1 + n)
            else:  # another version of the turn after the anchor: a branch beside it
                head = turn.raw()[: index + 1]
                variant = ThreadTurn(self.new_id(), turn.parent, None, created_at=thread.updated_at)
                _set_tail(variant, 0, head + tail)
                variant.answer_seen = True
                base = self._add_turn(thread, variant)
                for k, p in enumerate(places):
                    if p is not None and p[0] == position and p[1] <= index:
                        places[k] = (base, p[1])
                for n, k in enumerate(at):
                    places[j + 1 + k] = (base, index + 1 + n)
        parent, added = self._observed_turns(thread, base, newer[lead:], thread.updated_at)
        places[j + 1 + lead :] = added
        return parent, places

    def _observed_turns(
        self, thread: Thread, parent: int | None, messages: list[Message], at: float
    ) -> tuple[int | None, list[Place]]:
        """Turns a payload showed and no call made (history MemLens never saw), chained after ``parent``:
        one per user message (a first group without one is an opening). Returns the last and each
        message's place."""
        groups: list[list[Message]] = []
        skipped = {k for k, m in enumerate(messages) if m.role == "system"}  # never a turn's: see split_payload
        messages = [m for m in messages if m.role != "system"]
        for m in messages:
            if m.role == "user" or not groups:
                groups.append([m])
            else:
                groups[-1].append(m)
        places: list[Place] = []
        for group in groups:
            turn = ThreadTurn(self.new_id(), parent, None, created_at=at)
            _set_tail(turn, 0, group)
            turn.answer_seen = True
            parent = self._add_turn(thread, turn)
            places += [(parent, i) for i in range(len(group))]
        for k in sorted(skipped):
            places.insert(k, None)
        return parent, places

    def _node(self, thread: Thread, call: Call, payload: Payload) -> Node:
        if call.node_name:  # named by the builder: that node, whatever its prompt
            named = next((n for n in thread.nodes.values() if n.name == call.node_name), None)
            return named if named is not None else self._new_node(thread, call, payload)
        tools = tuple(sorted(call.tools))
        same_kind = [n for n in thread.nodes.values() if n.tools == tools and n.api == call.api and not n.name]
        for n in same_kind:
            if payload.system in (n.system, n.latest):
                return n
        best, likeness = None, 0.0
        for n in same_kind:
            ratio = max(
                SequenceMatcher(None, prompt[:4000], payload.system[:4000]).ratio()
                for prompt in {n.system, n.latest or n.system}
            )
            if ratio > likeness:
                best, likeness = n, ratio
        if best is not None and likeness >= SAME_NODE_LIKENESS:
            return best
        return self._new_node(thread, call, payload)

    def _new_node(self, thread: Thread, call: Call, payload: Payload) -> Node:
        number = len(thread.nodes) + 1
        tools = tuple(sorted(call.tools))
        node = Node(
            f"node-{number}",
            payload.system,
            tools,
            call.api,
            call.model,
            call.node_name or node_title(number, payload.system, tools),
            payload.system,
            name=call.node_name or "",
        )
        thread.nodes[node.id] = node
        return node

    def _turn(
        self,
        thread: Thread,
        parent: int | None,
        payload: Payload,
        qkey: Key | None,
        node: Node,
        call: Call,
        step_keys: tuple,
        payload_keys: tuple,
        text: bool = False,
    ) -> tuple[int, Node]:
        """The turn the call is a call of, and its node: the newest turn after ``parent`` with its query (one
        whose query a text-history call's query holds, or which holds this call's when that turn's query
        was such a call's: :func:`_asks`). When its node called there already, the call is the next step of
        that call's tool round or its retry (that turn), or else a regenerated answer (a new turn beside it:
        Dify's own regenerate may send a shorter history, a sibling's row taking a window slot). Nodes are
        told apart by name, or else by prompt and tools."""
        siblings = [
            p
            for p in thread.children(parent)
            if (thread.turns[p].query is None and qkey is None) or _asks(thread.turns[p], payload.query, text)
        ]
        if (
            siblings
            and not text
            and thread.turns[siblings[-1]].query_wrapped
            and thread.can_grow(siblings[-1])
            and message_key(thread.turns[siblings[-1]].query) != qkey
        ):  # the question: the turn's query now

            def ask(t: ThreadTurn) -> None:
                t.query, t.query_wrapped = payload.query, False

            self._rewrite(thread, siblings[-1], ask)
        if siblings:
            position = siblings[-1]
            turn = thread.turns[position]
            mine = [c for c in turn.calls if c.node == node.id]
            if (
                mine
                and not node.name
                and payload.system not in (node.system, node.latest)
                and any(
                    c.call.messages
                    and node_payload(c.call.messages, split_payload(c.call.messages))[0].system != payload.system
                    for c in mine
                )
            ):
                # A prompt only like this node's, beside one of its calls in the same turn: another node.
                node, mine = self._other_node(thread, turn, call, payload), []
            if mine:
                last = mine[-1]
                extends = len(step_keys) > len(last.step_keys) and step_keys[: len(last.step_keys)] == last.step_keys
                retry = last.call.status != SUCCEEDED and payload_keys == last.payload_keys
                if extends or retry:
                    self._take_steps(thread, position, payload)
                    return position, node
            else:
                self._take_steps(thread, position, payload)
                return position, node
        turn = ThreadTurn(
            self.new_id(), parent, payload.query, list(payload.steps), created_at=call.started_at, query_wrapped=text
        )
        return self._add_turn(thread, turn), node

    def _other_node(self, thread: Thread, turn: ThreadTurn, call: Call, payload: Payload) -> Node:
        """A node with this call's prompt and tools that has not called in ``turn`` (made when there is none)."""
        busy = {c.node for c in turn.calls}
        tools = tuple(sorted(call.tools))
        for n in thread.nodes.values():
            if (
                n.id not in busy
                and not n.name
                and n.tools == tools
                and n.api == call.api
                and payload.system in (n.system, n.latest)
            ):
                return n
        return self._new_node(thread, call, payload)

    def _take_steps(self, thread: Thread, position: int, payload: Payload) -> None:
        """A call's tool round becomes its turn's steps when it extends them (and the turn may grow)."""
        turn = thread.turns[position]
        steps = list(payload.steps)
        if (
            len(steps) > len(turn.steps)
            and [message_key(m) for m in steps[: len(turn.steps)]] == [message_key(m) for m in turn.steps]
            and thread.can_grow(position)
        ):
            self._rewrite(thread, position, lambda t: setattr(t, "steps", steps))

    def _answer(self, thread: Thread, position: int, call: Call, text: bool = False) -> None:
        """The turn's answer until a later payload shows the app's own: the newest final reply (a text-history
        call's — a classifier's verdict — only while the turn has none)."""
        turn = thread.turns[position]
        reply = call.reply
        if call.status != SUCCEEDED or reply is None or reply.tool_calls or turn.answer_seen:
            return
        if text and turn.answer is not None:
            return
        if turn.answer is not None and message_key(turn.answer) == message_key(reply):
            return
        if turn.answer is None and not thread.can_grow(position):
            return
        self._rewrite(thread, position, lambda t: setattr(t, "answer", reply))


def node_name(value) -> str | None:
    """A node name as a call carries it: text (or a number) in one line, at most
    :data:`~core.limits.CAPTURE_NAME_CHARS` characters."""
    if isinstance(value, (str, int)) and not isinstance(value, bool) and " ".join(str(value).split()):
        return " ".join(str(value).split())[:CAPTURE_NAME_CHARS]
    return None


def _asks(turn: ThreadTurn, query: Message | None, text: bool) -> bool:
    """Whether a call asking ``query`` is a call of ``turn``: the same query; for a text-history call (``text``),
    a query that holds the turn's; for another, a query the turn's wrapped query holds."""
    if turn.query is None or query is None:
        return False
    if message_key(turn.query) == message_key(query):
        return True
    inner, outer = (turn.query.content, query.content) if text else (query.content, turn.query.content)
    return bool(inner.strip()) and (text or turn.query_wrapped) and inner.strip() in outer


def node_payload(messages: Sequence[Message], sent: Payload) -> tuple[Payload, TextHistory | None]:
    """The payload as its node's memory chose it: as sent, or, when its history came as text lines
    (:func:`~core.capture.text_history.read_text_history`), those lines as its history and the message that
    held them without them as its prompt (the messages around them are the node's own, not history)."""
    query = sent.system_count + len(sent.history) if sent.query is not None else None
    text = read_text_history(messages, system_count=sent.system_count, query=query, history_sent=bool(sent.history))
    if text is None:
        return sent, None
    system = text.without(messages[text.index].content) if text.index < sent.system_count else sent.system
    return Payload(system, sent.system_count, text.messages, sent.query, sent.steps), text


def text_record(text: TextHistory, places: Sequence[Place | None]) -> dict:
    """A text history as a placed call keeps it: the message holding it, its span, its prefixes, and each
    line's message with its place on the thread (``None``: no turn holds it)."""
    return {
        "index": text.index,
        "start": text.start,
        "end": text.end,
        "user": text.user,
        "assistant": text.assistant,
        "lines": [
            {"role": m.role, "content": m.content, "place": list(p) if p is not None else None}
            for m, p in zip(text.messages, places)
        ],
    }


def _set_tail(turn: ThreadTurn, keep: int, tail: Sequence[Message]) -> None:
    """The turn's messages become its first ``keep`` and then ``tail``: the first a user message is its
    query, the last assistant message without tool calls its answer, the rest its steps."""
    messages = turn.raw()[:keep] + list(tail)
    query = messages[0] if messages and messages[0].role == "user" else None
    rest = messages[1:] if query is not None else messages
    answer = (
        rest[-1]
        if rest and rest[-1].role == "assistant" and not rest[-1].tool_calls and rest[-1].kind != REASONING
        else None
    )
    turn.query, turn.steps, turn.answer = query, list(rest[:-1] if answer is not None else rest), answer


def thread_calls(calls: Iterable[Call], new_id: Callable[[], str] | None = None) -> list[Thread]:
    """The conversations a set of calls forms, placed in time order (an imported trace's calls)."""
    threader = Threader(new_id) if new_id is not None else Threader()
    for call in sorted(calls, key=lambda c: c.started_at):
        threader.place(call)
    return threader.threads


__all__ = ["Threader", "node_name", "node_payload", "text_record", "thread_calls"]
