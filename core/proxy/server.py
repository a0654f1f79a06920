"""The capture proxy: an OpenAI- and Anthropic-compatible endpoint that forwards each model call
unchanged and records what was sent (an ASGI app; ``python -m core proxy`` serves it).

Routes: ``POST /v1/chat/completions``, ``POST /v1/responses``, ``POST /v1/messages`` are forwarded
and recorded; ``GET /v1/models`` and every other path are forwarded and not recorded. With an
upstream, a request goes to ``UPSTREAM + path without /v1`` with the caller's own headers —
``Authorization``, ``x-api-key`` included, which are never stored, logged nor exported — and its body
exactly as received; the answer comes back as the upstream sent it (status code, headers, body), a
stream chunk by chunk as each arrives. Without one (``demo``), the offline demo model answers in each
API's shape (:mod:`core.proxy.demo`).

Recording never stands between the client and its bytes: the exchange is handed to the recorder
(:class:`~core.proxy.recorder.Recorder`) once the last byte is sent. What can go wrong is answered
here and recorded as what happened:

* a ``Host`` that is neither a loopback name nor allowed (:func:`core.hosts.host_allowed`, the app's and the
  Service API's rule) → 403 before anything else;
* a body over the limit (``MEMLENS_MAX_PROXY_MB``, :mod:`core.limits`) → 413, never forwarded;
* an upstream that refuses the connection → 502; one that does not answer in time → 504 (a stream
  already under way ends there); both recorded as a failed call;
* an upstream error status → passed on as sent, recorded as a failed call with the upstream's message;
* a client that disconnects mid-stream → the upstream stream is closed and the call recorded as
  stopped, with the reply as far as it came.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Iterable
from uuid import uuid4

from core.capture.errors import CaptureError
from core.hosts import allowed_hosts, host_allowed, refusal
from core.limits import MAX_PROXY_BYTES, limit

from .demo import DEMO_MODELS, demo_answer
from .exchange import (
    CLIENT_LEFT,
    ENDPOINTS,
    MESSAGES,
    UPSTREAM_ERROR,
    UPSTREAM_REFUSED,
    UPSTREAM_TIMEOUT,
    Exchange,
    request_json,
)
from .upstream import UpstreamTimeout, UpstreamUnreachable, upstream_for

#: Headers that belong to one connection, never forwarded (RFC 9110 §7.6.1), and those the request is sent with
#: anew (its host, its length).
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
    }
)
#: Response headers not passed back: the connection's own and the length of a body the proxy re-frames.
RESPONSE_DROPPED = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "te", "trailer", "upgrade"}
)
#: Header names that may carry a secret: never recorded (compared in lower case).
SECRET_HEADER = re.compile(r"auth|key|token|secret|cookie|password|credential|signature|session", re.I)
#: The answer header that names the recorded call (what the Debugger shows as its id).
CALL_HEADER = "x-memlens-call"
#: How long to wait for an upstream to accept a connection.
CONNECT_SECONDS = 10.0


def _allowed() -> tuple[str, ...]:
    return allowed_hosts()


def public_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The headers that may be recorded: none whose name says it may carry a secret."""
    return {k: v for k, v in headers if not SECRET_HEADER.search(k)}


def error_body(api: str, status: int, kind: str, message: str) -> bytes:
    """An error in the caller's API's own shape (Anthropic's or OpenAI's), so its client raises it as one."""
    if api == MESSAGES:
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": status}}).encode()


class CaptureProxy:
    """The ASGI app. ``upstream``: the base URL calls are forwarded to (``https://api.openai.com/v1``);
    ``None`` answers with the demo model. ``recorder`` receives each finished exchange (``None``:
    nothing is recorded). ``timeout``: seconds to wait for the upstream's next bytes. ``allowed_hosts``:
    ``Host`` names answered besides loopback ones (default: ``MEMLENS_ALLOWED_HOSTS``)."""

    def __init__(
        self,
        *,
        upstream: str | None,
        recorder=None,
        timeout: float = 600.0,
        allowed_hosts: Iterable[str] | None = None,
        max_body_bytes: int | None = None,
    ):
        self.upstream = upstream.rstrip("/") if upstream else None
        self.recorder = recorder
        self.timeout = timeout
        self.allowed = frozenset(_allowed() if allowed_hosts is None else allowed_hosts)
        self.max_body = MAX_PROXY_BYTES if max_body_bytes is None else max_body_bytes
        self._client = None

    # -- the ASGI entry ----------------------------------------------------------------------------------
    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            return await self._lifespan(receive, send)
        if scope["type"] != "http":
            return
        headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope.get("headers") or ()]
        path = scope.get("path") or "/"
        api = ENDPOINTS.get(path)
        host = next((v for k, v in headers if k == "host"), None)
        if not host_allowed(host, self.allowed):
            return await _answer(send, 403, error_body(api or "", 403, "forbidden_host", refusal(host)))
        declared = next((v for k, v in headers if k == "content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            return await _answer(send, 413, error_body(api or "", 413, "request_too_large", self._too_large()))
        body = await self._body(receive)
        if body is None:
            return await _answer(send, 413, error_body(api or "", 413, "request_too_large", self._too_large()))
        method = scope.get("method", "GET")
        if api is None or method != "POST":
            return await self._pass_through(scope, method, path, headers, body, send)
        await self._call(api, scope, path, headers, body, receive, send)

    def _too_large(self) -> str:
        return (
            f"the request body is larger than {self.max_body:,} bytes, the proxy's limit (set by "
            f"{limit('proxy_request_size').env}); it was not forwarded"
        )

    async def _body(self, receive) -> bytes | None:
        """The request body, or ``None`` as soon as it passes the limit."""
        parts, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body") or b""
            size += len(chunk)
            if size > self.max_body:
                return None
            parts.append(chunk)
            if not message.get("more_body"):
                break
        return b"".join(parts)

    async def _lifespan(self, receive, send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if self.recorder is not None:
                    self.recorder.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                if self.recorder is not None:
                    await asyncio.get_running_loop().run_in_executor(None, self.recorder.close)
                await send({"type": "lifespan.shutdown.complete"})
                return

    def client(self):
        """The upstream's connections (made on first use, in the serving loop)."""
        if self._client is None:
            self._client = upstream_for(
                self.upstream, timeout=self.timeout, connect_timeout=min(CONNECT_SECONDS, self.timeout)
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # -- forwarding ---------------------------------------------------------------------------------------
    @staticmethod
    def _target(scope, path: str) -> str:
        """The path under the upstream's base URL (``/v1/chat/completions`` → ``/chat/completions``), with its query."""
        rest = path[3:] if path.startswith("/v1/") or path == "/v1" else path
        query = scope.get("query_string") or b""
        return rest + (f"?{query.decode('latin-1')}" if query else "")

    async def _pass_through(self, scope, method: str, path: str, headers: list, body: bytes, send) -> None:
        """A path the proxy does not record: forwarded as it is (the demo model lists itself as the model)."""
        if self.upstream is None:
            if path == "/v1/models" and method == "GET":
                return await _answer(send, 200, json.dumps(DEMO_MODELS).encode())
            return await _answer(
                send,
                404,
                error_body(
                    "",
                    404,
                    "not_found",
                    f"the demo model answers {', '.join(ENDPOINTS)} and GET /v1/models, not {method} {path}",
                ),
            )
        try:
            answer = await self.client().send(method, self._target(scope, path), _forwarded(headers), body)
        except UpstreamTimeout as e:
            return await _answer(send, 504, error_body("", 504, "upstream_timeout", str(e)))
        except UpstreamUnreachable as e:
            return await _answer(send, 502, error_body("", 502, "upstream_unreachable", _unreachable(self.upstream, e)))
        try:
            await send(
                {"type": "http.response.start", "status": answer.status, "headers": _response_headers(answer.headers)}
            )
            async for chunk in answer.chunks():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        except (UpstreamTimeout, UpstreamUnreachable, OSError):
            pass
        finally:
            await answer.close()

    async def _call(self, api: str, scope, path: str, headers: list, body: bytes, receive, send) -> None:
        """A model call: answered (upstream or demo) chunk by chunk, then handed to the recorder."""
        ex = Exchange(
            id=uuid4().hex[:24],
            api=api,
            request=body,
            started_at=time.time(),
            request_headers=public_headers(headers),
            upstream=self.upstream or "demo",
        )
        if self.recorder is not None:
            self.recorder.expect()
        start = time.perf_counter()
        received: list[bytes] = []

        async def relay() -> None:
            if self.upstream is None:
                await self._demo(ex, body, send, received, start)
            else:
                await self._forward(ex, scope, path, headers, body, send, received, start)

        task = asyncio.ensure_future(relay())
        watcher = asyncio.ensure_future(_disconnected(receive))
        try:
            done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if task not in done:  # the client left first
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
                ex.outcome, ex.error = (
                    CLIENT_LEFT,
                    (f"the client disconnected after {sum(map(len, received)):,} bytes of the answer"),
                )
            else:
                task.result()
        except _ClientLeft as e:
            ex.outcome, ex.error = CLIENT_LEFT, str(e)
        finally:
            watcher.cancel()
            ex.response = b"".join(received)
            ex.latency_ms = (time.perf_counter() - start) * 1000
            if self.recorder is not None:
                self.recorder.submit(ex)

    async def _forward(
        self, ex: Exchange, scope, path: str, headers: list, body: bytes, send, received: list, start: float
    ) -> None:
        try:
            answer = await self.client().send("POST", self._target(scope, path), _forwarded(headers), body)
        except UpstreamTimeout:
            ex.outcome, ex.error = UPSTREAM_TIMEOUT, f"the upstream did not answer within {self.timeout:g} s"
            return await _answer(send, 504, error_body(ex.api, 504, "upstream_timeout", ex.error), ex.id)
        except UpstreamUnreachable as e:
            ex.outcome, ex.error = UPSTREAM_REFUSED, _unreachable(self.upstream, e)
            return await _answer(send, 502, error_body(ex.api, 502, "upstream_unreachable", ex.error), ex.id)
        ex.status = answer.status
        ex.response_headers = public_headers(answer.headers)
        ex.streamed = answer.header("content-type").startswith("text/event-stream")
        if answer.status >= 400:
            ex.outcome = UPSTREAM_ERROR
        try:
            await _send(
                send,
                {
                    "type": "http.response.start",
                    "status": answer.status,
                    "headers": _response_headers(answer.headers, ex.id),
                },
            )
            async for chunk in answer.chunks():
                if ex.first_byte_ms is None:
                    ex.first_byte_ms = (time.perf_counter() - start) * 1000
                await _send(send, {"type": "http.response.body", "body": chunk, "more_body": True})
                received.append(chunk)
            await _send(send, {"type": "http.response.body", "body": b""})
        except UpstreamTimeout:
            ex.outcome, ex.error = (
                UPSTREAM_TIMEOUT,
                (f"the upstream stopped sending for {self.timeout:g} s after {sum(map(len, received)):,} bytes"),
            )
            await _end(send)
        except UpstreamUnreachable as e:
            ex.outcome, ex.error = UPSTREAM_REFUSED, f"{e} after {sum(map(len, received)):,} bytes"
            await _end(send)
        finally:
            await answer.close()

    async def _demo(self, ex: Exchange, body: bytes, send, received: list, start: float) -> None:
        try:
            streamed, chunks = demo_answer(ex.api, request_json(body), ex.id)
        except CaptureError as e:
            ex.status, ex.outcome, ex.error = 400, UPSTREAM_ERROR, str(e)
            return await _answer(send, 400, error_body(ex.api, 400, "invalid_request_error", str(e)), ex.id)
        ex.status, ex.streamed = 200, streamed
        kind = b"text/event-stream; charset=utf-8" if streamed else b"application/json"
        await _send(
            send,
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", kind), (CALL_HEADER.encode(), ex.id.encode())],
            },
        )
        for chunk in chunks:
            if ex.first_byte_ms is None:
                ex.first_byte_ms = (time.perf_counter() - start) * 1000
            await _send(send, {"type": "http.response.body", "body": chunk, "more_body": True})
            received.append(chunk)
            if streamed:
                await asyncio.sleep(0)  # a stream is sent as it is made, piece by piece
        await _send(send, {"type": "http.response.body", "body": b""})


class _ClientLeft(Exception):
    """The client's connection closed while its answer was being sent."""


async def _send(send, message: dict) -> None:
    try:
        await send(message)
    except OSError as e:  # uvicorn: the client went away (ClientDisconnected is an OSError)
        raise _ClientLeft(f"the client disconnected mid-answer ({type(e).__name__})") from None


async def _end(send) -> None:
    try:
        await send({"type": "http.response.body", "body": b""})
    except OSError:
        pass


async def _disconnected(receive) -> None:
    """Returns when the client disconnects (the body is read already: nothing else arrives)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def _answer(send, status: int, body: bytes, call_id: str | None = None) -> None:
    headers = [(b"content-type", b"application/json")]
    if call_id:
        headers.append((CALL_HEADER.encode(), call_id.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _forwarded(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The caller's headers as the upstream gets them: all of them (its key too), but the connection's own."""
    out = [(k, v) for k, v in headers if k not in HOP_BY_HOP]
    out.append(("accept-encoding", "identity"))  # the body passes through as it is sent, and is recorded
    return out


def _response_headers(items, call_id: str | None = None) -> list[tuple[bytes, bytes]]:
    out = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in items if k.lower() not in RESPONSE_DROPPED]
    if call_id:
        out.append((CALL_HEADER.encode(), call_id.encode()))
    return out


def _unreachable(upstream: str | None, error: Exception) -> str:
    return f"the upstream {upstream} could not be reached ({' '.join(str(error).split())[:200]})"


__all__ = ["CALL_HEADER", "CaptureProxy", "SECRET_HEADER", "error_body", "public_headers"]
