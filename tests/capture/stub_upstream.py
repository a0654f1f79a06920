"""A stand-in model provider for the proxy's tests and benchmark: it answers OpenAI's chat completions and
Responses API and Anthropic's Messages API — whole or streamed — with a reply made from the request, calls
the first tool it is offered once per question (an agent's tool round), and keeps every request it was
sent. How it answers is set on the app (``delay``, ``chunk_delay``, ``status``, ``hang``) or per request
with ``x-stub-*`` headers.

Run standalone (the benchmark does): ``python tests/capture/stub_upstream.py PORT [DELAY] [CHUNK_DELAY]``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def reply_for(messages: list) -> str:
    """The stub's answer: which question it was asked and how many messages came before it."""
    users = [m for m in messages if m.get("role") == "user"]
    last = _text(users[-1].get("content")) if users else ""
    return f"stub answer to: {last} (saw {len(messages)} messages)"


class StubUpstream:
    def __init__(
        self, *, delay: float = 0.0, chunk_delay: float = 0.0, chunks: int = 5, status: int = 200, hang: bool = False
    ):
        self.delay, self.chunk_delay, self.chunks, self.status, self.hang = delay, chunk_delay, chunks, status, hang
        self.requests: list[dict] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body") or b""
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        path = scope["path"]
        self.requests.append({"path": path, "method": scope["method"], "headers": headers, "body": body})
        delay = float(headers.get("x-stub-delay", self.delay))
        status = int(headers.get("x-stub-status", self.status))
        chunk_delay = float(headers.get("x-stub-chunk-delay", self.chunk_delay))
        chunks = int(headers.get("x-stub-chunks", self.chunks))
        if self.hang or headers.get("x-stub-hang"):
            await asyncio.sleep(3600)
        if delay:
            await asyncio.sleep(delay)
        if scope["method"] == "GET" and path.endswith("/models"):
            return await _json(send, 200, {"object": "list", "data": [{"id": "stub-model", "object": "model"}]})
        if status >= 400:
            return await _json(
                send,
                status,
                {"error": {"message": f"stub refused with {status}", "type": "stub_error", "code": status}},
            )
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            return await _json(
                send, 400, {"error": {"message": "the body is not JSON", "type": "invalid_request_error"}}
            )
        stream = bool(request.get("stream"))
        if path.endswith("/chat/completions"):
            return await self._chat(send, request, stream, chunks, chunk_delay)
        if path.endswith("/responses"):
            return await self._responses(send, request, stream, chunks, chunk_delay)
        if path.endswith("/messages"):
            return await self._anthropic(send, request, stream, chunks, chunk_delay)
        return await _json(send, 404, {"error": {"message": f"no route {path}"}})

    async def _chat(self, send, request, stream, chunks, chunk_delay):
        messages = request.get("messages") or []
        tools = request.get("tools") or []
        call = None
        if tools and messages and messages[-1].get("role") == "user":
            name = tools[0].get("function", tools[0]).get("name")
            call = {
                "id": f"call_{len(messages)}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps({"query": _text(messages[-1].get("content"))})},
            }
        text = "" if call else reply_for(messages)
        usage = {
            "prompt_tokens": 10 * len(messages),
            "completion_tokens": len(text.split()) + 1,
            "total_tokens": 10 * len(messages) + len(text.split()) + 1,
        }
        created, cid = int(time.time()), f"chatcmpl-stub{len(self.requests)}"
        if not stream:
            message = {"role": "assistant", "content": text or None, "refusal": None}
            if call:
                message["tool_calls"] = [call]
            return await _json(
                send,
                200,
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": created,
                    "model": request.get("model"),
                    "usage": usage,
                    "choices": [
                        {
                            "index": 0,
                            "message": message,
                            "logprobs": None,
                            "finish_reason": "tool_calls" if call else "stop",
                        }
                    ],
                },
            )
        await _start(send, 200, "text/event-stream")
        head = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": request.get("model")}
        pieces = _split(text, chunks)
        await _event(
            send,
            {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
        )
        if call:
            await _event(
                send,
                {
                    **head,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {
                                        "index": 0,
                                        "id": call["id"],
                                        "type": "function",
                                        "function": {"name": call["function"]["name"], "arguments": ""},
                                    }
                                ]
                            },
                            "finish_reason": None,
                        }
                    ],
                },
            )
            await _event(
                send,
                {
                    **head,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [{"index": 0, "function": {"arguments": call["function"]["arguments"]}}]
                            },
                            "finish_reason": None,
                        }
                    ],
                },
            )
        for piece in pieces:
            if chunk_delay:
                await asyncio.sleep(chunk_delay)
            await _event(send, {**head, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
        await _event(
            send, {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if call else "stop"}]}
        )
        if (request.get("stream_options") or {}).get("include_usage"):
            await _event(send, {**head, "choices": [], "usage": usage})
        await _raw(send, b"data: [DONE]\n\n")
        await _raw(send, b"", more=False)

    async def _responses(self, send, request, stream, chunks, chunk_delay):
        raw = request.get("input")
        messages = [{"role": "user", "content": raw}] if isinstance(raw, str) else list(raw or [])
        text = reply_for(messages)
        rid = f"resp_stub{len(self.requests)}"
        item = {
            "type": "message",
            "id": f"msg_{rid}",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
        usage = {
            "input_tokens": 10 * len(messages),
            "output_tokens": len(text.split()),
            "total_tokens": 10 * len(messages) + len(text.split()),
        }
        response = {
            "id": rid,
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": request.get("model"),
            "output": [item],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": usage,
        }
        if not stream:
            return await _json(send, 200, response)
        await _start(send, 200, "text/event-stream")
        await _event(
            send,
            {
                "type": "response.created",
                "sequence_number": 0,
                "response": {**response, "status": "in_progress", "output": []},
            },
            "response.created",
        )
        for k, piece in enumerate(_split(text, chunks)):
            if chunk_delay:
                await asyncio.sleep(chunk_delay)
            await _event(
                send,
                {
                    "type": "response.output_text.delta",
                    "sequence_number": k + 1,
                    "item_id": item["id"],
                    "output_index": 0,
                    "content_index": 0,
                    "delta": piece,
                },
                "response.output_text.delta",
            )
        await _event(
            send, {"type": "response.completed", "sequence_number": 99, "response": response}, "response.completed"
        )
        await _raw(send, b"", more=False)

    async def _anthropic(self, send, request, stream, chunks, chunk_delay):
        messages = request.get("messages") or []
        text = reply_for(messages)
        usage = {"input_tokens": 10 * len(messages), "output_tokens": len(text.split())}
        mid = f"msg_stub{len(self.requests)}"
        if not stream:
            return await _json(
                send,
                200,
                {
                    "id": mid,
                    "type": "message",
                    "role": "assistant",
                    "model": request.get("model"),
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": usage,
                },
            )
        await _start(send, 200, "text/event-stream")
        await _event(
            send,
            {
                "type": "message_start",
                "message": {
                    "id": mid,
                    "type": "message",
                    "role": "assistant",
                    "model": request.get("model"),
                    "content": [],
                    "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1},
                },
            },
            "message_start",
        )
        await _event(
            send,
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            "content_block_start",
        )
        for piece in _split(text, chunks):
            if chunk_delay:
                await asyncio.sleep(chunk_delay)
            await _event(
                send,
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}},
                "content_block_delta",
            )
        await _event(send, {"type": "content_block_stop", "index": 0}, "content_block_stop")
        await _event(
            send,
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
            "message_delta",
        )
        await _event(send, {"type": "message_stop"}, "message_stop")
        await _raw(send, b"", more=False)


def _split(text: str, n: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // max(n, 1)))
    return [text[k : k + size] for k in range(0, len(text), size)]


async def _start(send, status, kind):
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", kind.encode())]})


async def _raw(send, data: bytes, more: bool = True):
    await send({"type": "http.response.body", "body": data, "more_body": more})


async def _event(send, data: dict, event: str | None = None):
    head = f"event: {event}\n" if event else ""
    await _raw(send, f"{head}data: {json.dumps(data)}\n\n".encode())


async def _json(send, status, data):
    body = json.dumps(data).encode()
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


if __name__ == "__main__":  # the benchmark's upstream, in a process of its own
    import uvicorn

    port = int(sys.argv[1])
    app = StubUpstream(
        delay=float(sys.argv[2]) if len(sys.argv) > 2 else 0.0,
        chunk_delay=float(sys.argv[3]) if len(sys.argv) > 3 else 0.0,
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
