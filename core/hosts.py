"""Which ``Host`` a MemLens server answers: this machine's loopback names, and the hosts its operator allowed.

A web page the user visits can point a name it controls at 127.0.0.1 (DNS rebinding): the browser
then sends that page's requests, and its websocket, to MemLens with ``Host: evil.example`` and hands
the answers to the page as its own. No browser sends a loopback name for a page served from
elsewhere, so a server that answers only requests whose Host is ``localhost``, an address in
127.0.0.0/8 or ``::1`` — or a name the operator listed in ``MEMLENS_ALLOWED_HOSTS`` to share
MemLens — cannot be read or driven that way. The port does not matter. The Streamlit app (app.py),
the Service API (:mod:`core.api.app`) and the capture proxy apply this one rule, :func:`host_allowed`;
:class:`HostCheck` applies it to every HTTP request and websocket of an ASGI app.

    >>> host_allowed("127.0.0.1:8501"), host_allowed("[::1]:5001"), host_allowed("evil.example:8501")
    (True, True, False)
    >>> host_allowed("memlens.lan:8501", allowed=("memlens.lan",))
    True

Where each rule lives:

* Which `Host` a server answers (loopback names and addresses, `MEMLENS_ALLOWED_HOSTS`): the DNS-rebinding
  check of the app, the Service API and the capture proxy: `core/hosts.py` (`host_allowed`, the ASGI
  middleware `HostCheck`); the app's server is the `st.App` that `app.py` defines for `streamlit run app.py`,
  the API's in `create_app` (`core/api/app.py`).
"""

from __future__ import annotations

import ipaddress
import os
import re
from typing import Any, Callable, Iterable, Mapping

from .errors import MemLensError

#: The setting that names the other hosts a MemLens server answers to (names or addresses, separated
#: by commas or spaces; docs/security.md says when to set it).
ALLOWED_HOSTS_ENV = "MEMLENS_ALLOWED_HOSTS"
LOOPBACK_NAME = "localhost"
_NAME = re.compile(r"[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?")
_PORT = re.compile(r"[0-9]{1,5}")


class HostsError(MemLensError):
    """An entry of ``MEMLENS_ALLOWED_HOSTS`` that is not a host name or address."""


def _bare(text: str) -> str | None:
    """A bare host name or address in its one spelling (lower-case, no final dot; an IPv6 address
    compressed), or None when ``text`` is neither."""
    text = text.strip().lower()
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    text = text[:-1] if text.endswith(".") else text
    return text if _NAME.fullmatch(text) else None


def host_name(host: str | None) -> str | None:
    """The name or address a ``Host`` header names, without its port (``"[::1]:8501"`` → ``"::1"``,
    ``"LocalHost.:80"`` → ``"localhost"``); None when it names none."""
    if not host:
        return None
    host = host.strip()
    if host.startswith("["):  # an IPv6 address, with or without a port after it
        inside, bracket, rest = host[1:].partition("]")
        if not bracket or rest and not (rest[0] == ":" and _PORT.fullmatch(rest[1:])):
            return None
        name = _bare(inside)
        return name if name is not None and ":" in name else None
    name, colon, port = host.partition(":")
    if colon and not _PORT.fullmatch(port):
        return None
    return _bare(name)


def is_loopback(name: str) -> bool:
    """Whether ``name`` (from :func:`host_name`) is this machine's own: ``localhost``, 127.0.0.0/8, ``::1``."""
    if name == LOOPBACK_NAME:
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is 127.0.0.1
    return address.is_loopback or bool(mapped and mapped.is_loopback)


def allowed_hosts(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The hosts ``MEMLENS_ALLOWED_HOSTS`` allows besides loopback; an entry that is not a bare host
    name or address (a URL, a port, a path) is a :class:`HostsError` in one line."""
    raw = (os.environ if environ is None else environ).get(ALLOWED_HOSTS_ENV, "")
    out = []
    for entry in raw.replace(",", " ").split():
        name = _bare(entry[1:-1] if entry.startswith("[") and entry.endswith("]") else entry)
        if name is None:
            raise HostsError(
                f"{ALLOWED_HOSTS_ENV}: {entry[:100]!r} is not a host name or address; list bare names "
                f"or addresses, e.g. {ALLOWED_HOSTS_ENV}=memlens.example.com,10.0.0.5 (no scheme, "
                "port or path)"
            )
        out.append(name)
    return tuple(out)


def host_allowed(host: str | None, allowed: Iterable[str] | None = None) -> bool:
    """The rule: whether a request whose ``Host`` header is ``host`` may be answered — a loopback
    name or address, or one of ``allowed`` (bare names or addresses; default: :func:`allowed_hosts`).
    A request without a Host, or with one that names no host, is refused."""
    name = host_name(host)
    if name is None:
        return False
    if is_loopback(name):
        return True
    return name in (allowed_hosts() if allowed is None else {_bare(a) for a in allowed})


def refusal(host: str | None) -> str:
    """What a refused request is told, in one line: what was wrong and what to do."""
    shown = repr(host[:100]) if host else "no Host header"
    return (
        f"MemLens answers requests for localhost, 127.0.0.1 or ::1 only, and for the hosts in "
        f"{ALLOWED_HOSTS_ENV}; this one came for {shown}. Open MemLens as http://localhost:<port>, or add "
        f"the name to {ALLOWED_HOSTS_ENV} to share it (see docs/security.md)."
    )


def _header(scope: Mapping[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def plain_refusal(message: str):
    """An ASGI app answering ``403`` with ``message`` as plain text."""
    body = message.encode("utf-8")

    async def answer(scope, receive, send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"x-content-type-options", b"nosniff"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return answer


class HostCheck:
    """ASGI middleware: an HTTP request or websocket whose Host :func:`host_allowed` refuses never
    reaches ``app``. HTTP gets ``answer(message)`` (an ASGI app; by default a plain-text 403); a
    websocket is refused before its handshake completes (403, with the message where the server
    can send one). ``allowed`` is read once, when the middleware is made: a bad entry stops the
    server from starting instead of refusing every request later."""

    def __init__(self, app, *, allowed: Iterable[str] | None = None, answer: Callable[[str], Any] = plain_refusal):
        self.app = app
        self.allowed = frozenset(allowed_hosts() if allowed is None else allowed)
        self.answer = answer

    async def __call__(self, scope, receive, send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        host = _header(scope, b"host")
        if host_allowed(host, self.allowed):
            return await self.app(scope, receive, send)
        message = refusal(host)
        if kind == "http":
            return await self.answer(message)(scope, receive, send)
        await receive()  # websocket.connect
        if "websocket.http.response" in (scope.get("extensions") or {}):
            await plain_refusal(message)(scope, receive, _as_websocket_denial(send))
        else:
            await send({"type": "websocket.close", "code": 1008})


def _as_websocket_denial(send):
    """``send`` for an HTTP answer given to a websocket handshake (ASGI's websocket denial response)."""

    async def denial(message: dict) -> None:
        await send({**message, "type": message["type"].replace("http.", "websocket.http.", 1)})

    return denial


__all__ = [
    "ALLOWED_HOSTS_ENV",
    "HostCheck",
    "HostsError",
    "allowed_hosts",
    "host_allowed",
    "host_name",
    "is_loopback",
    "plain_refusal",
    "refusal",
]
