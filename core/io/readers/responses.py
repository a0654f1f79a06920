"""OpenAI Responses API items — what an OpenAI Agents SDK session stores, one item per row — read as
the OpenAI chat messages they stand for, one message per item (a session's ``limit`` counts items).

* a message item (``role`` and ``content``, with or without ``type: "message"``) is that message;
* ``function_call`` and ``custom_tool_call`` are an assistant step calling one tool (its ``call_id`` the
  call's id; a custom tool's ``input`` its arguments);
* ``function_call_output`` and ``custom_tool_call_output`` are that call's result (``output`` as text;
  a list of parts, their text);
* ``reasoning`` is a reasoning message of its summary texts (the model's own reasoning is encrypted);
* any other tool's call (a hosted ``web_search_call``, ``file_search_call``, ``code_interpreter_call``,
  or ``computer_call``, ``local_shell_call``, …) is a step calling that tool, the rest of the item (its
  action, and what a hosted tool found, which comes back in the item) its arguments; a
  ``*_call_output`` item is that call's result.
"""

from __future__ import annotations

import json
from typing import Any

#: Item types of calls to a tool the caller runs, and of their results.
_CALLS = {"function_call": "arguments", "custom_tool_call": "input"}
_OUTPUTS = ("function_call_output", "custom_tool_call_output")
#: Keys of an item that only identify it: not part of another tool's call.
_BOOKKEEPING = ("type", "id", "status", "call_id")


def is_item(value: Any) -> bool:
    """Whether ``value`` is a Responses item that is not a plain ``{role, content}`` message."""
    return (
        isinstance(value, dict)
        and "role" not in value
        and isinstance(value.get("type"), str)
        and (
            value["type"] in _CALLS
            or value["type"] in _OUTPUTS
            or value["type"] == "reasoning"
            or value["type"].endswith(("_call", "_call_output"))
        )
    )


def chat_shape(value: Any) -> Any:
    """A Responses item as the chat message it stands for; anything else as it is."""
    if isinstance(value, dict) and value.get("type") == "message" and "role" in value:
        return {k: v for k, v in value.items() if k in ("role", "content", "name")}
    if not is_item(value):
        return value
    kind = value["type"]
    call_id = value.get("call_id") or value.get("id")
    if kind in _CALLS:
        args = value.get(_CALLS[kind])
        return {"role": "assistant", "content": None, "tool_calls": [_call(call_id, value.get("name"), args)]}
    if kind in _OUTPUTS or kind.endswith("_call_output"):
        return {"role": "tool", "tool_call_id": call_id, "content": _text(value.get("output"))}
    if kind == "reasoning":
        summary = value.get("summary") if isinstance(value.get("summary"), list) else []
        texts = [s.get("text") for s in summary if isinstance(s, dict) and isinstance(s.get("text"), str)]
        return {"role": "assistant", "content": [{"type": "reasoning", "text": "\n\n".join(texts)}]}
    # Any other tool's call: the item is the step, the rest of it the arguments.
    action = {k: v for k, v in value.items() if k not in _BOOKKEEPING}
    return {"role": "assistant", "content": None, "tool_calls": [_call(call_id, kind.removesuffix("_call"), action)]}


def _call(call_id: Any, name: Any, args: Any) -> dict:
    out = {
        "type": "function",
        "function": {
            "name": name,
            "arguments": args
            if isinstance(args, str)
            else json.dumps(args if args is not None else {}, ensure_ascii=False),
        },
    }
    if call_id is not None:
        out["id"] = str(call_id)
    return out


def _text(output: Any) -> Any:
    """A result's ``output``: text as it is, a list of parts as their texts, anything else as JSON."""
    if output is None or isinstance(output, str):
        return output or ""
    if isinstance(output, list):
        return [p if isinstance(p, dict) else str(p) for p in output]  # typed parts, read like a message's
    return json.dumps(output, ensure_ascii=False)
