"""A LangGraph thread's state — its checkpoint's messages — as JSON.

LangGraph's API and SDK give a thread's state as ``{"values": {"messages": [...], …}, "next": [...],
"checkpoint": {"thread_id", "checkpoint_id", …}, "metadata", "created_at", …}`` (``GET
/threads/{id}/state``; ``graph.get_state(config)`` holds the same, its ``config`` naming the thread); a
checkpointer's own checkpoint holds them as ``channel_values``. Each message is a LangChain message as
LangGraph serialises it: its ``model_dump()`` (``{"type": "human", "content": …, "id": …, "tool_calls":
…}``), ``messages_to_dict``'s ``{"type", "data"}`` or ``dumpd`` (:mod:`.langchain`). A state is one
conversation (the thread's id its id; the ``messages`` channel holds the whole thread, whatever a
``pre_model_hook`` sent the model), a leading system message its system prompt; a tool message keeps its
tool's ``name``, which LangChain's ``count_tokens_approximately`` counts. A file may list several
states (an array, JSON Lines): a thread's history lists its newest state first, so the first state of
each thread is read and its older ones are left out with a note.
"""

from __future__ import annotations

from typing import Any, Iterator

from core.io.errors import RecordError
from core.model.conversation import Conversation

from .common import conversation_from_messages, excerpt
from .langchain import is_langchain, unflattened
from .openai import openai_messages
from .records import ReadContext, Records
from .registry import Format

NAME = "langgraph-checkpoint"
#: Where a state keeps its channels: the API's ``values``, a checkpoint's ``channel_values``.
VALUES = ("values", "channel_values")


def _values(rec: Any) -> dict | None:
    if not isinstance(rec, dict):
        return None
    return next((rec[k] for k in VALUES if isinstance(rec.get(k), dict)), None)


def thread_id(rec: Any) -> str:
    """The thread a state belongs to: its ``checkpoint``'s, else its ``config``'s; "" when it names none."""
    if not isinstance(rec, dict):
        return ""
    checkpoint = rec.get("checkpoint") if isinstance(rec.get("checkpoint"), dict) else {}
    config = rec.get("config") if isinstance(rec.get("config"), dict) else {}
    configurable = config.get("configurable") if isinstance(config.get("configurable"), dict) else {}
    found = checkpoint.get("thread_id") or configurable.get("thread_id") or rec.get("thread_id")
    return str(found) if isinstance(found, (str, int)) and not isinstance(found, bool) and found != "" else ""


def _conversation(rec: Any, n: int | None, stem: str) -> Conversation:
    values = _values(rec)
    if values is None:
        raise RecordError("the record is not a thread state: it has no 'values' (or 'channel_values') object", "values")
    listed = values.get("messages")
    if not isinstance(listed, list):
        raise RecordError("'values.messages' must be a list of messages", "values.messages")
    raw = []
    for i, m in enumerate(listed):
        m = unflattened(m)
        if not is_langchain(m):
            kind = m.get("type") if isinstance(m, dict) else None
            raise RecordError(
                f"message {i} is not a LangChain message (type {excerpt(str(kind), 30)!r}); expected "
                '{"type": "human" | "ai" | "tool" | "system", "content": …}',
                f"message {i}",
            )
        raw.append(m)
    conv_id = thread_id(rec) or (stem if n is None else f"{stem}#{n}")
    meta = {"thread_id": conv_id}
    if isinstance(rec.get("created_at"), str):
        meta["created_at"] = rec["created_at"]
    conv = conversation_from_messages(openai_messages(raw, tool_names=True), conv_id, source_format=NAME, meta=meta)
    if not conv.turns:
        raise RecordError("the thread holds no user or assistant message", "values.messages")
    return conv


def _read(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    seen: dict[str, int] = {}
    for conv in ctx.each(records, lambda rec, n: _conversation(rec, n, ctx.stem), thread_id):
        if conv.id in seen:
            seen[conv.id] += 1
            continue
        seen[conv.id] = 1
        yield conv
    for thread, count in seen.items():
        if count > 1:
            ctx.notes.append(
                f"thread {excerpt(thread, 60)!r}: {count} states listed, the first read (a thread's "
                "history lists its newest state first)"
            )


def _sniff(first: Any, layout: str) -> bool:
    values = _values(first)
    return (
        values is not None
        and isinstance(values.get("messages"), list)
        and ("next" in first or "checkpoint" in first or "config" in first or "channel_versions" in first)
    )


FORMAT = Format(
    NAME, "LangGraph thread state (values.messages of a checkpoint, as the API or get_state gives it)", _sniff, _read
)
