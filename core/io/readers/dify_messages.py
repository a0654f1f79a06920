"""Dify Service API history (``GET /v1/messages``: ``{data: [...]}`` or the bare list), grouped by
``conversation_id``; :func:`dify_turn` reads one message record (pulling from a Dify app uses it too).

A record's ``agent_thoughts`` (an Agent app's run) become the turn's messages as Dify's agent runner
replays them to the model (``api/core/agent/base_agent_runner.py``, ``organize_agent_history``), in
``position`` order (as listed when a position is missing), numbered from 1 in the refs:

* a thought with tools (``tool`` is ``"a;b"``: split on ``;`` as it is) is one assistant message — the
  thought's text and one call per tool, its arguments ``json.dumps`` of that tool's entry in the
  thought's ``tool_input`` object (ASCII-escaped, as Dify dumps them; ``{}`` when the input is not
  an object) — then one tool message per tool: that tool's entry in the ``observation`` object, or
  the whole observation when it is not one;
* a thought with no tool is an assistant message of its text; the last one is the turn's answer.
  Dify replays the thoughts, not the record's ``answer`` (an agent's answer joins every step's
  text); when they differ, the record's answer is kept as the turn's ``shown_answer``;
* ``meta["agent_thoughts"]`` counts the thoughts read: a turn with none replays its answer only when
  it is not empty (``if message.answer``), one with thoughts replays even an empty final thought.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator

from core.io.errors import RecordError
from core.model.conversation import (
    AGENT_THOUGHTS,
    ANSWER,
    INTERMEDIATE,
    QUERY,
    SHOWN_ANSWER,
    TOOL_CALL,
    TOOL_RESULT,
    Conversation,
    FileRef,
    Message,
    ToolCall,
    Turn,
    with_shared_ids,
)

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
    messages = [Message(role="user", content=item.get("query") or "", kind=QUERY, ref=f"{mid}:query", files=user_files)]
    thoughts = item.get("agent_thoughts") or []
    if not isinstance(thoughts, list):
        raise RecordError("'agent_thoughts' must be a list", "agent_thoughts")
    thoughts = [t for t in thoughts if isinstance(t, dict)]
    if all(isinstance(t.get("position"), int) for t in thoughts):
        thoughts.sort(key=lambda t: t["position"])
    answer = item.get("answer") or ""
    meta = {k: item[k] for k in ("inputs", "message_tokens", "feedback") if k in item}
    if thoughts:
        messages += _thought_messages(mid, thoughts)
        meta[AGENT_THOUGHTS] = len(thoughts)
        last = messages[-1]
        if last.kind == INTERMEDIATE:  # the final thought is the answer Dify replays
            messages[-1] = Message("assistant", last.content, ANSWER, f"{mid}:answer", files=assistant_files)
        if last.kind != INTERMEDIATE or last.content != answer:
            meta[SHOWN_ANSWER] = answer
    else:
        messages.append(
            Message(role="assistant", content=answer, kind=ANSWER, ref=f"{mid}:answer", files=assistant_files)
        )
    answer_index = len(messages) - 1 if messages[-1].kind == ANSWER else None
    parent = item.get("parent_message_id")
    created = item.get("created_at")
    return Turn(
        id=mid,
        parent_id=str(parent) if parent else None,
        messages=tuple(messages),
        query_index=0,
        answer_index=answer_index,
        status=str(item.get("status") or "normal"),
        error=item.get("error"),
        created_at=float(created) if isinstance(created, (int, float)) else None,
        answer_tokens=item.get("answer_tokens") if isinstance(item.get("answer_tokens"), int) else None,
        meta=meta,
    )


def _thought_messages(mid: str, thoughts: list[dict]) -> list[Message]:
    """The assistant and tool messages Dify replays for a turn's agent thoughts (module docstring)."""
    out: list[Message] = []
    for pos, thought in enumerate(thoughts, 1):
        text = _text(thought.get("thought"))
        tools = thought.get("tool")
        if not tools or not isinstance(tools, str):
            out.append(Message("assistant", text, INTERMEDIATE, f"{mid}:thought{pos}"))
            continue
        names = tools.split(";")
        inputs = _object(thought.get("tool_input"))
        raw = thought.get("observation")
        observations = _object(raw)
        tid = str(thought.get("id") or f"{mid}-{pos}")
        calls = tuple(
            ToolCall(f"{tid}.{j}", name, json.dumps(inputs.get(name, {}) if inputs is not None else {}))
            for j, name in enumerate(names, 1)
        )
        out.append(Message("assistant", text, TOOL_CALL, f"{mid}:thought{pos}", tool_calls=calls))
        for j, (name, call) in enumerate(zip(names, calls), 1):
            result = observations.get(name, raw) if observations is not None else raw
            out.append(Message("tool", _text(result), TOOL_RESULT, f"{mid}:observation{pos}.{j}", tool_call_id=call.id))
    return out


def _object(raw: Any) -> dict | None:
    """A thought's ``tool_input`` or ``observation`` read as Dify reads it: the JSON object it holds, or
    ``None`` when it holds none (Dify then falls back on the whole text)."""
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _text(value: Any) -> str:
    """A thought's text or a tool's result as the message content: ``None`` is empty, a value that is
    not text its JSON."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


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
        yield Conversation(
            id=conv_id, turns=with_shared_ids(t for _, t in rows), source_format="dify-messages", name=conv_id
        )


FORMAT = Format("dify-messages", "Dify Service API history (GET /v1/messages)", _sniff, _read)
