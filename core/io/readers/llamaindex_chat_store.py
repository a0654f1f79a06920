"""LlamaIndex's ``SimpleChatStore``, as ``persist()`` writes it: ``{"store": {key: [message, …]},
"class_name": "SimpleChatStore"}`` — every key (a ``ChatMemoryBuffer``'s ``chat_store_key``, a user or
session id) one conversation, its messages oldest first.

A message is a ``ChatMessage``'s JSON: ``{role, additional_kwargs, blocks}`` with ``text``, ``tool_call``
(``tool_call_id``, ``tool_name``, ``tool_kwargs``), ``thinking``, ``image`` … blocks, or the older
``{role, content, additional_kwargs}``, whose tool calls are OpenAI's in ``additional_kwargs.tool_calls``.
A tool result names its call in ``additional_kwargs.tool_call_id``. Roles are LlamaIndex's: ``developer``
is a system message, ``function`` a tool result, ``chatbot`` and ``model`` the assistant. A reply of tool
calls only has no text (LlamaIndex's ``content`` is ``None``, which its ``ChatMemoryBuffer`` counts as
the word "None"); it reads as an assistant message with empty text and its calls.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from core.io.errors import RecordError
from core.model.conversation import Conversation

from .common import conversation_from_messages, excerpt
from .openai import openai_messages
from .records import Problem, ReadContext, Records
from .registry import Format

NAME = "llamaindex-chat-store"
CLASS_NAME = "SimpleChatStore"
ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "chatbot": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
}


def _parts(blocks: Any, at: str) -> tuple[list[dict], list[dict]]:
    """A message's blocks as OpenAI content parts and tool calls."""
    if not isinstance(blocks, list):
        raise RecordError(f"{at}: 'blocks' must be a list of blocks", at)
    parts: list[dict] = []
    calls: list[dict] = []
    for k, block in enumerate(blocks):
        kind = block.get("block_type") if isinstance(block, dict) else None
        if not isinstance(kind, str):
            raise RecordError(f"{at}: block {k} has no 'block_type'", at)
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise RecordError(f"{at}: text block {k} has no 'text'", at)
            parts.append({"type": "text", "text": block["text"]})
        elif kind == "tool_call":
            if not isinstance(block.get("tool_name"), str) or not block["tool_name"]:
                raise RecordError(f"{at}: tool_call block {k} has no 'tool_name'", at)
            args = block.get("tool_kwargs", {})
            call = {
                "type": "function",
                "function": {
                    "name": block["tool_name"],
                    "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
                },
            }
            if block.get("tool_call_id"):
                call["id"] = str(block["tool_call_id"])
            calls.append(call)
        elif kind == "thinking":
            parts.append({"type": "thinking", "thinking": str(block.get("content") or "")})
        elif kind in ("image", "audio", "video", "document"):
            parts.append({"type": "text", "text": f"[{kind}]"})
        # other blocks (a cache point, a citation) carry no text of their own
    return parts, calls


def chat_message(value: Any, at: str) -> dict:
    """A stored ``ChatMessage`` as the OpenAI message it stands for; a bad one raises :class:`RecordError`."""
    if not isinstance(value, dict):
        raise RecordError(f"{at} is not an object", at)
    role = ROLES.get(value.get("role")) if isinstance(value.get("role"), str) else None
    if role is None:
        raise RecordError(
            f"{at} has role {excerpt(str(value.get('role')), 30)!r}; expected one of {', '.join(ROLES)}", at
        )
    extra = value.get("additional_kwargs") if isinstance(value.get("additional_kwargs"), dict) else {}
    out: dict = {"role": role}
    if "blocks" in value:
        out["content"], calls = _parts(value["blocks"], at)
    else:
        content = value.get("content")
        if content is not None and not isinstance(content, str):
            raise RecordError(f"{at}: 'content' must be text", at)
        out["content"], calls = content or "", []
    calls = calls or (extra.get("tool_calls") if isinstance(extra.get("tool_calls"), list) else [])
    if calls:
        out["tool_calls"] = calls
    if role == "tool" and extra.get("tool_call_id") is not None:
        out["tool_call_id"] = str(extra["tool_call_id"])
    return out


def _conversation(key: str, listed: Any) -> Conversation:
    if not isinstance(listed, list):
        raise RecordError(f"key {excerpt(key, 60)!r} holds no list of messages", "store")
    raw = [chat_message(m, f"message {i}") for i, m in enumerate(listed)]
    conv = conversation_from_messages(openai_messages(raw), key, source_format=NAME, meta={"chat_store_key": key})
    if not conv.turns:
        raise RecordError(f"key {excerpt(key, 60)!r} holds no user or assistant message", "store")
    return conv


def _read(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    document = records.first
    if records.layout != "document" or not isinstance(document.get("store"), dict):
        ctx.records = 1
        ctx.report(
            Problem(
                None,
                "store",
                f"{ctx.name} is not a persisted SimpleChatStore; expected one JSON object "
                '{"store": {key: [messages]}, "class_name": "SimpleChatStore"}',
            )
        )
        return
    keys = list(document["store"].items())
    yield from ctx.each(
        records.inner(keys), lambda pair, _n: _conversation(str(pair[0]), pair[1]), lambda pair: str(pair[0])
    )


def _sniff(first: Any, layout: str) -> bool:
    return (
        layout == "document"
        and isinstance(first, dict)
        and isinstance(first.get("store"), dict)
        and first.get("class_name", CLASS_NAME) == CLASS_NAME
        and all(isinstance(v, list) for v in first["store"].values())
    )


FORMAT = Format(
    NAME, "LlamaIndex SimpleChatStore (persist(): {store: {key: [messages]}}, one conversation per key)", _sniff, _read
)
