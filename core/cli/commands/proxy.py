"""``proxy``: the capture proxy (see :mod:`core.proxy.server`)::

    memlens proxy --upstream https://api.openai.com/v1      # forward, record
    memlens proxy --demo                                     # the offline demo model answers

Point a bot's OpenAI (or Anthropic) base URL at ``http://127.0.0.1:4000/v1``: each call is forwarded
unchanged with the bot's own key and recorded into the store (``--db``), threaded into conversations
the Debugger opens and ``infer`` explains.
"""

from __future__ import annotations

import socket
import sys

from ..options import add_db_option


def _upstream(text: str) -> str:
    import argparse
    from urllib.parse import urlsplit

    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(
            f"--upstream {text!r} is not an http(s) URL; give the provider's base URL, e.g. https://api.openai.com/v1"
        )
    return text


def _seconds(text: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--timeout must be a number of seconds, not {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"--timeout {text} is out of range: it must be above 0")
    return value


def cmd_proxy(args) -> int:
    import uvicorn
    from sqlalchemy.engine import make_url

    from core.hosts import ALLOWED_HOSTS_ENV, allowed_hosts, host_name, is_loopback
    from core.proxy.recorder import RecorderProcess
    from core.proxy.server import CaptureProxy
    from core.store.db import Database

    from .serve import _listen

    allowed = allowed_hosts()  # a bad entry is refused before anything listens
    db = Database(args.db)  # brought up to date here, once; the recorder process opens it again
    db.dispose()
    recorder = RecorderProcess(db.url)
    app = CaptureProxy(upstream=args.upstream, recorder=recorder, timeout=args.timeout, allowed_hosts=allowed)
    sock = _listen(args.host, args.port)
    # Each streamed piece leaves at once (connections accepted on it inherit the option): without it, a piece
    # written after the headers waits for the client's delayed ACK (Nagle), tens of milliseconds.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    port = sock.getsockname()[1]
    shown = make_url(db.url).render_as_string(hide_password=True)
    answered = f"forwarding to {args.upstream}" if args.upstream else "the demo model answers"
    print(
        f"MemLens capture proxy on http://{args.host}:{port}/v1 — {answered} — recording into {shown}",
        file=sys.stderr,
        flush=True,
    )
    if not allowed and not is_loopback(host_name(args.host) or ""):
        print(
            f"note: requests are answered only when their Host is localhost, 127.0.0.1 or ::1; set "
            f"{ALLOWED_HOSTS_ENV} to the names callers use for this machine (host.docker.internal for Dify in "
            "Docker)",
            file=sys.stderr,
            flush=True,
        )
    # The upstream's own Date and Server headers pass through: uvicorn adds none of its own.
    options = dict(
        log_level=args.log_level,
        access_log=args.log_level == "debug",
        timeout_graceful_shutdown=5,
        lifespan="on",
        server_header=False,
        date_header=False,
    )
    uvicorn.Server(uvicorn.Config(app, **options)).run(sockets=[sock])
    return 0


def register(sub) -> None:
    from .serve import _port

    p = sub.add_parser(
        "proxy",
        help="an OpenAI/Anthropic-compatible proxy that records what a bot sends its model",
        description="Forward each model call unchanged (or answer it with the offline demo model) "
        "and record it: the calls are threaded into conversations, each call's ledger "
        "says which earlier messages its payload held.",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=_port, default=4000, help="0..65535 (0: any free port)")
    add_db_option(p)
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument(
        "--upstream",
        type=_upstream,
        metavar="URL",
        help="the provider's base URL calls are forwarded to, e.g. https://api.openai.com/v1",
    )
    how.add_argument("--demo", action="store_true", help="answer every call with the offline demo model")
    p.add_argument(
        "--timeout", type=_seconds, default=600.0, help="seconds to wait for the upstream's next bytes (default 600)"
    )
    p.add_argument("--log-level", choices=("critical", "error", "warning", "info", "debug"), default="warning")
    p.set_defaults(func=cmd_proxy)
