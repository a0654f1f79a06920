"""The proxy's ``--demo`` upstream: the offline demo model (:mod:`core.llm.demo_model`) answering in each
API's own shape — a chat completion, a Responses API response, an Anthropic message — whole or as the
server-sent events each streams, so every client reads it as it reads the real service, and the proxy
records it by the same code as a real upstream's answer."""

from __future__ import annotations

import json
import time
from typing import Iterator

from core.llm.demo_model import demo_complete

from .exchange import MESSAGES, RESPONSES, request_messages

#: Words per streamed piece of a demo reply.
WORDS_PER_CHUNK = 3
DEMO_MODELS = {
    "object": "list",
    "data": [{"id": "memlens/demo", "object": "model", "created": 0, "owned_by": "memlens"}],
}


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [
        " ".join(words[k : k + WORDS_PER_CHUNK]) + (" " if k + WORDS_PER_CHUNK < len(words) else "")
        for k in range(0, len(words), WORDS_PER_CHUNK)
    ] or [""]


def _sse(data: dict, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def demo_answer(api: str, body: dict, call_id: str) -> tuple[bool, Iterator[bytes]]:
    """``(streamed, chunks)``: the demo model's answer to a request body, in its API's shape."""
    messages, _ = request_messages(api, body)
    reply, usage = demo_complete([m.to_openai() for m in messages])
    model = body.get("model") if isinstance(body.get("model"), str) else "memlens/demo"
    stream = bool(body.get("stream"))
    if api == RESPONSES:
        return stream, _responses(reply, usage, model, body, call_id, stream)
    if api == MESSAGES:
        return stream, _anthropic(reply, usage, model, call_id, stream)
    return stream, _chat(reply, usage, model, body, call_id, stream)


def _chat(reply: str, usage: dict, model: str, body: dict, call_id: str, stream: bool) -> Iterator[bytes]:
    created, cid = int(time.time()), f"chatcmpl-{call_id}"
    if not stream:
        yield json.dumps(
            {
                "id": cid,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply, "refusal": None},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
                "usage": usage,
                "system_fingerprint": None,
            },
            ensure_ascii=False,
        ).encode()
        return
    head = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": None,
    }
    yield _sse(
        {
            **head,
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
            ],
        }
    )
    for piece in _pieces(reply):
        yield _sse(
            {**head, "choices": [{"index": 0, "delta": {"content": piece}, "logprobs": None, "finish_reason": None}]}
        )
    yield _sse({**head, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]})
    options = body.get("stream_options") if isinstance(body.get("stream_options"), dict) else {}
    if options.get("include_usage"):
        yield _sse({**head, "choices": [], "usage": usage})
    yield b"data: [DONE]\n\n"


def _responses(reply: str, usage: dict, model: str, body: dict, call_id: str, stream: bool) -> Iterator[bytes]:
    created = int(time.time())
    rid, mid = f"resp_{call_id}", f"msg_{call_id}"
    words = {
        "input_tokens": usage["prompt_tokens"],
        "output_tokens": usage["completion_tokens"],
        "total_tokens": usage["total_tokens"],
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }
    part = {"type": "output_text", "text": reply, "annotations": []}
    item = {"type": "message", "id": mid, "status": "completed", "role": "assistant", "content": [part]}

    def response(status: str, output: list, used: dict | None) -> dict:
        return {
            "id": rid,
            "object": "response",
            "created_at": created,
            "status": status,
            "model": model,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "instructions": body.get("instructions"),
            "previous_response_id": body.get("previous_response_id"),
            "text": {"format": {"type": "text"}},
            "error": None,
            "incomplete_details": None,
            "metadata": body.get("metadata") if isinstance(body.get("metadata"), dict) else {},
            "temperature": 1.0,
            "top_p": 1.0,
            "usage": used,
        }

    if not stream:
        yield json.dumps(response("completed", [item], words), ensure_ascii=False).encode()
        return
    seq = iter(range(1_000_000))

    def event(kind: str, **data) -> bytes:
        return _sse({"type": kind, "sequence_number": next(seq), **data}, kind)

    yield event("response.created", response=response("in_progress", [], None))
    yield event("response.in_progress", response=response("in_progress", [], None))
    yield event("response.output_item.added", output_index=0, item={**item, "status": "in_progress", "content": []})
    yield event("response.content_part.added", item_id=mid, output_index=0, content_index=0, part={**part, "text": ""})
    for piece in _pieces(reply):
        yield event(
            "response.output_text.delta", item_id=mid, output_index=0, content_index=0, delta=piece, logprobs=[]
        )
    yield event("response.output_text.done", item_id=mid, output_index=0, content_index=0, text=reply, logprobs=[])
    yield event("response.content_part.done", item_id=mid, output_index=0, content_index=0, part=part)
    yield event("response.output_item.done", output_index=0, item=item)
    yield event("response.completed", response=response("completed", [item], words))


def _anthropic(reply: str, usage: dict, model: str, call_id: str, stream: bool) -> Iterator[bytes]:
    mid = f"msg_{call_id}"
    used = {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"]}
    if not stream:
        yield json.dumps(
            {
                "id": mid,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": reply}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": used,
            },
            ensure_ascii=False,
        ).encode()
        return
    yield _sse(
        {
            "type": "message_start",
            "message": {
                "id": mid,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": used["input_tokens"], "output_tokens": 1},
            },
        },
        "message_start",
    )
    yield _sse(
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        "content_block_start",
    )
    for piece in _pieces(reply):
        yield _sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}},
            "content_block_delta",
        )
    yield _sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
    yield _sse(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": used["output_tokens"]},
        },
        "message_delta",
    )
    yield _sse({"type": "message_stop"}, "message_stop")


__all__ = ["DEMO_MODELS", "demo_answer"]
