"""One model call as the proxy saw it (:class:`Exchange`: the request as sent, the response as received),
and the :class:`~core.capture.calls.Call` it stands for.

Three APIs are read, each in its own shape:

* ``chat`` — OpenAI's ``POST /v1/chat/completions``: ``messages``, ``tools``; the reply is the first
  choice's message, or, streamed, the chunks' deltas put together (text, tool calls by index, usage
  from the last chunk);
* ``responses`` — OpenAI's ``POST /v1/responses``: ``instructions`` is the system prompt, ``input``
  the messages (a text, or items); the reply is the ``output`` items (streamed: the
  ``response.completed`` event's response);
* ``messages`` — Anthropic's ``POST /v1/messages``: ``system`` and ``messages`` with content blocks;
  the reply is the content blocks (streamed: the ``content_block_*`` events put together).

Messages are read by the importer's own readers (:func:`core.io.readers.openai.openai_messages`), so a
captured payload and an imported file speak one shape. A conversation is pinned by the
``X-MemLens-Conversation`` header or a conversation id in the request's ``metadata``; a node is named
by the ``X-MemLens-Node`` header or ``metadata.memlens_node``; OpenAI's ``user`` (Anthropic's
``metadata.user_id``) names the user. Both headers go on to the upstream with the others and are
recorded with them (they carry no secret).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from core.capture.calls import FAILED, NODE_KEY, STOPPED, SUCCEEDED, Call
from core.capture.errors import CaptureError
from core.capture.threader import node_name
from core.io.errors import RecordError
from core.io.readers.openai import openai_messages
from core.limits import CAPTURE_NAME_CHARS
from core.model.conversation import Message

CHAT, RESPONSES, MESSAGES = "chat", "responses", "messages"
#: The endpoints the proxy records, by path, and the API each speaks.
ENDPOINTS = {"/v1/chat/completions": CHAT, "/v1/responses": RESPONSES, "/v1/messages": MESSAGES}
#: The header that names a conversation outright.
PIN_HEADER = "x-memlens-conversation"
#: ``metadata`` keys that name a conversation, in the order they are read.
PIN_KEYS = ("memlens_conversation", "conversation_id", "thread_id", "session_id", "chat_id")
#: The header that names the node a call is of (``metadata.memlens_node`` too: :data:`~core.capture.calls.NODE_KEY`).
NODE_HEADER = "x-memlens-node"

#: How a call ended, as the proxy saw it.
OK, UPSTREAM_ERROR, UPSTREAM_TIMEOUT, UPSTREAM_REFUSED, CLIENT_LEFT = (
    "ok",
    "upstream_error",
    "upstream_timeout",
    "upstream_refused",
    "client_disconnected",
)


@dataclass
class Exchange:
    """What the proxy saw of one call. ``response`` is every byte received (a stream's chunks joined);
    ``status`` the upstream's HTTP status (``None`` when it never answered); headers are the non-secret
    ones (:func:`core.proxy.server.public_headers`). Times: ``started_at`` in seconds since the epoch,
    ``latency_ms`` to the last byte, ``first_byte_ms`` to the first."""

    id: str
    api: str
    request: bytes
    started_at: float
    status: int | None = None
    response: bytes = b""
    streamed: bool = False
    latency_ms: float | None = None
    first_byte_ms: float | None = None
    request_headers: dict = field(default_factory=dict)
    response_headers: dict = field(default_factory=dict)
    outcome: str = OK
    error: str | None = None
    upstream: str = ""


def request_json(body: bytes) -> dict:
    """A request body as JSON, or :class:`CaptureError` saying why it is no call MemLens can read."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise CaptureError("the request body is not JSON: forwarded, not recorded") from None
    if not isinstance(data, dict):
        raise CaptureError("the request body is not a JSON object: forwarded, not recorded")
    return data


def request_messages(api: str, body: dict) -> tuple[list[Message], tuple[str, ...]]:
    """The messages a request sends (system ones first) and the names of the tools it offers."""
    try:
        if api == RESPONSES:
            raw = body.get("input")
            items = [{"role": "user", "content": raw}] if isinstance(raw, str) else list(raw or [])
            messages = openai_messages(items)
            system = body.get("instructions")
            if isinstance(system, str) and system:
                messages.insert(0, Message("system", system, "", "instructions"))
        elif api == MESSAGES:
            messages = openai_messages(list(body.get("messages") or []))
            system = _anthropic_system(body.get("system"))
            if system:
                messages.insert(0, Message("system", system, "", "system"))
        else:
            messages = _plain_messages(body.get("messages")) or openai_messages(list(body.get("messages") or []))
    except RecordError as e:
        raise CaptureError(f"the request's messages cannot be read ({e}): forwarded, not recorded") from None
    return messages, _tool_names(body.get("tools")) + _tool_names(body.get("functions"))


_PLAIN_ROLES = frozenset({"system", "user", "assistant"})
_PLAIN_KEYS = frozenset({"role", "content", "name"})


def _plain_messages(raw: Any) -> list[Message] | None:
    """A chat payload whose every message is a role and a text (and perhaps a name), read without the
    importer's general reader — the messages it would give, at a fraction of the cost (the common case;
    ``None`` for any other, which the general reader reads)."""
    if not isinstance(raw, list) or not raw:
        return None
    out = []
    for i, m in enumerate(raw):
        if not (
            isinstance(m, dict)
            and m.keys() <= _PLAIN_KEYS
            and m.get("role") in _PLAIN_ROLES
            and isinstance(m.get("content"), str)
            and isinstance(m.get("name", ""), str)
        ):
            return None
        out.append(Message(m["role"], m["content"], "", i, name=m.get("name") or None))
    return out


def _anthropic_system(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(b.get("text", "") for b in value if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _tool_names(tools: Any) -> tuple[str, ...]:
    names = []
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict):
            continue
        fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        name = fn.get("name") or tool.get("type")
        if isinstance(name, str) and name:
            names.append(name)
    return tuple(names)


# -- responses, plain and streamed ----------------------------------------------------------------------


def sse_events(body: bytes) -> list[tuple[str, Any]]:
    """A server-sent event stream as ``(event, data)`` pairs, each data read as JSON when it is
    (``[DONE]`` and other text stay text)."""
    out: list[tuple[str, Any]] = []
    text = body.decode("utf-8", "replace").replace("\r\n", "\n")
    for block in text.split("\n\n"):
        event, data = "", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if not data:
            continue
        joined = "\n".join(data)
        try:
            out.append((event, json.loads(joined)))
        except ValueError:
            out.append((event, joined))
    return out


def assembled(api: str, body: bytes, streamed: bool) -> dict | None:
    """The response as one JSON object: as received, or a stream's events put together."""
    if not streamed:
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return None
        return data if isinstance(data, dict) else None
    events = sse_events(body)
    if api == RESPONSES:
        return _responses_stream(events)
    if api == MESSAGES:
        return _anthropic_stream(events)
    return _chat_stream(events)


def _chat_stream(events: list) -> dict:
    text, calls, usage, model, rid, finish = [], {}, None, None, None, None
    for _, data in events:
        if not isinstance(data, dict):
            continue
        model, rid = data.get("model") or model, data.get("id") or rid
        if isinstance(data.get("usage"), dict):
            usage = data["usage"]
        for choice in data.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            finish = choice.get("finish_reason") or finish
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(
                    tc.get("index", len(calls)),
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                slot["id"] = tc.get("id") or slot["id"]
                fn = tc.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
    message: dict = {"role": "assistant", "content": "".join(text)}
    if calls:
        message["tool_calls"] = [calls[k] for k in sorted(calls)]
    return {
        "id": rid,
        "object": "chat.completion",
        "model": model,
        "usage": usage,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }


def _responses_stream(events: list) -> dict | None:
    for event, data in reversed(events):
        if isinstance(data, dict) and data.get("type", event) in (
            "response.completed",
            "response.incomplete",
            "response.failed",
        ):
            return data.get("response")
    # Cut short: the text deltas so far.
    text = "".join(
        d.get("delta", "")
        for _, d in events
        if isinstance(d, dict) and d.get("type") == "response.output_text.delta" and isinstance(d.get("delta"), str)
    )
    return {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]}


def _anthropic_stream(events: list) -> dict:
    message: dict = {"role": "assistant", "content": []}
    usage: dict = {}
    blocks: dict[int, dict] = {}
    partial: dict[int, str] = {}
    for _, data in events:
        if not isinstance(data, dict):
            continue
        kind = data.get("type")
        if kind == "message_start" and isinstance(data.get("message"), dict):
            message.update({k: v for k, v in data["message"].items() if k in ("id", "model")})
            usage.update(data["message"].get("usage") or {})
        elif kind == "content_block_start":
            blocks[data.get("index", len(blocks))] = dict(data.get("content_block") or {})
        elif kind == "content_block_delta":
            block = blocks.setdefault(data.get("index", 0), {"type": "text", "text": ""})
            delta = data.get("delta") or {}
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif delta.get("type") == "input_json_delta":
                partial[data.get("index", 0)] = partial.get(data.get("index", 0), "") + delta.get("partial_json", "")
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
        elif kind == "message_delta":
            usage.update((data.get("usage") or {}))
    for index, text in partial.items():
        try:
            blocks[index]["input"] = json.loads(text) if text else {}
        except (ValueError, KeyError):
            pass
    message["content"] = [blocks[k] for k in sorted(blocks)]
    message["usage"] = usage
    return message


def reply_of(api: str, response: dict | None) -> Message | None:
    """The assistant message a response holds (its text and tool calls), or ``None``."""
    if not isinstance(response, dict):
        return None
    if api == RESPONSES:
        raw = [item for item in response.get("output") or [] if isinstance(item, dict)]
    elif api == MESSAGES:
        raw = [{"role": "assistant", "content": response.get("content") or []}]
    else:
        choices = response.get("choices") or []
        first = choices[0] if choices and isinstance(choices[0], dict) else {}
        raw = [first["message"]] if isinstance(first.get("message"), dict) else []
    try:
        messages = [m for m in openai_messages(raw) if m.role == "assistant"]
    except RecordError:
        return None
    if not messages:
        return None
    text = "\n".join(m.content for m in messages if m.content and m.kind != "reasoning")
    calls = tuple(c for m in messages for c in m.tool_calls)
    return Message("assistant", text, "", "reply", tool_calls=calls)


def usage_of(response: dict | None) -> dict | None:
    """The provider's token usage in OpenAI's words (``prompt_tokens``, ``completion_tokens``, ``total_tokens``)."""
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return None
    prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    completion = usage.get("completion_tokens", usage.get("output_tokens"))
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def error_text(body: bytes) -> str:
    """An upstream error body in one line: its ``error.message`` when it has one."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return " ".join(body[:300].decode("utf-8", "replace").split())
    err = data.get("error") if isinstance(data, dict) else None
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return err["message"][:300]
    if isinstance(err, str):
        return err[:300]
    return " ".join(body[:300].decode("utf-8", "replace").split())


def _redacted(value: Any) -> Any:
    """An upstream's error answer with every key shape taken out (:func:`core.redact.redact`)."""
    from core.redact import redact

    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    cleaned = redact(text)
    if isinstance(value, str):
        return {"text": cleaned}
    try:
        return json.loads(cleaned)
    except ValueError:
        return {"text": cleaned}


def pin_of(body: dict, headers: dict) -> str | None:
    """The conversation a call names outright: the header, else a conversation id in its metadata."""
    pinned = headers.get(PIN_HEADER)
    if isinstance(pinned, str) and pinned.strip():
        return pinned.strip()[:CAPTURE_NAME_CHARS]
    metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    for key in PIN_KEYS:
        value = metadata.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return f"{key}:{value}"[:CAPTURE_NAME_CHARS]
    return None


def node_name_of(body: dict, headers: dict) -> str | None:
    """The node a call names (:data:`NODE_HEADER`, else ``metadata.memlens_node``), in one line, or ``None``."""
    metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    return node_name(headers.get(NODE_HEADER)) or node_name(metadata.get(NODE_KEY))


def user_of(api: str, body: dict) -> str | None:
    user = body.get("user")
    if api == MESSAGES and isinstance(body.get("metadata"), dict):
        user = body["metadata"].get("user_id")
    return str(user)[:200] if isinstance(user, (str, int)) and not isinstance(user, bool) and str(user) else None


def call_of(ex: Exchange) -> Call:
    """The call an exchange stands for (:class:`CaptureError` when its request is no call MemLens reads).
    Its ``record`` holds what the store keeps of it: the request as sent, the response put together, the
    usage, the timings and the headers."""
    body = request_json(ex.request)
    messages, tools = request_messages(ex.api, body)
    response = assembled(ex.api, ex.response, ex.streamed) if ex.status is not None else None
    ok = ex.outcome == OK and ex.status is not None and ex.status < 400
    reply = reply_of(ex.api, response) if ok or ex.outcome == CLIENT_LEFT else None
    if ok:
        status, error = SUCCEEDED, None
    elif ex.outcome == CLIENT_LEFT:
        status, error = STOPPED, ex.error or "the client disconnected before the reply ended"
    else:
        status = FAILED
        error = ex.error or (
            f"upstream answered {ex.status}: {error_text(ex.response)}" if ex.status else "no answer from the upstream"
        )
    model = body.get("model") if isinstance(body.get("model"), str) else ""
    if not ok and ex.status is not None:  # an upstream refusing a key may quote it: kept only redacted
        response = _redacted(response if response is not None else ex.response.decode("utf-8", "replace"))
    record = {
        "api": ex.api,
        "request": body,
        "response": response,
        "usage": usage_of(response),
        "status_code": ex.status,
        "outcome": ex.outcome,
        "streamed": ex.streamed,
        "latency_ms": ex.latency_ms,
        "first_byte_ms": ex.first_byte_ms,
        "request_headers": ex.request_headers,
        "response_headers": ex.response_headers,
        "upstream": ex.upstream,
        "call_id": ex.id,
    }
    return Call(
        id=ex.id,
        messages=tuple(messages),
        reply=reply,
        model=model,
        tools=tools,
        api=ex.api,
        started_at=ex.started_at,
        pin=pin_of(body, ex.request_headers),
        user=user_of(ex.api, body),
        node_name=node_name_of(body, ex.request_headers),
        status=status,
        error=error,
        previous_response=body.get("previous_response_id") if ex.api == RESPONSES else None,
        response_id=response.get("id") if ex.api == RESPONSES and isinstance(response, dict) else None,
        record=record,
    )


__all__ = [
    "CHAT",
    "CLIENT_LEFT",
    "ENDPOINTS",
    "Exchange",
    "MESSAGES",
    "NODE_HEADER",
    "OK",
    "PIN_HEADER",
    "PIN_KEYS",
    "RESPONSES",
    "UPSTREAM_ERROR",
    "UPSTREAM_REFUSED",
    "UPSTREAM_TIMEOUT",
    "assembled",
    "call_of",
    "error_text",
    "node_name_of",
    "pin_of",
    "reply_of",
    "request_json",
    "request_messages",
    "sse_events",
    "usage_of",
    "user_of",
]
