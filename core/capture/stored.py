"""A captured conversation as the store keeps it, and back.

A :class:`~core.capture.threader.Thread` is stored as any conversation is: a conversation row, one
turn row per turn (its messages, parent id, status), and one node run per call — the node it is a call
of, the payload as a receipt (``prompt``: each message with its origin and tokens), the observed
ledger (``ledger``), the reply, the usage, the latency, and under ``call`` the request as sent, the
response put together, the status code, the timings and the non-secret headers. A run is marked
``emulated: false``: it records what a bot sent, not what MemLens ran.

The conversation's ``meta["capture"]`` holds its nodes (id, system prompt, tools, API, model, title)
and its pin and user; each turn's ``prompt_tokens`` gives, per node, what its call's prompt held
besides history (what a replay of that node's memory subtracts, :func:`core.capture.inference.node_replay`).
"""

from __future__ import annotations

from typing import Any, Mapping

from core.model.conversation import Conversation, Turn, message_text
from core.store.ledger_codec import pack_ledger

from .calls import Node, Placed, Thread
from .observed import fixed_tokens, observed_ledger, payload_rows

#: ``Conversation.meta`` / the stored conversation's meta key of a captured conversation's nodes, pin, user.
CAPTURE = "capture"
#: ``Turn.meta`` key of the node runs a threaded import stores with the turn.
NODE_RUNS = "node_runs"
#: ``Turn.meta`` key of each node's fixed prompt tokens at that turn.
PROMPT_TOKENS = "prompt_tokens"
#: A captured call's node-run type.
CALL_TYPE = "model-call"
#: The source of conversations the proxy captured.
SOURCE = "capture"


def capture_meta(thread: Thread) -> dict:
    return {"pin": thread.pin, "user": thread.user, "nodes": [n.to_json() for n in thread.nodes.values()]}


def nodes_of(meta: Mapping) -> dict[str, Node]:
    """A stored conversation's nodes (none when it was not captured nor threaded from calls)."""
    capture = meta.get(CAPTURE) if isinstance(meta, Mapping) else None
    out: dict[str, Node] = {}
    for d in (capture or {}).get("nodes") or [] if isinstance(capture, Mapping) else []:
        if isinstance(d, Mapping) and d.get("id"):
            node = Node.from_json(d)
            out[node.id] = node
    return out


def node_run(thread: Thread, placed: Placed, conversation: Conversation) -> dict:
    """One call as a node run (what :func:`core.store.repo` writes), made once per call: what its payload held
    and its earlier turns do not change (:meth:`Thread.can_grow`)."""
    if placed.stored is None:
        placed.stored = _node_run(thread, placed, conversation)
    return placed.stored


def _node_run(thread: Thread, placed: Placed, conversation: Conversation) -> dict:
    call = placed.call
    rows = payload_rows(call.messages, placed.roles, call.model, placed.text)
    ledger = observed_ledger(
        conversation, placed.position, placed.kept, rows=rows, model=call.model, node=placed.node, text=placed.text
    )
    record = dict(call.record)
    return {
        "node_id": placed.node,
        "type": CALL_TYPE,
        "title": thread.nodes[placed.node].title,
        "emulated": False,
        "status": call.status,
        "error": call.error,
        "ledger": pack_ledger(ledger),
        "prompt": rows,
        "reply": message_text(call.reply) if call.reply is not None else None,
        "usage": record.get("usage"),
        "latency_ms": record.get("latency_ms"),
        "model": call.model,
        "call_number": placed.number,
        "step": placed.step,
        "started_at": call.started_at,
        "places": [list(p) if p else None for p in placed.places],
        "roles": list(placed.roles),
        "kept": [list(p) for p in placed.kept],
        "call_id": call.id,
        "api": call.api,
        "tools": list(call.tools),
        "user": call.user,
        "pin": call.pin,
        "reply_message": call.reply.to_dict() if call.reply is not None else None,
        "previous_response": call.previous_response,
        "response_id": call.response_id,
        "node_name": call.node_name,
        "text_history": placed.text,
        "call": {k: v for k, v in record.items() if k not in ("usage", "latency_ms")},
    }


def turn_record(thread: Thread, position: int, conversation: Conversation) -> dict:
    """One turn as a stored turn (what :func:`core.store.repo` writes), its calls' node runs with it."""
    turn, mine = conversation.turns[position], thread.turns[position]
    runs = [node_run(thread, placed, conversation) for placed in mine.calls]
    prompt_tokens: dict[str, int] = {}
    for placed, run in zip(mine.calls, runs):
        if placed.step == 1 and placed.node not in prompt_tokens:
            prompt_tokens[placed.node] = fixed_tokens(run["prompt"])
    return {
        "id": turn.id,
        "parent_id": turn.parent_id,
        "query": turn.query,
        "answer": turn.answer,
        "status": mine.status,
        "error": mine.error,
        "dialogue_count": conversation.tree.depth[position],
        "messages": [m.to_dict() for m in turn.messages],
        "created_at": mine.created_at,
        PROMPT_TOKENS: prompt_tokens,
        "answer_seen": mine.answer_seen,
        "query_wrapped": mine.query_wrapped,
        NODE_RUNS: runs,
    }


def as_conversation(thread: Thread, *, source_format: str, meta: Mapping[str, Any] | None = None) -> Conversation:
    """The conversation a thread of imported calls forms, each turn carrying its calls' node runs and its
    nodes' prompt sizes in its meta (:data:`NODE_RUNS`, :data:`PROMPT_TOKENS`), for the store."""
    conversation = thread.conversation()
    turns = []
    for position, turn in enumerate(conversation.turns):
        record = turn_record(thread, position, conversation)
        turns.append(
            Turn(
                id=turn.id,
                parent_id=turn.parent_id,
                messages=turn.messages,
                query_index=turn.query_index,
                answer_index=turn.answer_index,
                status=turn.status,
                error=turn.error,
                created_at=turn.created_at,
                meta={NODE_RUNS: record[NODE_RUNS], PROMPT_TOKENS: record[PROMPT_TOKENS]},
            )
        )
    out_meta = {**(meta or {}), **conversation.meta, CAPTURE: capture_meta(thread)}
    return Conversation(
        id=thread.id, turns=turns, source_format=source_format, name=thread.name or thread.id, meta=out_meta
    )


__all__ = [
    "CALL_TYPE",
    "CAPTURE",
    "NODE_RUNS",
    "PROMPT_TOKENS",
    "SOURCE",
    "as_conversation",
    "capture_meta",
    "node_run",
    "nodes_of",
    "turn_record",
]
