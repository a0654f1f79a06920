"""ShareGPT: ``{conversations: [{from, value}], tools?, system?}`` records.

``human`` is the user, ``gpt`` the assistant, ``function_call`` an assistant tool call (``value``
is JSON ``{name, arguments}`` or a list of them) and ``observation`` its result, which must
follow the call. Hermes function-calling data writes the calls inside the ``gpt`` message instead,
each as ``<tool_call>{"name": …, "arguments": …}</tool_call>``, and the ``tool`` message after it
answers each call in a ``<tool_response>…</tool_response>``: such a message is a tool call step (its
text outside the tags is its content), and each response a result, in the calls' order.

LLaMA-Factory's variants read too: preference data (``chosen`` and ``rejected`` replies to the last
human message) as two answers to it, the rejected one a sibling branch and the chosen one the active
thread's answer; multimodal data (``images``, ``videos``, ``audios``: paths or URLs) as files of the
human messages, the n-th ``<image>`` (``<video>``, ``<audio>``) placeholder taking the n-th file
(files without placeholders go with the first human message).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any, Iterator

from core import limits
from core.io.errors import RecordError
from core.model.conversation import ANSWER, Conversation, FileRef, Message, ToolCall, Turn

from .common import (
    arguments,
    conversation_from_messages,
    conversation_id,
    first_user_text,
    label_of,
    read_named,
    record_field,
)
from .records import ReadContext, Records
from .registry import Format

_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "model": "assistant",
    "system": "system",
    "function_call": "call",
    "tool_call": "call",
    "observation": "result",
    "tool": "result",
    "function_response": "result",
}


_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_TOOL_RESPONSE = re.compile(r"<tool_response>(.*?)</tool_response>", re.S)


def _calls(value: str, at: str, k: int) -> tuple[ToolCall, ...]:
    try:
        data = json.loads(value)
    except ValueError:
        raise RecordError(f'{at}: a \'function_call\' value must be JSON {{"name": …, "arguments": …}}', at) from None
    return _named_calls(data if isinstance(data, list) else [data], at, k)


def _tagged_calls(value: str, at: str, k: int) -> tuple[tuple[ToolCall, ...], str]:
    """A Hermes-style message's ``<tool_call>`` calls and its text outside them (none: ``()``, the value)."""
    blocks = _TOOL_CALL.findall(value)
    if not blocks:
        return (), value
    items = []
    for block in blocks:
        try:
            items.append(json.loads(block))
        except ValueError:
            raise RecordError(f'{at}: a <tool_call> must hold JSON {{"name": …, "arguments": …}}', at) from None
    return _named_calls(items, at, k), _TOOL_CALL.sub("", value).strip()


def _named_calls(items: list, at: str, k: int) -> tuple[ToolCall, ...]:
    calls = []
    for j, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise RecordError(f"{at}: a 'function_call' needs a 'name'", at)
        calls.append(
            ToolCall(
                id=f"call_{k}" if len(items) == 1 else f"call_{k}_{j}",
                name=item["name"],
                arguments=arguments(item.get("arguments", {})),
            )
        )
    if not calls:
        raise RecordError(f"{at}: the 'function_call' names no function", at)
    return tuple(calls)


def _conversation(rec: Any, n: int | None, stem: str) -> Conversation:
    raw = record_field(
        rec, "conversations", list, "a 'conversations' list", "'conversations' must be a list of {from, value} messages"
    )
    if not raw:
        raise RecordError("'conversations' is empty", "conversations")
    meta: dict = {}
    tools = rec.get("tools")
    if tools not in (None, ""):
        if isinstance(tools, str):
            try:
                parsed = json.loads(tools)
            except json.JSONDecodeError as e:
                raise RecordError(f"'tools' is not valid JSON ({e.msg}, column {e.colno})", "tools") from None
            except ValueError:
                raise RecordError(f"'tools' {limits.NUMBER_TOO_LONG}", "tools") from None
        else:
            parsed = tools
        if not isinstance(parsed, list):
            raise RecordError("'tools' must be a list of tool definitions (or a JSON string of one)", "tools")
        meta["tools"] = tools
    system = rec.get("system")
    if system is not None and not isinstance(system, str):
        raise RecordError("'system' must be a string", "system")
    messages: list[Message] = [Message("system", system, "", "system")] if system else []
    pending: list[ToolCall] = []
    previous = None
    for k, m in enumerate(raw):
        at = f"message {k}"
        if not isinstance(m, dict):
            raise RecordError(f"{at} is not an object", at)
        tag, value = m.get("from"), m.get("value")
        if not isinstance(tag, str):
            raise RecordError(f"{at} has no 'from'", at)
        if not isinstance(value, str):
            raise RecordError(f"{at} has no 'value' string", at)
        role = _ROLES.get(tag.lower())
        if role is None:
            raise RecordError(
                f"{at} has an unknown 'from' {tag!r}; expected human, gpt, function_call, observation or system", at
            )
        tagged, text = _tagged_calls(value, at, k) if role == "assistant" else ((), value)
        if role == "call" or tagged:
            pending = list(tagged or _calls(value, at, k))
            messages.append(Message("assistant", text if tagged else "", "", k, tool_calls=tuple(pending)))
            role = "call"
        elif role == "result":
            if previous not in ("call", "result") or not pending:
                raise RecordError(
                    f"{at}: {tag!r} must follow a 'function_call' (or a message with <tool_call> tags)", at
                )
            responses = _TOOL_RESPONSE.findall(value)
            if len(responses) > len(pending):
                raise RecordError(
                    f"{at}: {len(responses)} <tool_response> blocks answer {len(pending)} outstanding tool call(s)", at
                )
            for j, response in enumerate(responses or [value]):
                messages.append(
                    Message(
                        "tool",
                        response.strip() if responses else response,
                        "",
                        k if j == 0 else f"{k}:response{j}",
                        tool_call_id=pending.pop(0).id,
                    )
                )
        else:
            pending = []
            messages.append(Message(role, value, "", k))
        previous = role
    messages = _with_media(rec, messages)
    preferred = _preference(rec, previous)
    if preferred:
        messages.append(Message("assistant", preferred[0], "", "chosen"))
    conv_id = conversation_id(rec, n, stem, "id")
    meta.update(
        {
            key: v
            for key, v in rec.items()
            if key not in ("conversations", "tools", "system") and isinstance(v, (str, int, float, bool))
        }
    )
    conv = conversation_from_messages(
        messages, conv_id, source_format="sharegpt", meta=meta, name=str(rec.get("name") or conv_id)
    )
    if not conv.turns:
        raise RecordError("the conversation has no human or gpt message", "conversations")
    if preferred:  # the rejected reply: a sibling answer to the same message, before the chosen one
        chosen = conv.turns[-1]
        query = chosen.messages[chosen.query_index]
        conv.turns.insert(
            len(conv.turns) - 1,
            Turn(
                id=f"{chosen.id}:rejected",
                parent_id=chosen.parent_id,
                query_index=0,
                answer_index=1,
                messages=(
                    replace(query, ref=f"{query.ref}:rejected"),
                    Message("assistant", preferred[1], ANSWER, "rejected"),
                ),
            ),
        )
    return conv


#: LLaMA-Factory's multimodal columns: each file kind, and the placeholder that marks where it goes.
_MEDIA = (("images", "image", "<image>"), ("videos", "video", "<video>"), ("audios", "audio", "<audio>"))


def _with_media(rec: dict, messages: list[Message]) -> list[Message]:
    """The human messages with the files of the record's ``images``, ``videos`` and ``audios``."""
    files: dict[int, list[FileRef]] = {}
    users = [k for k, m in enumerate(messages) if m.role == "user"]
    for column, kind, placeholder in _MEDIA:
        paths = rec.get(column)
        if paths in (None, []):
            continue
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise RecordError(f"'{column}' must be a list of paths or URLs", column)
        if not users:
            raise RecordError(f"'{column}' has files but there is no human message to attach them to", column)
        slots = [k for k in users for _ in range(messages[k].content.count(placeholder))]
        for j, path in enumerate(paths):
            files.setdefault(slots[j] if j < len(slots) else users[0], []).append(
                FileRef(type=kind, url=path, name=path.rsplit("/", 1)[-1])
            )
    return [replace(m, files=m.files + tuple(files[k])) if k in files else m for k, m in enumerate(messages)]


def _preference(rec: dict, last_role: str | None) -> tuple[str, str] | None:
    """The ``chosen`` and ``rejected`` replies of a preference record, or None when it has neither."""
    if "chosen" not in rec and "rejected" not in rec:
        return None
    texts = []
    for key in ("chosen", "rejected"):
        reply = rec.get(key)
        if not (
            isinstance(reply, dict)
            and isinstance(reply.get("value"), str)
            and _ROLES.get(str(reply.get("from")).lower()) == "assistant"
        ):
            raise RecordError(f"'{key}' must be a gpt reply {{from, value}}, as in a preference record", key)
        texts.append(reply["value"])
    if last_role != "user":
        raise RecordError(
            "'chosen' and 'rejected' answer the last human message: 'conversations' must end with one", "conversations"
        )
    return texts[0], texts[1]


def _label(rec: Any) -> str:
    return label_of(rec, "id") or first_user_text(
        rec.get("conversations") if isinstance(rec, dict) else None, "from", ("human", "user"), "value"
    )


def _sniff(first: Any, layout: str) -> bool:
    return isinstance(first, dict) and isinstance(first.get("conversations"), list)


def _read(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    yield from read_named(records, ctx, _conversation, _label)


FORMAT = Format(
    "sharegpt",
    "ShareGPT conversations (human / gpt / function_call / observation; Hermes tool tags; "
    "LLaMA-Factory preference and multimodal records)",
    _sniff,
    _read,
)
