"""Vercel AI SDK UI messages — what ``useChat`` keeps and an app stores, ``{id, role, parts}`` (AI SDK 5;
AI SDK 4 wrote ``content`` beside its parts, or ``toolInvocations`` without them) — read as the OpenAI
messages they stand for, which :mod:`.openai` reads:

* a user or system message is its ``text`` parts (a ``file`` part named by its kind);
* an assistant message is one assistant message per step: its ``reasoning`` parts are reasoning, its
  ``text`` its content, each tool part (``tool-<name>``, ``dynamic-tool``, AI SDK 4's
  ``tool-invocation``) a call with that step, whose ``output`` (or ``errorText``, or 4's ``result``)
  follows as the call's result. A step ends at a ``step-start`` part, or where text comes after the
  step's tool calls (the model answered once their results were in);
* sources, data parts and step markers hold nothing the model is sent.
"""

from __future__ import annotations

import json
from typing import Any

from . import gemini

#: The states of a tool part whose result is in.
_DONE = {"output-available", "output-error", "result"}


def is_ui_message(value: Any) -> bool:
    """Whether ``value`` is a UI message: a role and a list of ``parts`` (or AI SDK 4's tool invocations)."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("role"), str)
        and not isinstance(value.get("content"), list)
        and (isinstance(value.get("parts"), list) or isinstance(value.get("toolInvocations"), list))
    )


def expand(raw: list) -> list:
    """The messages with each UI message (or Gemini content, :mod:`.gemini`) replaced by the OpenAI
    messages it stands for."""
    if not any(is_ui_message(m) or gemini.is_content(m) for m in raw):
        return raw
    out: list = []
    for m in raw:
        if gemini.is_content(m):
            out.extend(gemini.openai_messages(m))
        else:
            out.extend(openai_messages(m) if is_ui_message(m) else [m])
    return out


def openai_messages(message: dict) -> list[dict]:
    parts = _parts(message)
    role = message["role"]
    if role != "assistant":
        return [{"role": role, "content": [p for p in map(_content_part, parts) if p is not None]}]
    out: list[dict] = []
    content: list[dict] = []
    calls: list[tuple[str, str, Any, Any]] = []  # (id, name, input, result or _NONE)

    def close() -> None:
        if content or calls:
            step = {"role": "assistant", "content": list(content)}
            if calls:
                step["tool_calls"] = [
                    {"id": cid, "type": "function", "function": {"name": name, "arguments": _json(args)}}
                    for cid, name, args, _ in calls
                ]
            out.append(step)
            out.extend(
                {"role": "tool", "tool_call_id": cid, "content": _text(result)}
                for cid, _, _, result in calls
                if result is not _NONE
            )
        content.clear()
        calls.clear()

    for part in parts:
        kind = part.get("type")
        if kind == "step-start":
            close()
        elif kind in ("text", "reasoning"):
            if calls:  # text after the step's tool calls: the next step
                close()
            if isinstance(part.get("text"), str):
                content.append({"type": kind, "text": part["text"]})
        elif (call := _tool(part)) is not None:
            calls.append(call)
    close()
    return out or [{"role": "assistant", "content": ""}]


_NONE = object()


def _parts(message: dict) -> list[dict]:
    parts = message.get("parts")
    if isinstance(parts, list):
        return [p for p in parts if isinstance(p, dict)]
    # AI SDK 4 without parts: its tool invocations, then its text.
    out = [
        {"type": "tool-invocation", "toolInvocation": t}
        for t in message.get("toolInvocations") or []
        if isinstance(t, dict)
    ]
    if isinstance(message.get("content"), str) and message["content"]:
        out.append({"type": "text", "text": message["content"]})
    return out


def _content_part(part: dict) -> dict | None:
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "file":
        image = str(part.get("mediaType") or part.get("mimeType") or "").startswith("image/")
        return {"type": "image_url"} if image else {"type": "file"}
    return None


def _tool(part: dict) -> tuple[str, str, Any, Any] | None:
    """(call id, tool name, input, result or _NONE) of a tool part; None for any other part."""
    kind = str(part.get("type") or "")
    if kind == "tool-invocation" and isinstance(part.get("toolInvocation"), dict):
        t = part["toolInvocation"]
        result = t.get("result", _NONE) if t.get("state") in _DONE else _NONE
        return str(t.get("toolCallId") or ""), str(t.get("toolName") or ""), t.get("args"), result
    if kind == "dynamic-tool" or kind.startswith("tool-"):
        name = part.get("toolName") if kind == "dynamic-tool" else kind.removeprefix("tool-")
        state = part.get("state")
        result = _NONE
        if state == "output-available":
            result = part.get("output")
        elif state == "output-error":
            result = part.get("errorText")
        return str(part.get("toolCallId") or ""), str(name or ""), part.get("input"), result
    return None


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value if value is not None else {}, ensure_ascii=False)


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
