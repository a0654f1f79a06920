"""The proxy's way to its upstream: HTTP/1.1 over asyncio streams, connections kept open and reused, the
body handed on piece by piece as it arrives.

A general HTTP client spends more of a core per call than the whole rest of the proxy (its connection
pool, its stream wrappers), and every core the proxy spends is one the bot and its model do not get; this
one does only what forwarding needs: send the request as it came, read the status and headers, then the
body as its framing says (a length, chunks, or until the connection closes). A connection the upstream
closed while idle is found when the request is sent again on it — no byte of an answer came back — and the
request goes once more on a new connection. Behind an HTTP proxy (``HTTPS_PROXY``, ``HTTP_PROXY``,
``ALL_PROXY`` in the environment) the proxy forwards through httpx instead (:mod:`core.proxy.server`).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import AsyncIterator
from urllib.parse import urlsplit

#: The most bytes of a status line and headers read before the answer is refused as malformed.
MAX_HEAD = 256 * 1024
#: Idle connections kept open per upstream.
KEEP = 64
READ = 64 * 1024


class UpstreamTimeout(Exception):
    """The upstream did not answer (or send more) within the timeout."""


class UpstreamUnreachable(Exception):
    """The upstream could not be reached, or broke the connection."""


class Answer:
    """An upstream's answer: its status and headers, its body read with :meth:`chunks`, :meth:`close` after."""

    def __init__(
        self, upstream: "Upstream", conn, status: int, headers: list[tuple[str, str]], framing: str, length: int
    ):
        self.upstream, self._conn = upstream, conn
        self.status, self.headers = status, headers
        self._framing, self._left, self._done = framing, length, framing == "none"

    def header(self, name: str) -> str:
        return next((v for k, v in self.headers if k.lower() == name), "")

    async def chunks(self) -> AsyncIterator[bytes]:
        reader = self._conn[0]
        read = self.upstream._read
        if self._framing == "length":
            while self._left > 0:
                data = await read(reader.read(min(READ, self._left)))
                if not data:
                    raise UpstreamUnreachable("the upstream closed the connection mid-answer")
                self._left -= len(data)
                yield data
        elif self._framing == "chunked":
            while True:
                line = await read(reader.readline())
                if not line:
                    raise UpstreamUnreachable("the upstream closed the connection mid-answer")
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while (await read(reader.readline())) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                if size <= READ:  # most pieces of a stream: the piece and its CRLF in one read
                    data = await read(reader.readexactly(size + 2))
                    yield data[:-2]
                    continue
                while size > 0:
                    data = await read(reader.read(min(READ, size)))
                    if not data:
                        raise UpstreamUnreachable("the upstream closed the connection mid-answer")
                    size -= len(data)
                    yield data
                await read(reader.readline())  # the CRLF after the chunk
        elif self._framing == "close":
            while True:
                data = await read(reader.read(READ))
                if not data:
                    break
                yield data
        self._done = True

    async def close(self) -> None:
        """Give the connection back when the body was read whole and it may be reused; else close it."""
        if self._conn is None:
            return
        conn, self._conn = self._conn, None
        reusable = (
            self._done
            and self._framing in ("length", "chunked", "none")
            and "close" not in self.header("connection").lower()
        )
        if reusable and len(self.upstream._idle) < KEEP:
            self.upstream._idle.append(conn)
        else:
            conn[1].close()


class Upstream:
    """One upstream base URL (``https://api.openai.com/v1``) and its open connections."""

    def __init__(self, base_url: str, *, timeout: float, connect_timeout: float):
        parts = urlsplit(base_url)
        self.secure = parts.scheme == "https"
        self.host = parts.hostname or "localhost"
        self.port = parts.port or (443 if self.secure else 80)
        self.host_header = parts.netloc.rsplit("@", 1)[-1]
        self.prefix = parts.path.rstrip("/")
        self.timeout, self.connect_timeout = timeout, connect_timeout
        self._idle: list = []
        self._ssl = ssl.create_default_context() if self.secure else None

    async def _read(self, awaitable):
        try:
            async with asyncio.timeout(self.timeout):  # a timer, not a task per read (asyncio.wait_for)
                return await awaitable
        except TimeoutError:
            raise UpstreamTimeout(f"the upstream sent nothing for {self.timeout:g} s") from None
        except (ConnectionError, OSError, asyncio.IncompleteReadError) as e:
            raise UpstreamUnreachable(f"the upstream broke the connection ({type(e).__name__})") from None

    async def _open(self):
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    self.host,
                    self.port,
                    ssl=self._ssl,
                    limit=MAX_HEAD,
                    server_hostname=self.host if self.secure else None,
                ),
                self.connect_timeout,
            )
        except asyncio.TimeoutError:
            raise UpstreamTimeout(
                f"the upstream did not accept a connection within {self.connect_timeout:g} s"
            ) from None
        except (OSError, ssl.SSLError) as e:
            raise UpstreamUnreachable(f"{type(e).__name__}: {' '.join(str(e).split())[:160]}") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return reader, writer

    async def send(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> Answer:
        """Send a request (``target``: the path under the base URL, with its query) and read the answer's head."""
        head = [
            f"{method} {self.prefix}{target} HTTP/1.1",
            f"host: {self.host_header}",
            *(f"{k}: {v}" for k, v in headers),
            f"content-length: {len(body)}",
            "",
            "",
        ]
        request = "\r\n".join(head).encode("latin-1") + body
        while self._idle:  # a kept connection: the upstream may have closed it meanwhile
            conn = self._idle.pop()
            try:
                return await self._exchange(conn, request, method)
            except _Stale:
                conn[1].close()
        conn = await self._open()
        try:
            return await self._exchange(conn, request, method)
        except _Stale:
            conn[1].close()
            raise UpstreamUnreachable("the upstream closed the connection without answering") from None

    async def _exchange(self, conn, request: bytes, method: str) -> Answer:
        reader, writer = conn
        try:
            writer.write(request)
            await writer.drain()
            line = await asyncio.wait_for(reader.readline(), self.timeout)
        except asyncio.TimeoutError:
            writer.close()
            raise UpstreamTimeout(f"the upstream did not answer within {self.timeout:g} s") from None
        except (ConnectionError, OSError):
            raise _Stale() from None
        if not line:
            raise _Stale()
        try:
            status = int(line.split(b" ", 2)[1])
            raw = await self._read(reader.readuntil(b"\r\n\r\n"))
        except (ValueError, IndexError, asyncio.LimitOverrunError):
            writer.close()
            raise UpstreamUnreachable("the upstream's answer is not HTTP/1.1") from None
        headers = []
        for field in raw[:-4].split(b"\r\n"):
            if b":" in field:
                name, value = field.split(b":", 1)
                headers.append((name.decode("latin-1").strip(), value.decode("latin-1").strip()))
        lowered = {k.lower(): v for k, v in headers}
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            framing, length = "none", 0
        elif "chunked" in lowered.get("transfer-encoding", "").lower():
            framing, length = "chunked", 0
        elif lowered.get("content-length", "").isdigit():
            length = int(lowered["content-length"])
            framing = "length" if length else "none"
        else:
            framing, length = "close", 0
        return Answer(self, conn, status, headers, framing, length)

    async def aclose(self) -> None:
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()


class _Stale(Exception):
    """A kept connection the upstream had closed: nothing of an answer came back on it."""


class HttpxAnswer:
    """An answer read through httpx (behind an HTTP proxy), in :class:`Answer`'s shape."""

    def __init__(self, response):
        self._response = response
        self.status = response.status_code
        self.headers = list(response.headers.multi_items())

    def header(self, name: str) -> str:
        return self._response.headers.get(name, "")

    async def chunks(self) -> AsyncIterator[bytes]:
        import httpx

        try:
            async for chunk in self._response.aiter_raw():
                yield chunk
        except httpx.TimeoutException:
            raise UpstreamTimeout("the upstream stopped sending") from None
        except httpx.HTTPError as e:
            raise UpstreamUnreachable(f"the upstream broke the connection ({type(e).__name__})") from None

    async def close(self) -> None:
        await self._response.aclose()


class HttpxUpstream:
    """The upstream through httpx, which honours ``HTTPS_PROXY`` and the like."""

    def __init__(self, base_url: str, *, timeout: float, connect_timeout: float):
        import httpx

        self.base, self.timeout = base_url.rstrip("/"), timeout
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=connect_timeout), trust_env=True, follow_redirects=False
        )

    async def send(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> HttpxAnswer:
        import httpx

        try:
            request = self._client.build_request(method, self.base + target, content=body, headers=headers)
            return HttpxAnswer(await self._client.send(request, stream=True))
        except httpx.TimeoutException:
            raise UpstreamTimeout(f"the upstream did not answer within {self.timeout:g} s") from None
        except httpx.HTTPError as e:
            raise UpstreamUnreachable(f"{type(e).__name__}: {' '.join(str(e).split())[:160]}") from None

    async def aclose(self) -> None:
        await self._client.aclose()


#: Environment variables that route outgoing connections through an HTTP proxy.
PROXY_ENV = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")


def upstream_for(base_url: str, *, timeout: float, connect_timeout: float):
    """The upstream connection for ``base_url``: direct, or through httpx when an HTTP proxy is configured."""
    import os

    if any(os.environ.get(name) for name in PROXY_ENV):
        return HttpxUpstream(base_url, timeout=timeout, connect_timeout=connect_timeout)
    return Upstream(base_url, timeout=timeout, connect_timeout=connect_timeout)


__all__ = ["Answer", "HttpxUpstream", "PROXY_ENV", "Upstream", "UpstreamTimeout", "UpstreamUnreachable", "upstream_for"]
