"""Google Gemini contents — ``{role: user | model, parts: [...]}``, what a Gemini request's
``contents`` and a chat session's history hold — read as the OpenAI messages they stand for, which
:mod:`.openai` reads: ``text`` parts are the message's text (a ``thought`` part reasoning), a
``functionCall`` the model's tool call (its ``id`` when Gemini gave one) and a ``functionResponse`` —
which Gemini sends back in a user turn — that call's result, so it does not start a turn of its own;
inline and linked data are named by their kind. A request's ``systemInstruction`` is its system prompt.
"""

from __future__ import annotations

import json
from typing import Any

from core.io.errors import RecordError

#: Gemini's roles, as chat roles.
ROLES = {"user": "user", "model": "assistant", "function": "tool", "tool": "tool", "system": "system"}
_PART_KEYS = {
    "text",
    "functionCall",
    "functionResponse",
    "inlineData",
    "fileData",
    "thought",
    "executableCode",
    "codeExecutionResult",
    "thoughtSignature",
    "function_call",
    "function_response",
    "inline_data",
    "file_data",
}


def is_content(value: Any) -> bool:
    """Whether ``value`` is a Gemini content: a Gemini role and parts written without a ``type``."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("role", "user"), str)
        and value.get("role", "user") in ROLES
        and "content" not in value
        and isinstance(value.get("parts"), list)
        and bool(value["parts"])
        and all(isinstance(p, dict) and "type" not in p and set(p) & _PART_KEYS for p in value["parts"])
    )


def openai_messages(content: dict) -> list[dict]:
    role = ROLES[content.get("role", "user")]
    texts: list[dict] = []
    calls: list[dict] = []
    results: list[dict] = []
    for part in content["parts"]:
        call = part.get("functionCall", part.get("function_call"))
        response = part.get("functionResponse", part.get("function_response"))
        data = part.get("inlineData", part.get("inline_data")) or part.get("fileData", part.get("file_data"))
        if isinstance(call, dict):
            out = {"type": "function", "function": {"name": call.get("name"), "arguments": _json(call.get("args"))}}
            if call.get("id"):
                out["id"] = str(call["id"])
            calls.append(out)
        elif isinstance(response, dict):
            result = {"role": "tool", "content": _json(response.get("response"))}
            if response.get("id"):
                result["tool_call_id"] = str(response["id"])
            results.append(result)
        elif isinstance(part.get("text"), str):
            texts.append({"type": "reasoning" if part.get("thought") else "text", "text": part["text"]})
        elif isinstance(data, dict):
            image = str(data.get("mimeType") or data.get("mime_type") or "").startswith("image/")
            texts.append({"type": "image_url"} if image else {"type": "file"})
    out: list[dict] = list(results)
    if texts or calls or not results:
        message: dict = {"role": role if role != "tool" else "user", "content": texts}
        if calls:
            message["tool_calls"] = calls
        out.append(message)
    return out


def system_text(value: Any) -> str:
    """The text of a request's ``systemInstruction`` (a content, or plain text; none: "")."""
    if value is None or isinstance(value, str):
        return value or ""
    parts = value.get("parts") if isinstance(value, dict) else None
    if not isinstance(parts, list):
        raise RecordError("'systemInstruction' must be text or a content with a 'parts' list", "systemInstruction")
    return "\n".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value if value is not None else {}, ensure_ascii=False)
