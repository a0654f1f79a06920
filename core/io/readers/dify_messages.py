"""Dify Service API history (``GET /v1/messages``: ``{data: [...]}`` or the bare list), grouped by
``conversation_id``; :func:`dify_turn` reads one message record (pulling from a Dify app uses it too)."""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from core.io.errors import RecordError
from core.model.conversation import (ANSWER, QUERY, TOOL_CALL, TOOL_RESULT, Conversation, FileRef, Message, ToolCall,
                                     Turn)

from .records import Problem, ReadContext, Record, Records
from .registry import Format

def dify_turn(item: dict) -> Turn:
    if "id" not in item or not item["id"]:
        raise RecordError("the message record has no 'id'", "id")
    mid = str(item["id"])
    for key in ("query", "answer"):
        if key in item and item[key] is not None and not isinstance(item[key], str):
            raise RecordError(f"'{key}' must be a string", key)
    user_files, assistant_files = _files(item.get("message_files"))
    messages = [Message(role="user", content=item.get("query") or "", kind=QUERY, ref=f"{mid}:query",
                        files=user_files)]
    thoughts = item.get("agent_thoughts") or []
    if not isinstance(thoughts, list):
        raise RecordError("'agent_thoughts' must be a list", "agent_thoughts")
    for k, thought in enumerate(thoughts):
        if not isinstance(thought, dict) or not thought.get("tool"):
            continue
        pos = thought.get("position", k + 1)
        call = ToolCall(id=str(thought.get("id", f"{mid}-{pos}")), name=str(thought["tool"]),
                        arguments=str(thought.get("tool_input") or ""))
        messages.append(Message(role="assistant", content=str(thought.get("thought") or ""), kind=TOOL_CALL,
                                ref=f"{mid}:thought{pos}", tool_calls=(call,)))
        messages.append(Message(role="tool", content=str(thought.get("observation") or ""), kind=TOOL_RESULT,
                                ref=f"{mid}:observation{pos}", tool_call_id=call.id))
    messages.append(Message(role="assistant", content=item.get("answer") or "", kind=ANSWER, ref=f"{mid}:answer",
                            files=assistant_files))
    parent = item.get("parent_message_id")
    created = item.get("created_at")
    return Turn(id=mid, parent_id=str(parent) if parent else None, messages=tuple(messages), query_index=0,
                answer_index=len(messages) - 1, status=str(item.get("status") or "normal"),
                error=item.get("error"), created_at=float(created) if isinstance(created, (int, float)) else None,
                answer_tokens=item.get("answer_tokens") if isinstance(item.get("answer_tokens"), int) else None,
                meta={k: item[k] for k in ("inputs", "message_tokens", "feedback") if k in item})


def _files(raw: Any) -> tuple[tuple[FileRef, ...], tuple[FileRef, ...]]:
    """User files are those that belong to the user *or to nobody*; assistant files belong to the
    assistant (spec/dify-memory.md §1.5)."""
    if not raw:
        return (), ()
    if not isinstance(raw, list):
        raise RecordError("'message_files' must be a list", "message_files")
    user, assistant = [], []
    for f in raw:
        if not isinstance(f, dict):
            raise RecordError("a message file must be an object", "message_files")
        ref = FileRef(type=str(f.get("type") or "file"), url=str(f.get("url") or ""), id=str(f.get("id") or ""))
        (assistant if f.get("belongs_to") == "assistant" else user).append(ref)
    return tuple(user), tuple(assistant)


def _sniff(first: Any, layout: str) -> bool:
    if layout == "document" and isinstance(first, dict) and isinstance(first.get("data"), list):
        items = first["data"]
        return not items or (isinstance(items[0], dict) and "query" in items[0] and "answer" in items[0])
    return isinstance(first, dict) and "query" in first and "answer" in first


def _read(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    doc = records.first
    if records.layout == "document":
        items = doc.get("data") if isinstance(doc, dict) else doc
        if not isinstance(items, list):
            ctx.report(Problem(None, "data", "'data' must be a list of message records"))
            return
        source: Iterable[Record] = records.inner(items)
    else:
        source = records
    groups: dict[str, list[tuple[int, Turn]]] = {}
    failed: set[str] = set()

    def conv_of(item: Any) -> str:
        return str(item.get("conversation_id") or ctx.stem) if isinstance(item, dict) else ctx.stem

    def parse(item: Any, n: int | None) -> None:
        if not isinstance(item, dict):
            raise RecordError("the message record is not an object", "")
        turn = dify_turn(item)
        groups.setdefault(conv_of(item), []).append((n or 0, turn))

    for rec in source:
        before = len(ctx.problems)
        for _ in ctx.each([rec], parse, conv_of):
            pass
        if len(ctx.problems) > before and isinstance(rec.value, dict):
            failed.add(conv_of(rec.value))
    for conv_id, rows in groups.items():
        if conv_id in failed:
            continue  # a conversation with a bad record is left out whole
        # The API pages newest first and lists each page oldest first; creation time decides.
        rows.sort(key=lambda r: (r[1].created_at if r[1].created_at is not None else float("-inf"), r[0]))
        yield Conversation(id=conv_id, turns=[t for _, t in rows], source_format="dify-messages", name=conv_id)


FORMAT = Format("dify-messages", "Dify Service API history (GET /v1/messages)", _sniff, _read)
