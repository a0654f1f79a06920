"""OpenAI chat messages: a JSON array of ``{role, content, name?, tool_calls?, tool_call_id?}``, an
object with a ``messages`` array, or JSON Lines with one such object per line; tau-bench's results
and trajectories hold the same list under ``traj``. A message LangChain stored (:mod:`.langchain`) is
read as the OpenAI message it stands for, and so is a Responses API item, as an OpenAI Agents SDK
session stores it (:mod:`.responses`). An Anthropic Messages request reads too: its ``tool_use`` blocks
are the assistant's tool calls, the ``tool_result`` blocks of a user message their results (text the
user wrote beside them a question of its own, after them), its ``thinking`` blocks reasoning, and its
``system`` the system prompt; so does an Amazon Bedrock Converse request, whose blocks are read as the
Anthropic blocks they stand for (:mod:`.converse`). Vercel AI SDK UI messages (:mod:`.ui_messages`) and
Google Gemini contents (a request's ``contents``: :mod:`.gemini`) are read as the messages they stand for.

A turn starts at each ``user`` message; leading ``system`` messages are the node's system prompt,
not history; a turn's final answer is its last assistant message. ``content`` may be a list of
typed parts, which also covers LLaMA-Factory's "v1" messages: ``reasoning`` parts become
``reasoning`` messages, ``tool_call`` parts (a JSON string) become tool calls, and a tool result
written as a JSON list of ``{tool_call_id, …}`` is paired with its call.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Iterator

from core.io.errors import RecordError
from core.model.conversation import REASONING, SOURCE_MODEL, Conversation, Message, ToolCall, source_model

from . import gemini
from .common import (
    ROLE_ALIASES,
    VALID_ROLES,
    arguments,
    conversation_from_messages,
    conversation_id,
    first_user_text,
    label_of,
    read_named,
    record_field,
)
from .converse import anthropic_shape
from .langchain import is_langchain, openai_shape
from .records import Problem, ReadContext, Record, Records
from .registry import Format
from .responses import chat_shape, is_item
from .ui_messages import expand

_TEXT_PARTS = {"text", "input_text", "output_text"}
_IMAGE_PARTS = {"image_url", "image", "input_image"}
_REASONING_PARTS = {"reasoning", "thinking", "redacted_thinking"}
#: Anthropic's content blocks: an assistant's tool call (its own tool, or one Anthropic's server runs), and
#: the result a user message carries back.
_TOOL_USE_PARTS = {"tool_use", "server_tool_use"}
_TOOL_RESULT = "tool_result"


def _flatten_content(content: Any, at: str, message_index: int) -> tuple[str, list[str], list[tuple[ToolCall, bool]]]:
    """(text, reasoning texts, tool calls with "id was generated") of a content value."""
    if content is None:
        return "", [], []
    if isinstance(content, str):
        return content, [], []
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        raise RecordError(f"{at}: 'content' must be a string or a list of parts, not {type(content).__name__}", at)
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[tuple[ToolCall, bool]] = []
    for k, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            raise RecordError(f"{at}: content part {k} must be an object or a string", at)
        kind = part.get("type", "text")
        if not isinstance(kind, str):
            raise RecordError(f"{at}: content part {k} has a 'type' that is not text", at)
        value = part.get("text", part.get("value"))
        if kind in _TEXT_PARTS:
            texts.append(value if isinstance(value, str) else "")
        elif kind in _IMAGE_PARTS:
            texts.append("[image]")
        elif kind in _REASONING_PARTS:
            reasoning.append(value if isinstance(value, str) else str(part.get("thinking", "")))
        elif kind == "tool_call":
            calls.append(_tool_call_from_part(value, f"{at}: content part {k}", f"call_{message_index}_{len(calls)}"))
        elif kind in _TOOL_USE_PARTS:
            if not isinstance(part.get("name"), str) or not part["name"]:
                raise RecordError(f"{at}: content part {k} ({kind}) has no 'name'", at)
            calls.append(
                (
                    ToolCall(
                        id=str(part.get("id") or f"call_{message_index}_{len(calls)}"),
                        name=part["name"],
                        arguments=arguments(part.get("input", {})),
                    ),
                    not part.get("id"),
                )
            )
        elif isinstance(value, str):
            texts.append(value)
        else:
            texts.append(f"[{kind}]")
    return "\n".join(texts), reasoning, calls


def _tool_call_from_part(value: Any, at: str, default_id: str) -> tuple[ToolCall, bool]:
    data = value
    if isinstance(value, str):
        try:
            data = json.loads(value)
        except ValueError:  # (a number past Python's digit limit too)
            raise RecordError(f"{at}: tool_call is not valid JSON", at.split(":")[0]) from None
    if not isinstance(data, dict) or "name" not in data:
        raise RecordError(f"{at}: tool_call needs a 'name'", at.split(":")[0])
    generated = "id" not in data
    return ToolCall(
        id=str(data.get("id", default_id)), name=str(data["name"]), arguments=arguments(data.get("arguments", {}))
    ), generated


def _tool_calls(raw: Any, at: str, message_index: int) -> list[tuple[ToolCall, bool]]:
    if raw in (None, []):
        return []
    if not isinstance(raw, list):
        raise RecordError(f"{at}: 'tool_calls' must be a list", at)
    calls = []
    for k, call in enumerate(raw):
        if not isinstance(call, dict):
            raise RecordError(f"{at}: tool call {k} must be an object", at)
        fn = call.get("function", call)
        if not isinstance(fn, dict) or not fn.get("name"):
            raise RecordError(f"{at}: tool call {k} has no function name", at)
        calls.append(
            (
                ToolCall(
                    id=str(call.get("id", f"call_{message_index}_{k}")),
                    name=str(fn["name"]),
                    arguments=arguments(fn.get("arguments", "")),
                ),
                "id" not in call,
            )
        )
    return calls


def _result_ids(content: str) -> list[str]:
    """Tool-call ids a tool result names in its own text (LLaMA-Factory v1 writes
    ``[{"tool_call_id": …, "name": …, "content": …}]``)."""
    text = content.lstrip()
    if not text.startswith(("[", "{")) or "tool_call_id" not in text:
        return []
    try:
        data = json.loads(text)
    except ValueError:
        return []
    items = data if isinstance(data, list) else [data]
    return [str(x["tool_call_id"]) for x in items if isinstance(x, dict) and x.get("tool_call_id")]


def openai_messages(raw: list, *, tool_names: bool = False) -> list[Message]:
    """Validated messages; ``ref`` is the message's 0-based index in the source list. A tool result's
    ``name`` is kept only with ``tool_names`` (a LangChain ``ToolMessage`` names its tool, and LangChain's
    counters count it); OpenAI's tool messages take none.

    Tool results are paired with their calls: by ``tool_call_id`` when given, by the ids a
    result names in its text, else with the oldest call still waiting for a result. A call
    without an id in the source takes the id its result names.
    """
    out: list[Message] = []
    pending: list[tuple[int, int, bool]] = []  # (index in out, index in its tool_calls, id generated)
    raw = expand(raw)  # a Vercel AI SDK UI message: the messages it stands for, one per step and result
    for i, m in enumerate(raw):
        # A message LangChain stored, a Responses item, a Bedrock Converse message: the message it stands for.
        m = anthropic_shape(chat_shape(openai_shape(m)))
        at = f"message {i}"
        if not isinstance(m, dict):
            raise RecordError(f"{at} is not an object", at)
        if "role" not in m:
            if isinstance(m.get("type"), str):  # a Responses item of a type that stands for no message
                raise RecordError(
                    f"{at} is an item of type {m['type']!r}, which stands for no message MemLens can "
                    "read: a message needs a 'role'; leave the item out of the file",
                    at,
                )
            raise RecordError(f"{at} has no 'role'", at)
        role = m["role"]
        if not isinstance(role, str):
            raise RecordError(f"{at} has a 'role' that is not a string", at)
        role = ROLE_ALIASES.get(role, role)
        if role not in VALID_ROLES:
            raise RecordError(
                f"{at} has an unknown role {m['role']!r}; expected one of system, user, assistant, tool", at
            )
        if role == "user" and _results_in(m.get("content")):  # Anthropic: tool results come back in a user message
            rest = [p for p in m["content"] if not (isinstance(p, dict) and p.get("type") == _TOOL_RESULT)]
            for k, (use_id, result) in enumerate(_tool_results(m["content"], at, i)):
                call_id = _pair_result(out, pending, use_id, result)
                out.append(
                    Message("tool", result, "", i if k == 0 and not rest else f"{i}:result{k}", tool_call_id=call_id)
                )
            if not rest:
                continue
            m = {**m, "content": rest}  # what the user wrote beside the results is a message of its own
        text, reasoning, part_calls = _flatten_content(m.get("content"), at, i)
        calls = _tool_calls(m.get("tool_calls"), at, i) + part_calls
        if isinstance(m.get("function_call"), dict):
            calls += _tool_calls([{"function": m["function_call"]}], at, i)
        extra_reasoning = m.get("reasoning_content") or m.get("reasoning")
        if isinstance(extra_reasoning, str) and extra_reasoning:
            reasoning.insert(0, extra_reasoning)
        name = m.get("name") if isinstance(m.get("name"), str) and (role != "tool" or tool_names) else None
        for k, r in enumerate(reasoning):
            out.append(
                Message(
                    role="assistant", content=r, kind=REASONING, ref=f"{i}:reasoning" if k == 0 else f"{i}:reasoning{k}"
                )
            )
        call_id = m.get("tool_call_id") if isinstance(m.get("tool_call_id"), str) else None
        if role == "tool":
            call_id = _pair_result(out, pending, call_id, text)
        elif role in ("user", "system"):
            pending.clear()
        if role == "assistant" and reasoning and not text and not calls and isinstance(m.get("content"), list):
            continue  # content of reasoning parts only (a Responses reasoning item): its reasoning is the message
        out.append(
            Message(
                role=role,
                content=text,
                kind="",
                ref=i,
                name=name,
                tool_calls=tuple(c for c, _ in calls),
                tool_call_id=call_id,
            )
        )
        pending.extend((len(out) - 1, k, generated) for k, (_, generated) in enumerate(calls))
    return out


def _results_in(content: Any) -> bool:
    return isinstance(content, list) and any(isinstance(p, dict) and p.get("type") == _TOOL_RESULT for p in content)


def _tool_results(content: list, at: str, message_index: int) -> list[tuple[str | None, str]]:
    """The ``tool_result`` blocks of an Anthropic user message, in order: the call each answers and its text."""
    out = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == _TOOL_RESULT:
            use_id = part.get("tool_use_id")
            text, _, _ = _flatten_content(part.get("content"), f"{at}: a tool_result", message_index)
            out.append((use_id if isinstance(use_id, str) and use_id else None, text))
    return out


def _pair_result(
    out: list[Message], pending: list[tuple[int, int, bool]], call_id: str | None, text: str
) -> str | None:
    def call_at(p: tuple[int, int, bool]) -> ToolCall:
        return out[p[0]].tool_calls[p[1]]

    def rename(p: tuple[int, int, bool], new_id: str) -> None:
        msg = out[p[0]]
        calls = list(msg.tool_calls)
        calls[p[1]] = replace(calls[p[1]], id=new_id)
        out[p[0]] = replace(msg, tool_calls=tuple(calls))

    wanted = [call_id] if call_id else _result_ids(text)
    if not wanted:
        return call_at(pending.pop(0)).id if pending else None
    for cid in wanted:
        match = next((p for p in pending if call_at(p).id == cid), None)
        if match is None:
            match = next((p for p in pending if p[2]), None)
            if match is not None:
                rename(match, cid)
        if match is not None:
            pending.remove(match)
    return wanted[0]


#: Where a record keeps its messages: OpenAI's ``messages``, tau-bench's ``traj``, or a Gemini request's
#: ``contents``.
MESSAGE_KEYS = ("messages", "traj", "contents")


def _key(rec: Any) -> str:
    """The record's messages key: the first of :data:`MESSAGE_KEYS` it has (``messages`` when none)."""
    return next((k for k in MESSAGE_KEYS if isinstance(rec, dict) and k in rec), MESSAGE_KEYS[0])


def _label(rec: Any) -> str:
    return label_of(rec, "id", "name", "task_id") or first_user_text(
        rec.get(_key(rec)) if isinstance(rec, dict) else None
    )


def _conversation(rec: Any, n: int | None, stem: str) -> Conversation:
    key = _key(rec)
    raw = record_field(rec, key, list, f"a '{key}' list", f"'{key}' must be a list")
    # An Anthropic request keeps its system prompt beside the messages (text, or a list of text blocks).
    # A Converse request's are blocks (a cache point among them); a Gemini request's is its systemInstruction.
    blocks = anthropic_shape({"content": rec.get("system")})["content"]
    system, _, _ = _flatten_content(blocks, "'system'", -1) if key == "messages" else ("", [], [])
    if key == "contents":
        system = gemini.system_text(rec.get("systemInstruction", rec.get("system_instruction")))
    meta = {k: v for k, v in rec.items() if k not in (key, "system") and isinstance(v, (str, int, float, bool))}
    # The model the request was sent to (``model``; a Bedrock Converse request's ``modelId``).
    if not source_model(meta) and isinstance(rec.get("modelId"), str):
        meta[SOURCE_MODEL] = rec["modelId"]
    conv_id = conversation_id(rec, n, stem, "id")
    messages = openai_messages(raw)
    if system:
        messages.insert(0, Message("system", system, "", "system"))
    conv = conversation_from_messages(messages, conv_id, meta=meta, name=str(rec.get("name") or conv_id))
    if not conv.turns:
        raise RecordError(
            "has no user or assistant message" if n is None else "the conversation has no user or assistant message",
            key,
        )
    return conv


def _sniff(first: Any, layout: str) -> bool:
    if isinstance(first, dict) and "messages" not in first and any(k in first for k in MESSAGE_KEYS[1:]):
        return isinstance(first[_key(first)], list)
    if is_langchain(first) or is_item(first):
        return True
    return (
        isinstance(first, dict)
        and ("messages" in first or "role" in first or "content" in first)
        and isinstance(first.get("messages", []), list)
    )


def _read(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    first = records.first
    if isinstance(first, dict) and any(k in first for k in MESSAGE_KEYS):
        yield from read_named(records, ctx, _conversation, _label)
        return
    # A bare list of messages (array or JSON Lines) is one conversation.
    messages = []
    for rec in records:
        if rec.error:
            ctx.records = 1
            ctx.report(Problem(None, rec.error.split(" is ")[0], rec.error))
            return
        messages.append(rec.value)
    doc = messages if records.layout != "document" else first
    yield from ctx.each(
        [Record(None, {"messages": doc} if isinstance(doc, list) else doc)],
        lambda rec, _: _conversation(rec, None, ctx.stem),
    )


FORMAT = Format(
    "openai",
    "OpenAI chat messages (JSON, JSON Lines, typed content parts; tau-bench, LangChain "
    "histories, OpenAI Agents SDK sessions, Anthropic, Bedrock Converse and Gemini requests, "
    "Vercel AI SDK UI messages)",
    _sniff,
    _read,
)
