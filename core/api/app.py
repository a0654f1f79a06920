"""Dify's Service API over the flows in the MemLens store, plus the ledger of every message.

Point a Dify client at ``http://HOST:PORT/v1`` with a MemLens app key and it drives a MemLens flow
(for example an imported copy of its Dify app) exactly as it drove Dify, while the UI — which reads
the same database — shows what every LLM node's memory kept and dropped. The contract is
spec/dify-memory.md §3.6, §3.7 and §4:

* ``POST /v1/chat-messages`` — ``blocking`` (one JSON answer) or ``streaming`` (server-sent events
  in Dify's order: ``workflow_started``, ``node_started``/``node_finished`` per node, ``message``
  deltas, ``message_end``, ``workflow_finished``; ``error`` when the run fails; ``event: ping``
  while nothing else is sent). An empty ``conversation_id`` starts a conversation; an unknown one
  starts a new conversation too (Dify's advanced-chat rule). Every message is stored with
  ``parent_message_id = UUID_NIL``, so API conversations are linear, as in Dify.
* ``GET /v1/messages``, ``GET /v1/conversations``, ``DELETE /v1/conversations/{id}``,
  ``POST /v1/conversations/{id}/name``, ``GET /v1/conversations/{id}/variables`` and
  ``PUT /v1/conversations/{id}/variables/{variable_id}`` with Dify's fields, paging, type checks
  and messages; variable values are strings made with ``str()``, as Dify sends them.
* ``GET /v1/parameters``, ``/v1/meta``, ``/v1/info``, ``POST /v1/messages/{id}/feedbacks``,
  ``GET /v1/messages/{id}/suggested``, ``POST /v1/chat-messages/{task_id}/stop`` and
  ``POST /v1/files/upload`` — what Dify's client SDKs call besides chat.
* ``GET /v1/memlens/messages/{id}/ledger`` — the MemLens extension: each LLM node's ledger of that
  message (every earlier message, kept or not, with its reason and tokens), its budget and the
  prompt as sent.

A request whose ``Host`` is not this machine (localhost, 127.0.0.0/8, ::1) or a host in
``MEMLENS_ALLOWED_HOSTS`` is refused first, 403 ``forbidden`` (:mod:`core.hosts`: a page on another
site that points its name at this machine must not reach the API through the user's browser).

Authentication is ``Authorization: Bearer <app key>`` (:mod:`core.store.keys`). A key serves one
flow; a conversation belongs to the flow, to the ``user`` that started it and to the API (source
``api``): anything else answers 404 ``Conversation Not Exists.`` as Dify does. Errors are Dify's
bodies ``{"code", "message", "status"}``.

Turns run through :class:`core.service.sessions.ConversationService` — the path the UI uses — so a
conversation started here is in the store, and visible in the UI, as soon as its turn is saved.
Strings arriving here lose their NUL characters (Dify strips them from ``query``; PostgreSQL
cannot store them anywhere).
"""

from __future__ import annotations

from typing import Iterable

from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException

from core import __version__, hosts
from core.limits import MAX_REQUEST_BYTES, limit
from core.llm.client import LLMClient
from core.service.sessions import ConversationService
from core.store.db import Database

from . import errors
from .errors import ApiError, error_response
from .routes import register_routes
from .routes.chat import Tasks
from .routes.files import UPLOAD_PATH, upload_body_limit


class _BodyLimit:
    """Refuses a request body over the size limit with 413 before the app parses it: at once when
    ``Content-Length`` says so, else as soon as the chunks received pass the limit."""

    def __init__(self, app, max_bytes: int, per_path: dict | None = None):
        self.app = app
        self.max_bytes = max_bytes
        # Routes with a cap of their own (a callable, read per request): file uploads are held to
        # Dify's per-type file limits by their handler, not to the JSON body limit.
        self.per_path = per_path or {}

    def _cap(self, scope) -> int:
        own = self.per_path.get(scope.get("path", ""))
        return own() if own is not None else self.max_bytes

    def _error(self, cap: int) -> ApiError:
        return ApiError(
            413,
            "request_entity_too_large",
            f"The request body is larger than {cap:,} bytes, the server's limit (set by {limit('request_size').env}).",
        )

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        cap = self._cap(scope)
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > cap:
            return await error_response(self._error(cap))(scope, receive, send)
        received = 0

        async def limited_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body") or b"")
                if received > cap:
                    # FastAPI re-raises HTTP exceptions met while reading a body as they are.
                    raise StarletteHTTPException(413, self._error(cap).message)
            return message

        await self.app(scope, limited_receive, send)


def _host_refused(message: str):
    return error_response(ApiError(403, "forbidden", message))


def create_app(
    db: Database | str | None = None,
    *,
    llm: LLMClient | None = None,
    ping_interval: float = 10.0,
    max_body_bytes: int | None = None,
    allowed_hosts: Iterable[str] | None = None,
) -> FastAPI:
    """The Service API over the store at ``db`` (a :class:`Database` or URL; default: the UI's store).

    ``llm``: the model client turns run with (default: the UI's — configured models, the demo model
    where no key is set). ``ping_interval``: seconds of silence before a stream sends ``event: ping``.
    ``max_body_bytes``: the request size limit (default: ``core.limits.MAX_REQUEST_BYTES``).
    ``allowed_hosts``: the hosts answered besides loopback (default: ``MEMLENS_ALLOWED_HOSTS``; a bad
    entry there is a :class:`core.hosts.HostsError`).
    """
    database = db if isinstance(db, Database) else Database(db)
    app = FastAPI(
        title="MemLens Service API",
        version=__version__,
        description="Dify's Service API for chatflows (chat-messages, messages, conversations, "
        "conversation variables) over the flows in the MemLens store, and the "
        "MemLens ledger of every message. Authenticate with `Authorization: Bearer "
        "<app key>`; errors are `{code, message, status}`.",
    )
    app.state.service = ConversationService(database, llm)
    app.state.ping_interval = ping_interval

    app.add_middleware(
        _BodyLimit,
        max_bytes=MAX_REQUEST_BYTES if max_body_bytes is None else max_body_bytes,
        per_path={UPLOAD_PATH: upload_body_limit},
    )
    # Added last, so it runs first: a refused Host never reaches the body limit or a route. The
    # setting is read here, so a bad entry stops the server before it listens.
    app.add_middleware(
        hosts.HostCheck,
        answer=_host_refused,
        allowed=hosts.allowed_hosts() if allowed_hosts is None else tuple(allowed_hosts),
    )
    app.state.tasks = Tasks()
    app.state.uploads = {}
    errors.install(app)
    register_routes(app)

    def openapi() -> dict:
        # Request errors answer 400 in Dify's shape (documented per route), never FastAPI's 422.
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            for path in doc.get("paths", {}).values():
                for operation in path.values():
                    operation.get("responses", {}).pop("422", None)
            schemas = doc.get("components", {}).get("schemas", {})
            schemas.pop("HTTPValidationError", None)
            schemas.pop("ValidationError", None)
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi
    return app
