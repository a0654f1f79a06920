"""LangChain's stored messages, read as the OpenAI messages they stand for.

LangChain keeps a chat history in one of two shapes: ``messages_to_dict`` (``{"type": "human", "data":
{content, name, tool_calls, tool_call_id, additional_kwargs, …}}``: what ``FileChatMessageHistory``
writes and the Redis, SQL and Postgres histories store) and ``dumpd`` (``{"lc": 1, "type":
"constructor", "id": [..., "HumanMessage"], "kwargs": {…}}``: LangGraph checkpoints, LangSmith). Either
becomes ``{role, content, name?, tool_calls?, tool_call_id?}``: ``human`` is the
user, ``ai`` the assistant (its ``tool_calls`` ``{name, args, id}`` become OpenAI calls, else those in
``additional_kwargs``), ``tool`` and the older ``function`` a tool result, ``chat`` its own ``role``.
"""

from __future__ import annotations

import json
from typing import Any

#: A stored message's ``type`` (a chunk's too: ``AIMessageChunk``) and the role it has.
ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool"}
_CHUNKS = {
    "HumanMessageChunk": "human",
    "AIMessageChunk": "ai",
    "SystemMessageChunk": "system",
    "ToolMessageChunk": "tool",
    "FunctionMessageChunk": "function",
    "ChatMessageChunk": "chat",
}
#: The class a ``dumpd`` message is built from, and its ``type``.
_CLASSES = {
    "HumanMessage": "human",
    "AIMessage": "ai",
    "SystemMessage": "system",
    "ToolMessage": "tool",
    "FunctionMessage": "function",
    "ChatMessage": "chat",
    **_CHUNKS,
}


def _fields(value: Any) -> tuple[str, dict] | None:
    """A stored message's type and fields, or None when ``value`` is not one."""
    if not isinstance(value, dict):
        return None
    if value.get("lc") == 1 and value.get("type") == "constructor":
        ident, kwargs = value.get("id"), value.get("kwargs")
        if (
            isinstance(ident, list)
            and ident
            and isinstance(ident[-1], str)
            and ident[-1] in _CLASSES
            and isinstance(kwargs, dict)
        ):
            return _CLASSES[ident[-1]], kwargs
        return None
    kind, data = value.get("type"), value.get("data")
    if isinstance(kind, str) and isinstance(data, dict) and "content" in data and "role" not in value:
        kind = _CHUNKS.get(kind, kind)
        if kind in ROLES or kind == "chat":
            return kind, data
    return None


def unflattened(value: Any) -> Any:
    """A message written flat, its fields beside its ``type`` (``{"type": "human", "content": "hi", …}``: a
    message's ``model_dump()``, as LangGraph's API writes a thread's state, or what n8n's Postgres history
    stores), as LangChain's ``{"type", "data"}``; anything else as it is."""
    if (
        isinstance(value, dict)
        and "data" not in value
        and "role" not in value
        and "content" in value
        and (value.get("type") in ROLES or value.get("type") in _CHUNKS)
    ):
        return {"type": value["type"], "data": {k: v for k, v in value.items() if k != "type"}}
    return value


def is_langchain(value: Any) -> bool:
    """Whether ``value`` is a message LangChain stored (either shape)."""
    return _fields(value) is not None


def openai_shape(value: Any) -> Any:
    """A LangChain message as the OpenAI message it stands for; anything else as it is."""
    found = _fields(value)
    if found is None:
        return value
    kind, data = found
    role = data.get("role") if kind == "chat" else ROLES[kind]
    out: dict = {"role": role, "content": data.get("content")}
    if isinstance(data.get("name"), str) and data["name"]:
        out["name"] = data["name"]
    extra = data.get("additional_kwargs") if isinstance(data.get("additional_kwargs"), dict) else {}
    calls = data.get("tool_calls")
    if isinstance(calls, list) and calls:
        out["tool_calls"] = [_openai_call(c) for c in calls]
    elif extra.get("tool_calls"):
        out["tool_calls"] = extra["tool_calls"]
    if isinstance(extra.get("function_call"), dict):
        out["function_call"] = extra["function_call"]
    if kind == "tool" and data.get("tool_call_id") is not None:
        out["tool_call_id"] = str(data["tool_call_id"])
    return out  # a reasoning text kept in ``additional_kwargs`` is not sent again, so it is not read


def _openai_call(call: Any) -> Any:
    """A LangChain tool call ``{name, args, id}`` as an OpenAI one; anything else as it is (the reader
    says what is wrong with it)."""
    if not isinstance(call, dict) or "args" not in call:
        return call
    args = call["args"]
    out = {
        "type": "function",
        "function": {
            "name": call.get("name"),
            "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
        },
    }
    if call.get("id") is not None:
        out["id"] = str(call["id"])
    return out
