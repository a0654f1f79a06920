"""OpenAI request files: the Batch API's lines (``{custom_id, method, url, body}``, a ``response`` beside them
once the batch ran — ``{status_code, body}`` — or an ``error``), a chat completion request body each. Each
line is one model call (:mod:`.calls`): its ``body.messages`` the prompt as sent, the response's first choice
its reply; the file's calls are threaded into the conversations they form. A ``user`` names the user and a
conversation id in ``metadata`` pins the call, its ``memlens_node`` names the call's node (as the capture
proxy reads them); lines that are no chat
request (embeddings, other endpoints) are left out with a note."""

from __future__ import annotations

from typing import Any, Iterator

from core.capture.calls import NODE_KEY, Call
from core.capture.threader import node_name
from core.io.errors import RecordError
from core.model.conversation import SOURCE_MODEL, Conversation

from .calls import call_conversation, prompt_messages, read_calls, reply_message
from .common import label_of
from .records import ReadContext, Records
from .registry import Format

CHAT_URL = "/v1/chat/completions"
#: ``metadata`` keys that name a conversation (the proxy's own list, core.proxy.exchange.PIN_KEYS).
_PIN_KEYS = ("memlens_conversation", "conversation_id", "thread_id", "session_id", "chat_id")


def _is_line(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and "custom_id" in value
        and (isinstance(value.get("body"), dict) or isinstance(value.get("response"), dict))
    )


def _conversation(line: Any, n: int | None, stem: str) -> Call:
    if not isinstance(line, dict):
        raise RecordError("is not a batch line (an object with 'custom_id' and 'body')", "")
    at = f"line {label_of(line, 'custom_id')!r}" if label_of(line, "custom_id") else "the line"
    body = line.get("body")
    if not isinstance(body, dict):
        raise RecordError(f"{at} has no request 'body' (an output line alone holds no prompt)", "body")
    prompt = prompt_messages(body.get("messages"), at, "body.messages")
    response = line.get("response") if isinstance(line.get("response"), dict) else {}
    answer = response.get("body") if isinstance(response.get("body"), dict) else None
    error = line.get("error")
    metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    pin = next((f"{k}:{metadata[k]}" for k in _PIN_KEYS if isinstance(metadata.get(k), (str, int))), None) or (
        f"user:{body['user']}" if isinstance(body.get("user"), str) and body["user"] else None
    )
    meta = {
        "custom_id": str(line.get("custom_id")),
        SOURCE_MODEL: body.get("model"),
        "error": (error.get("message") if isinstance(error, dict) else error) if error else None,
    }
    name = str(line.get("custom_id") or (stem if n is None else f"{stem}#{n}"))
    return call_conversation(
        prompt,
        reply_message(answer) if answer else None,
        name,
        name=name,
        meta=meta,
        source_format="openai-requests",
        pin=pin,
        node_name=node_name(metadata.get(NODE_KEY)),
    )


def _other_kind(line: Any) -> str | None:
    """A line that is no chat completion request: its endpoint."""
    if isinstance(line, dict) and isinstance(line.get("url"), str) and line["url"] != CHAT_URL:
        return line["url"]
    return None


def _read(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    yield from read_calls(
        ctx,
        records,
        lambda line, _, n: _conversation(line, n, ctx.stem),
        lambda line: label_of(line, "custom_id"),
        other_kind=_other_kind,
        left_out="left out the lines that are not chat completion requests ({left})",
        none="{name} holds no chat completion request, only {left} lines",
        field="url",
    )


def _sniff(first: Any, layout: str) -> bool:
    return _is_line(first)


FORMAT = Format(
    "openai-requests",
    "OpenAI request files (Batch API lines: each chat completion request and its "
    "response, threaded into conversations)",
    _sniff,
    _read,
)
