"""Amazon Bedrock's Converse API messages — ``{role, content: [blocks]}`` where a block is one key:
``text``, ``toolUse``, ``toolResult``, ``reasoningContent``, ``image``, ``document``, ``video`` — read as
the Anthropic blocks they stand for, which :mod:`.openai` reads: a ``toolUse`` is the assistant's tool
call (``toolUseId`` its id, ``input`` its arguments), a ``toolResult`` in a user message that call's
result (its ``text`` and ``json`` parts its text), ``reasoningContent`` reasoning; an image, document
or video is named by its kind, a cache point left out. A request's ``system`` blocks are its system
prompt, as an Anthropic request's are."""

from __future__ import annotations

import json
from typing import Any

#: The blocks that hold something other than text, each named by its one key.
_BLOCKS = {
    "toolUse",
    "toolResult",
    "reasoningContent",
    "image",
    "document",
    "video",
    "cachePoint",
    "guardContent",
    "citationsContent",
}


def is_block(part: Any) -> bool:
    """Whether a content part is a Converse block other than plain text (a one-key object, no ``type``)."""
    return isinstance(part, dict) and "type" not in part and len(part) == 1 and next(iter(part)) in _BLOCKS


def anthropic_shape(message: Any) -> Any:
    """A Converse message with its blocks as Anthropic's; anything else as it is."""
    if (
        not isinstance(message, dict)
        or not isinstance(message.get("content"), list)
        or not any(is_block(p) for p in message["content"])
    ):
        return message
    blocks = [_block(p) if is_block(p) else p for p in message["content"]]
    return {**message, "content": [b for b in blocks if b is not None]}


def _block(part: dict) -> dict | None:
    ((key, value),) = part.items()
    value = value if isinstance(value, dict) else {}
    if key == "toolUse":
        return {
            "type": "tool_use",
            "id": value.get("toolUseId"),
            "name": value.get("name"),
            "input": value.get("input", {}),
        }
    if key == "toolResult":
        parts = value.get("content") if isinstance(value.get("content"), list) else []
        return {
            "type": "tool_result",
            "tool_use_id": value.get("toolUseId"),
            "content": [_result_part(p) for p in parts if isinstance(p, dict)],
        }
    if key == "reasoningContent":
        text = value.get("reasoningText")
        if isinstance(text, dict) and isinstance(text.get("text"), str):
            return {"type": "thinking", "thinking": text["text"]}
        return {"type": "redacted_thinking", "thinking": ""}
    if key == "guardContent":
        text = value.get("text")
        return {"type": "text", "text": text.get("text") if isinstance(text, dict) else ""}
    if key == "citationsContent":
        parts = value.get("content") if isinstance(value.get("content"), list) else []
        return {
            "type": "text",
            "text": "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)),
        }
    if key == "cachePoint":
        return None  # a caching marker: nothing the model reads
    return {"type": key}  # an image, document or video: named by its kind


def _result_part(part: dict) -> dict:
    if isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if "json" in part:
        return {"type": "text", "text": json.dumps(part["json"], ensure_ascii=False)}
    return _block(part) if is_block(part) else {"type": next(iter(part), "part")}
