"""``serve``: Dify's Service API over the flows in the store (see :mod:`core.api.app`).

``memlens serve [--host 127.0.0.1] [--port 5001] [--db URL]`` serves ``/v1`` on the database
the UI uses (``--db``, else ``MEMLENS_DATABASE_URL``, else ``data/memlens.db``), so conversations
started through the API show up in the UI. Models are called as the UI calls them (configured
providers, the demo model where no key is set); ``--demo`` answers every LLM node with the offline
demo model in-process. The OpenAPI document is at ``/openapi.json``.

``--workers N`` runs N server processes on one port (the supervisor here starts a new worker when one
dies). Each worker listens on a socket of its own, bound to the port with ``SO_REUSEPORT``, so the
kernel spreads new connections across the workers: on one shared socket, whichever worker woke
first accepted a whole burst of connections, and clients that keep their connection open (every
HTTP client library does) then all talked to that one worker while the others idled. It needs
PostgreSQL: turns on one conversation are serialised by database locks that hold across the
workers, and the workers share one store.
"""

from __future__ import annotations

import os
import socket
import sys

from ..options import add_db_option

#: What the worker processes read to build their app: they are started afresh (spawned), so
#: the parent hands them its database URL and model choice through their environment.
_WORKER_DB = "MEMLENS_SERVE_DATABASE_URL"
_WORKER_DEMO = "MEMLENS_SERVE_DEMO"


def _listen(host: str, port: int, *, shared_port: bool = False) -> socket.socket:
    """A listening socket on ``host:port``; with ``shared_port``, one of several on the same port
    (``SO_REUSEPORT``: the kernel hands each new connection to one of them)."""
    from ..errors import UsageError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if shared_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except (OSError, OverflowError) as e:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port} ({e.strerror}); choose another --port or --host") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _port(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--port must be a whole number, not {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"--port {value} is out of range: ports are 0..65535")
    return value


def worker_app():
    """The app of one ``--workers`` process (uvicorn's app factory, run in each worker)."""
    from core.api.app import create_app
    from core.llm.client import DemoClient
    from core.store.db import Database

    return create_app(Database(os.environ[_WORKER_DB]), llm=DemoClient() if os.environ.get(_WORKER_DEMO) else None)


def _serve_worker(sock: socket.socket, options: dict) -> None:
    """One worker process: uvicorn on its own socket, with the app :func:`worker_app` builds."""
    import uvicorn

    try:
        uvicorn.Server(uvicorn.Config(f"{__name__}:worker_app", factory=True, **options)).run(sockets=[sock])
    except KeyboardInterrupt:  # the supervisor is stopping every worker
        pass


def _supervise(sockets: list[socket.socket], options: dict) -> int:
    """Run one worker process per socket until SIGINT or SIGTERM, starting a new worker on the
    socket of one that died (its socket stays open here meanwhile, so connections the kernel
    gave it wait in its queue). A worker that fails while starting stops them all: its app or
    database is broken and every restart would fail the same way."""
    import multiprocessing
    import signal
    import threading

    from uvicorn.config import STARTUP_FAILURE

    multiprocessing.allow_connection_pickling()  # a socket passed to a spawned process
    spawn = multiprocessing.get_context("spawn")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    def start(sock: socket.socket):
        worker = spawn.Process(target=_serve_worker, args=(sock, options), daemon=False)
        worker.start()
        return worker

    workers = [start(sock) for sock in sockets]
    failed = False
    while not stop.wait(0.5):
        for i, worker in enumerate(workers):
            if worker.is_alive():
                continue
            if worker.exitcode == STARTUP_FAILURE:
                print(f"error: worker {worker.pid} failed to start; stopping", file=sys.stderr, flush=True)
                failed = True
                stop.set()
                break
            workers[i] = start(sockets[i])
    for worker in workers:
        if worker.is_alive():
            worker.terminate()
    for worker in workers:
        worker.join(10)
        if worker.is_alive():
            worker.kill()
            worker.join()
    for sock in sockets:
        sock.close()
    return 1 if failed else 0


def cmd_serve(args) -> int:
    import uvicorn
    from sqlalchemy.engine import make_url

    from core.api.app import create_app
    from core.hosts import ALLOWED_HOSTS_ENV, allowed_hosts, is_loopback
    from core.llm.client import DemoClient
    from core.store.db import Database, resolve_url

    from ..errors import UsageError

    allowed = allowed_hosts()  # a bad entry is refused before anything listens
    if args.workers < 1:
        raise UsageError(f"--workers {args.workers} is out of range: give 1 or more")
    backend = make_url(resolve_url(args.db)).get_backend_name()
    if args.workers > 1 and backend != "postgresql":
        # SQLite lets one process write at a time: workers would queue on its write lock instead
        # of adding throughput, and an in-memory database would be a different store per worker.
        raise UsageError(
            f"--workers {args.workers} needs PostgreSQL as the shared store (this is {backend}); "
            f"give --db postgresql://… or run one worker"
        )
    db = Database(args.db)
    sockets = [_listen(args.host, args.port, shared_port=args.workers > 1)]
    port = sockets[0].getsockname()[1]
    try:
        sockets += [_listen(args.host, port, shared_port=True) for _ in range(args.workers - 1)]
    except UsageError:
        for sock in sockets:
            sock.close()
        raise
    shown = make_url(db.url).render_as_string(hide_password=True)
    print(
        f"MemLens Service API on http://{args.host}:{port}/v1 — database {shown}"
        f"{' — demo model' if args.demo else ''}"
        f"{f' — {args.workers} workers' if args.workers > 1 else ''}",
        file=sys.stderr,
        flush=True,
    )
    if not allowed and not is_loopback(args.host.strip("[]").lower()):
        print(
            f"note: requests are answered only when their Host is localhost, 127.0.0.1 or ::1; set "
            f"{ALLOWED_HOSTS_ENV} to the names clients use for this machine (docs/security.md)",
            file=sys.stderr,
            flush=True,
        )
    options = dict(log_level=args.log_level, access_log=args.log_level == "debug", timeout_graceful_shutdown=5)
    if args.workers == 1:
        app = create_app(db, llm=DemoClient() if args.demo else None, allowed_hosts=allowed)
        uvicorn.Server(uvicorn.Config(app, **options)).run(sockets=sockets)
        return 0
    db.dispose()  # migrated; each worker opens its own connections
    os.environ[_WORKER_DB] = db.url
    if args.demo:
        os.environ[_WORKER_DEMO] = "1"
    return _supervise(sockets, options)


def register(sub) -> None:
    p = sub.add_parser("serve")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=_port, default=5001, help="0..65535 (0: any free port)")
    add_db_option(p)
    p.add_argument("--demo", action="store_true", help="answer every LLM node with the offline demo model")
    p.add_argument(
        "--workers", type=int, default=1, help="server processes on the one port (more than 1 needs a PostgreSQL --db)"
    )
    p.add_argument("--log-level", choices=("critical", "error", "warning", "info", "debug"), default="warning")
    p.set_defaults(func=cmd_serve)
