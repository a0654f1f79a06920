"""Reading conversations from real formats, auto-detected.

* ``openai`` — OpenAI chat messages: a JSON array of ``{role, content, name?, tool_calls?,
  tool_call_id?}``, an object with a ``messages`` array, or JSON Lines with one such object per
  line (tau-bench style). A turn starts at each ``user`` message; leading ``system`` messages
  are the node's system prompt, not history; a turn's final answer is its last assistant
  message.
* ``dify-messages`` — Dify Service API history (``GET /v1/messages``: ``{data: [...]}`` or the
  bare list), grouped by ``conversation_id``.
* ``dify-web`` — Dify web chat items (``isAnswer`` / ``parentMessageId``); question items
  pair with their answers into message records.

Anything else is a :class:`FormatError` naming what was wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from .conversation import (ANSWER, INTERMEDIATE, QUERY, REASONING, TOOL_CALL, TOOL_RESULT, Conversation, FileRef,
                           Message, ToolCall, Turn)
from .errors import MemLensError

FORMATS = ("openai", "dify-messages", "dify-web")
_ROLE_ALIASES = {"developer": "system", "function": "tool", "human": "user", "ai": "assistant"}
_VALID_ROLES = ("system", "user", "assistant", "tool")
_TEXT_PARTS = {"text", "input_text", "output_text"}
_IMAGE_PARTS = {"image_url", "image", "input_image"}
_REASONING_PARTS = {"reasoning", "thinking"}


class FormatError(MemLensError):
    """The input is not a conversation in a supported format; the message says what to fix."""


# -- loading ----------------------------------------------------------------------------------------

def load_json_or_jsonl(text: str, name: str = "input") -> tuple[Any, bool]:
    """Parse a whole JSON document or JSON Lines. Returns (data, is_jsonl)."""
    stripped = text.strip()
    if not stripped:
        raise FormatError(f"{name} is empty; expected a JSON or JSON Lines conversation file")
    try:
        return json.loads(stripped), False
    except json.JSONDecodeError as whole_error:
        rows = []
        for n, line in enumerate(stripped.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                if n == 1:
                    raise FormatError(f"{name} is not JSON or JSON Lines: {whole_error.msg} at line "
                                      f"{whole_error.lineno}, column {whole_error.colno}") from None
                raise FormatError(f"{name}: line {n} is not valid JSON ({e.msg}, column {e.colno})") from None
        return rows, True


def read_conversations(path: str | Path, fmt: str | None = None) -> list[Conversation]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise FormatError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise FormatError(f"{path} is a directory; expected a conversation file") from None
    except UnicodeDecodeError:
        raise FormatError(f"{path} is not UTF-8 text; expected a JSON or JSON Lines conversation file") from None
    except OSError as e:
        raise FormatError(f"{path}: cannot read ({e.strerror})") from None
    return parse_conversations(text, name=path.name, fmt=fmt)


def parse_conversations(text: str, name: str = "input", fmt: str | None = None) -> list[Conversation]:
    data, is_jsonl = load_json_or_jsonl(text, name)
    fmt = fmt or detect_format(data, is_jsonl, name)
    if fmt not in _PARSERS:
        raise FormatError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    conversations = _PARSERS[fmt](data, Path(name).stem)
    if not conversations:
        raise FormatError(f"{name} holds no conversation")
    return conversations


def detect_format(data: Any, is_jsonl: bool = False, name: str = "input") -> str:
    items = data
    if isinstance(data, dict):
        if isinstance(data.get("data"), list):
            items = data["data"]
            if items and all(isinstance(x, dict) and "query" in x and "answer" in x for x in items):
                return "dify-messages"
            if not items:
                return "dify-messages"
        if isinstance(data.get("messages"), list):
            return "openai"
    if isinstance(items, list) and items:
        first = items[0]
        if all(isinstance(x, dict) for x in items):
            if all("isAnswer" in x for x in items):
                return "dify-web"
            if all("query" in x and "answer" in x for x in items):
                return "dify-messages"
            if "messages" in first:
                return "openai"
            if "role" in first or "content" in first:
                return "openai"
    raise FormatError(f"{name}: unknown format; expected one of {', '.join(FORMATS)} "
                      "(OpenAI chat messages, Dify /v1/messages history, Dify web chat items)")


# -- OpenAI chat messages ---------------------------------------------------------------------------

def _flatten_content(content: Any, where: str) -> tuple[str, list[str], list[ToolCall]]:
    """(text, reasoning texts, tool calls) of a content value: a string or a list of typed parts."""
    if content is None:
        return "", [], []
    if isinstance(content, str):
        return content, [], []
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        raise FormatError(f"{where}: 'content' must be a string or a list of parts, not {type(content).__name__}")
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    for k, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            raise FormatError(f"{where}: content part {k} must be an object or a string")
        kind = part.get("type", "text")
        value = part.get("text", part.get("value"))
        if kind in _TEXT_PARTS:
            texts.append(value if isinstance(value, str) else "")
        elif kind in _IMAGE_PARTS:
            texts.append("[image]")
        elif kind in _REASONING_PARTS:
            reasoning.append(value if isinstance(value, str) else str(part.get("thinking", "")))
        elif kind == "tool_call":
            calls.append(_tool_call_from_part(value, f"{where}: content part {k}", len(calls)))
        elif isinstance(value, str):
            texts.append(value)
        else:
            texts.append(f"[{kind}]")
    return "\n".join(texts), reasoning, calls


def _tool_call_from_part(value: Any, where: str, n: int) -> ToolCall:
    data = value
    if isinstance(value, str):
        try:
            data = json.loads(value)
        except json.JSONDecodeError:
            raise FormatError(f"{where}: tool_call is not valid JSON") from None
    if not isinstance(data, dict) or "name" not in data:
        raise FormatError(f"{where}: tool_call needs a 'name'")
    args = data.get("arguments", {})
    return ToolCall(id=str(data.get("id", f"call_{n}")), name=str(data["name"]),
                    arguments=args if isinstance(args, str) else json.dumps(args, ensure_ascii=False))


def _tool_calls(raw: Any, where: str) -> list[ToolCall]:
    if raw in (None, []):
        return []
    if not isinstance(raw, list):
        raise FormatError(f"{where}: 'tool_calls' must be a list")
    calls = []
    for k, call in enumerate(raw):
        if not isinstance(call, dict):
            raise FormatError(f"{where}: tool call {k} must be an object")
        fn = call.get("function", call)
        if not isinstance(fn, dict) or not fn.get("name"):
            raise FormatError(f"{where}: tool call {k} has no function name")
        args = fn.get("arguments", "")
        calls.append(ToolCall(id=str(call.get("id", f"call_{k}")), name=str(fn["name"]),
                              arguments=args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)))
    return calls


def _openai_messages(raw: list, where: str) -> list[Message]:
    """Validated messages; ``ref`` is the message's 0-based index in the source list."""
    out: list[Message] = []
    for i, m in enumerate(raw):
        at = f"{where}: message {i}"
        if not isinstance(m, dict):
            raise FormatError(f"{at} is not an object")
        if "role" not in m:
            raise FormatError(f"{at} has no 'role'")
        role = m["role"]
        if not isinstance(role, str):
            raise FormatError(f"{at} has a 'role' that is not a string")
        role = _ROLE_ALIASES.get(role, role)
        if role not in _VALID_ROLES:
            raise FormatError(f"{at} has an unknown role {m['role']!r}; expected one of system, user, assistant, tool")
        text, reasoning, part_calls = _flatten_content(m.get("content"), at)
        calls = _tool_calls(m.get("tool_calls"), at) + part_calls
        if isinstance(m.get("function_call"), dict):
            calls += _tool_calls([{"function": m["function_call"]}], at)
        extra_reasoning = m.get("reasoning_content") or m.get("reasoning")
        if isinstance(extra_reasoning, str) and extra_reasoning:
            reasoning.insert(0, extra_reasoning)
        name = m.get("name") if isinstance(m.get("name"), str) and role != "tool" else None
        for r in reasoning:
            out.append(Message(role="assistant", content=r, kind=REASONING, ref=f"{i}:reasoning"))
        out.append(Message(role=role, content=text, kind="", ref=i, name=name, tool_calls=tuple(calls),
                           tool_call_id=m.get("tool_call_id") if isinstance(m.get("tool_call_id"), str) else None))
    return out


def conversation_from_messages(messages: list[Message], conv_id: str, *, source_format: str = "openai",
                               name: str = "", meta: dict | None = None) -> Conversation:
    """Split a flat message list into turns: one per user message; leading system → system prompt."""
    system: list[str] = []
    i = 0
    while i < len(messages) and messages[i].role == "system" and messages[i].kind != REASONING:
        system.append(messages[i].content)
        i += 1
    groups: list[list[Message]] = []
    for m in messages[i:]:
        if m.role == "user" or not groups:
            groups.append([m])
        else:
            groups[-1].append(m)
    turns: list[Turn] = []
    offset = 0 if groups and groups[0][0].role != "user" else 1  # an opening without a query is turn 0
    for g in groups:
        has_query = g[0].role == "user"
        last_assistant = max((k for k, m in enumerate(g) if m.role == "assistant" and m.kind != REASONING),
                             default=None)
        msgs = []
        for k, m in enumerate(g):
            if k == 0 and has_query:
                kind = QUERY
            elif k == last_assistant:
                kind = ANSWER
            elif m.kind == REASONING:
                kind = REASONING
            elif m.role == "tool":
                kind = TOOL_RESULT
            elif m.tool_calls:
                kind = TOOL_CALL
            else:
                kind = INTERMEDIATE
            msgs.append(Message(role=m.role, content=m.content, kind=kind, ref=m.ref, name=m.name,
                                tool_calls=m.tool_calls, tool_call_id=m.tool_call_id))
        turn_id = str(len(turns) + offset)
        parent = turns[-1].id if turns else None
        turns.append(Turn(id=turn_id, parent_id=parent, messages=tuple(msgs),
                          query_index=0 if has_query else None, answer_index=last_assistant))
    return Conversation(id=conv_id, turns=turns, system_prompt="\n\n".join(s for s in system if s),
                        source_format=source_format, name=name or conv_id, meta=meta or {})


def _parse_openai(data: Any, stem: str) -> list[Conversation]:
    if isinstance(data, dict):
        records = [data]
    elif isinstance(data, list) and data and all(isinstance(x, dict) and "messages" in x for x in data):
        records = data
    else:
        records = [{"messages": data}]
    out = []
    for n, rec in enumerate(records):
        raw = rec.get("messages")
        where = stem if len(records) == 1 else f"{stem} record {n}"
        if not isinstance(raw, list):
            raise FormatError(f"{where}: 'messages' must be a list")
        meta = {k: v for k, v in rec.items() if k != "messages" and isinstance(v, (str, int, float, bool))}
        conv_id = str(rec.get("id") or (stem if len(records) == 1 else f"{stem}#{n}"))
        conv = conversation_from_messages(_openai_messages(raw, where), conv_id, meta=meta,
                                          name=str(rec.get("name") or conv_id))
        if not conv.turns:
            raise FormatError(f"{where} has no user or assistant message")
        out.append(conv)
    return out


# -- Dify Service API history -----------------------------------------------------------------------

def _dify_turn(item: dict, where: str) -> Turn:
    if "id" not in item or not item["id"]:
        raise FormatError(f"{where} has no 'id'")
    mid = str(item["id"])
    for key in ("query", "answer"):
        if key in item and item[key] is not None and not isinstance(item[key], str):
            raise FormatError(f"{where}: '{key}' must be a string")
    user_files, assistant_files = _dify_files(item.get("message_files"), where)
    messages = [Message(role="user", content=item.get("query") or "", kind=QUERY, ref=f"{mid}:query",
                        files=user_files)]
    for k, thought in enumerate(item.get("agent_thoughts") or []):
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


def _dify_files(raw: Any, where: str) -> tuple[tuple[FileRef, ...], tuple[FileRef, ...]]:
    """User files are those that belong to the user *or to nobody*; assistant files belong to the
    assistant (spec/dify-memory.md §1.5)."""
    if not raw:
        return (), ()
    if not isinstance(raw, list):
        raise FormatError(f"{where}: 'message_files' must be a list")
    user, assistant = [], []
    for f in raw:
        if not isinstance(f, dict):
            raise FormatError(f"{where}: a message file must be an object")
        ref = FileRef(type=str(f.get("type") or "file"), url=str(f.get("url") or ""), id=str(f.get("id") or ""))
        (assistant if f.get("belongs_to") == "assistant" else user).append(ref)
    return tuple(user), tuple(assistant)


def _parse_dify_messages(data: Any, stem: str) -> list[Conversation]:
    items = data.get("data") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise FormatError(f"{stem}: 'data' must be a list of message records")
    groups: dict[str, list[tuple[int, Turn]]] = {}
    for n, item in enumerate(items):
        where = f"{stem}: message record {n}"
        if not isinstance(item, dict):
            raise FormatError(f"{where} is not an object")
        turn = _dify_turn(item, where)
        groups.setdefault(str(item.get("conversation_id") or stem), []).append((n, turn))
    out = []
    for conv_id, rows in groups.items():
        # The API pages newest first and lists each page oldest first; creation time decides.
        rows.sort(key=lambda r: (r[1].created_at if r[1].created_at is not None else float("-inf"), r[0]))
        out.append(Conversation(id=conv_id, turns=[t for _, t in rows], source_format="dify-messages",
                                name=conv_id))
    return out


# -- Dify web chat items ----------------------------------------------------------------------------

def _parse_dify_web(data: Any, stem: str) -> list[Conversation]:
    if not isinstance(data, list):
        raise FormatError(f"{stem}: Dify web chat items must be a list")
    by_id: dict[str, dict] = {}
    for n, item in enumerate(data):
        if "id" not in item:
            raise FormatError(f"{stem}: chat item {n} has no 'id'")
        by_id[str(item["id"])] = item
    answered: dict[str, dict] = {}
    for item in data:
        if item.get("isAnswer"):
            parent = item.get("parentMessageId")
            if parent is not None:
                answered[str(parent)] = item
    turns: list[Turn] = []
    conv_id = ""
    for n, item in enumerate(data):
        if item.get("isAnswer"):
            parent = item.get("parentMessageId")
            if parent is not None and str(parent) in by_id:
                continue  # taken with its question
            question, answer = None, item
        else:
            question, answer = item, answered.get(str(item["id"]))
        for it in (question, answer):
            if it is not None and it.get("content") is not None and not isinstance(it.get("content"), str):
                raise FormatError(f"{stem}: chat item {it['id']!r} has a 'content' that is not a string")
        tid = str(answer["id"]) if answer else str(question["id"])
        # The answer's ``input.query`` is the stored message record's query (what memory replays);
        # the question item's ``content`` is only what the chat shows.
        stored = (answer or {}).get("input")
        query = stored.get("query") if isinstance(stored, dict) and isinstance(stored.get("query"), str) else None
        if query is None:
            query = (question or {}).get("content") or ""
        messages = (Message(role="user", content=query, kind=QUERY, ref=f"{tid}:query"),
                    Message(role="assistant", content=(answer or {}).get("content") or "", kind=ANSWER,
                            ref=f"{tid}:answer"))
        parent = question.get("parentMessageId") if question else None
        meta = {}
        if answer is not None and isinstance(answer.get("log"), list):
            meta["log"] = answer["log"]
        if answer is not None and answer.get("conversationId"):
            conv_id = conv_id or str(answer["conversationId"])
        turns.append(Turn(id=tid, parent_id=str(parent) if parent else None, messages=messages, query_index=0,
                          answer_index=1, answer_tokens=None if answer else 0, meta=meta,
                          status="normal" if answer else "running"))
    return [Conversation(id=conv_id or stem, turns=turns, source_format="dify-web", name=stem)]


_PARSERS: dict[str, Callable[[Any, str], list[Conversation]]] = {
    "openai": _parse_openai,
    "dify-messages": _parse_dify_messages,
    "dify-web": _parse_dify_web,
}
