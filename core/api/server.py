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
  ``POST /v1/files/upload`` — what Dify's client SDKs call besides chat (:mod:`core.api.app_routes`).
* ``GET /v1/memlens/messages/{id}/ledger`` — the MemLens extension: each LLM node's ledger of that
  message (every earlier message, kept or not, with its reason and tokens), its budget and the
  prompt as sent.

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

import asyncio
import json
import logging
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Literal, Mapping

from fastapi import Body, Depends, FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import and_, or_, select
from starlette.exceptions import HTTPException as StarletteHTTPException

from core.analysis.why import MAX_PHRASE
from core.errors import MemLensError
from core.flow.nodes.tool_agent import GranularityError, check_granularity
from core.flow.runtime import RunError, TurnRecord
from core.flow.variables import VariableError, infer_type, is_valid, normalize_type
from core.limits import MAX_REQUEST_BYTES, LimitError, check_query, limit, too_deep
from core.llm.client import LLMClient
from core.model.conversation import UUID_NIL, Conversation, turn_label
from core.model.ledger import Ledger
from core.service.sessions import ConversationService
from core.store import repo
from core.store.db import Database, StoreError
from core.store.locks import ConversationBusyError
from core.store.models import ConversationRow, FlowVersionRow, TurnRow

from .app_routes import UPLOAD_PATH, Task, Tasks, finish_stopped, register as register_app_routes, upload_body_limit
from .base import (CONVERSATION_NOT_FOUND, DEFAULT_USER, MODE, SOURCE, ApiError, Caller, _authenticate, _clean, _errors,
                   _is_uuid, _owned, _require_owned, _ts, _user, invalid, not_found)
from .uploads import FileInputError, parse_files

log = logging.getLogger("memlens.api")

#: Dify's MAX_VARIABLE_SIZE default: a variable's shallow ``sys.getsizeof`` must not exceed it.
MAX_VARIABLE_SIZE = 200 * 1024
INTERNAL = ("The server encountered an internal error and was unable to complete your request. "
            "Either the server is overloaded or there is an error in the application.")


def _error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status)


# -- request and response shapes (they are also the OpenAPI document) -------------------------------

def _documented(**schema: Any):
    """A field's OpenAPI schema as Dify documents it (the handler does the checking, with Dify's messages)."""
    def apply(field_schema: dict) -> None:
        kept = {k: field_schema[k] for k in ("title", "description", "default") if k in field_schema}
        field_schema.clear()
        field_schema.update(kept, **schema)
    return apply


class ChatRequest(BaseModel):
    model_config = ConfigDict(json_schema_extra={"required": ["inputs", "query", "user"]})

    inputs: dict[str, Any] | None = Field(default=None, description="values for the start form's variables",
                                          json_schema_extra=_documented(type="object"))
    query: str | None = Field(default=None, description="the user's message (must not be empty)",
                              json_schema_extra=_documented(type="string", minLength=1))
    response_mode: Literal["blocking", "streaming"] | None = Field(
        default=None, description="blocking (default): one JSON answer; streaming: server-sent events")
    conversation_id: str | None = Field(
        default=None, description="empty or omitted: a new conversation; unknown: a new conversation too",
        json_schema_extra=_documented(anyOf=[{"type": "string", "format": "uuid"},
                                             {"type": "string", "maxLength": 0}, {"type": "null"}]))
    user: str | None = Field(default=None, description="the end user; conversations belong to their user",
                             json_schema_extra=_documented(type="string", minLength=1, maxLength=255))
    files: list[dict[str, Any]] | None = Field(
        default=None, description="files sent with the query: {type: document|image|audio|video|custom, "
                                  "transfer_method: remote_url|local_file, url | upload_file_id}; they stay with "
                                  "the message, and later turns' history carries them when the flow has file "
                                  "upload on")
    auto_generate_name: bool | None = Field(default=True, description="the name is the query's first 20 "
                                                                       "characters either way")
    chat_history_granularity: str | None = Field(
        default=None, description="history granularity for agent nodes: QUERY_ANSWER (query and final answer "
                                  "of each earlier turn) or ALL_MESSAGES (tool calls and results too); any case; "
                                  "omitted: the flow's setting, else QUERY_ANSWER",
        json_schema_extra=_documented(anyOf=[{"type": "string", "enum": ["QUERY_ANSWER", "ALL_MESSAGES"]},
                                             {"type": "null"}]))
    workflow_id: str | None = Field(default=None, description="a version id of this app's flow to run",
                                    json_schema_extra=_documented(anyOf=[{"type": "string", "format": "uuid"},
                                                                         {"type": "null"}]))


class UserBody(BaseModel):
    user: str | None = None


class RenameRequest(BaseModel):
    name: str | None = None
    auto_generate: bool | None = False
    user: str | None = None


class VariableUpdate(BaseModel):
    model_config = ConfigDict(json_schema_extra={"required": ["value"]})

    value: Any = Field(default=None, description="the new value; its type must match the variable's")
    user: str | None = None


class Usage(BaseModel):
    prompt_tokens: int
    prompt_unit_price: str
    prompt_price_unit: str
    prompt_price: str
    completion_tokens: int
    completion_unit_price: str
    completion_price_unit: str
    completion_price: str
    total_tokens: int
    total_price: str
    currency: str
    latency: float


class ChatMetadata(BaseModel):
    retriever_resources: list[dict[str, Any]]
    usage: Usage


class ChatResponse(BaseModel):
    event: Literal["message"]
    task_id: str
    id: str
    message_id: str
    conversation_id: str
    mode: str
    answer: str
    metadata: ChatMetadata
    created_at: int


class MessageItem(BaseModel):
    id: str
    conversation_id: str
    parent_message_id: str | None
    inputs: dict[str, Any]
    query: str
    answer: str
    message_files: list[dict[str, Any]]
    feedback: dict[str, Any] | None
    retriever_resources: list[dict[str, Any]]
    agent_thoughts: list[dict[str, Any]]
    created_at: int
    status: str
    error: str | None
    extra_contents: list[dict[str, Any]]


class MessageList(BaseModel):
    limit: int
    has_more: bool
    data: list[MessageItem]


class ConversationItem(BaseModel):
    id: str
    name: str
    inputs: dict[str, Any]
    status: str
    introduction: str
    created_at: int
    updated_at: int


class ConversationList(BaseModel):
    limit: int
    has_more: bool
    data: list[ConversationItem]


class VariableItem(BaseModel):
    id: str
    name: str
    value_type: str
    value: str = Field(description="str() of the value, as Dify sends it")
    description: str
    created_at: int
    updated_at: int


class VariableList(BaseModel):
    limit: int
    has_more: bool
    data: list[VariableItem]


class LedgerEntryOut(BaseModel):
    ref: str | int
    turn: int
    turn_label: str = ""  # the turn's place on its thread, and its sibling: "turn 6 · 2/3"
    role: str
    tokens: int
    kept: bool
    reason: str
    kind: str


class LedgerOut(BaseModel):
    turn: int
    entries: list[LedgerEntryOut]
    budget: int | None
    budget_note: str
    prompt_tokens: int
    history_tokens: int
    context_size: int | None
    exceeds_context: bool
    config: dict[str, Any]


class PromptMessageOut(BaseModel):
    role: str
    content: str
    origin: str
    tokens: int


class NodeLedger(BaseModel):
    node_id: str
    title: str
    type: str
    status: str
    error: str | None
    model: str | None
    ledger: LedgerOut | None
    prompt: list[PromptMessageOut] | None
    reply: str | None
    usage: dict[str, Any] | None


class MessageLedger(BaseModel):
    message_id: str
    turn_label: str = ""
    conversation_id: str
    query: str
    answer: str
    status: str
    dialogue_count: int
    nodes: list[NodeLedger]


class WhyResult(BaseModel):
    phrase: str
    mentions: list[dict]
    elsewhere: list[dict]
    losses: list[dict]
    sentences: list[str]


def conversation_name(query: str) -> str:
    """Dify's name for a new conversation: the query, cut to 20 characters + "…" when longer."""
    query = query or "New conversation"
    return (query[:20] + "…") if len(query) > 20 else query


# -- chat -------------------------------------------------------------------------------------------

@dataclass
class ChatArgs:
    user: str
    query: str
    inputs: dict
    streaming: bool
    conversation_id: str
    workflow_id: str | None
    granularity: str | None = None
    files: tuple = ()


def _chat_args(body: ChatRequest, uploads: Mapping[str, Any] | None = None, flow_id: str | None = None) -> ChatArgs:
    user = _user(body.user, required=True)
    if body.inputs is None:
        raise invalid("inputs is required", "inputs")
    query = _clean(body.query, "query") if body.query is not None else ""
    if not query:
        raise invalid("query is required", "query")
    try:
        check_query(query)
    except LimitError as e:
        raise invalid(str(e), "query") from None
    conversation_id = body.conversation_id or ""
    if conversation_id and not _is_uuid(conversation_id):
        raise invalid("conversation_id must be a valid UUID", "conversation_id")
    workflow_id = body.workflow_id or None
    if workflow_id is not None and not _is_uuid(workflow_id):
        raise ApiError(400, "bad_request", f"Invalid workflow_id format: '{workflow_id}'.")
    granularity = None
    if body.chat_history_granularity is not None:
        try:
            granularity = check_granularity(body.chat_history_granularity, "chat_history_granularity")
        except GranularityError:
            raise invalid("chat_history_granularity must be QUERY_ANSWER or ALL_MESSAGES",
                          "chat_history_granularity") from None
    try:
        files = parse_files(body.files, uploads, flow_id)
    except FileInputError as e:
        raise invalid(str(e), "files") from None
    return ChatArgs(user=user, query=query, inputs=_clean(body.inputs, "inputs"),
                    streaming=body.response_mode == "streaming", conversation_id=conversation_id,
                    workflow_id=workflow_id, granularity=granularity, files=files)


def _flow_version_for(caller: Caller, workflow_id: str | None) -> str | None:
    if workflow_id is None:
        return None
    try:
        version = repo.get_flow_version(caller.db, workflow_id)
    except StoreError:
        version = None
    if version is None or version.flow_id != caller.flow_id:
        raise not_found(f"Workflow not found with id: {workflow_id}")
    return version.id


def _run_chat(caller: Caller, args: ChatArgs, on_event) -> tuple[TurnRecord, str]:
    """Run one turn (starting a conversation when needed); all-or-nothing on bad input."""
    flow_version_id = _flow_version_for(caller, args.workflow_id)
    row = _owned(caller, args.conversation_id, args.user) if args.conversation_id else None
    created = row is None
    if created:
        info = caller.service.start(caller.flow_id, user_id=args.user, name=conversation_name(args.query),
                                    source=SOURCE, inputs=args.inputs)
        conversation_id = info.id
    else:
        conversation_id = row.id
    try:
        record = caller.service.send(conversation_id, args.query, args.inputs, parent_id=UUID_NIL,
                                     flow_version_id=flow_version_id, on_event=on_event,
                                     granularity=args.granularity, files=args.files)
    except RunError as e:
        if created:
            caller.service.delete(conversation_id)
        raise invalid(str(e)) from None
    return record, conversation_id


def dify_usage(usage: dict | None, latency: float) -> dict:
    """A run's token usage in Dify's shape (MemLens does not price calls: prices are "0")."""
    usage = usage or {}
    prompt = int(usage.get("prompt_tokens", 0))
    completion = int(usage.get("completion_tokens", 0))
    return {"prompt_tokens": prompt, "prompt_unit_price": "0", "prompt_price_unit": "0", "prompt_price": "0",
            "completion_tokens": completion, "completion_unit_price": "0", "completion_price_unit": "0",
            "completion_price": "0", "total_tokens": int(usage.get("total_tokens", prompt + completion)),
            "total_price": "0", "currency": "USD", "latency": round(latency, 6)}


def _sse(event: dict) -> str:
    return f"data: {json.dumps(event, ensure_ascii=False, default=str)}\n\n"


PING = "event: ping\n\n"


def _dify_event(event: dict, started: float) -> dict:
    """A runtime event as Dify streams it (message chunks carry ``id``; usage in Dify's shape)."""
    name = event.get("event")
    if name == "message":
        event = {**event, "id": event.get("message_id")}
    elif name == "message_end":
        metadata = dict(event.get("metadata") or {})
        metadata["usage"] = dify_usage(metadata.get("usage"), time.perf_counter() - started)
        metadata.setdefault("retriever_resources", [])
        event = {**event, "metadata": metadata}
    return event


async def _chat_streaming(caller: Caller, args: ChatArgs, ping_interval: float, tasks: Tasks):
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    started = time.perf_counter()
    task = Task(user=args.user, flow_id=caller.flow_id,
                wake=lambda: loop.call_soon_threadsafe(queue.put_nowait, ("stop", None)))
    ids: dict = {}

    def put(item: tuple) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, item)

    def on_event(event: dict) -> None:
        if task.stop.is_set():
            return  # stopped: nothing more reaches the client
        event = _dify_event(event, started)
        if event.get("event") == "workflow_started":
            ids.update(task_id=event.get("task_id"), message_id=event.get("message_id"),
                       conversation_id=event.get("conversation_id"), created_at=event.get("created_at"))
            tasks.add(ids["task_id"], task)
        put(("event", event))

    def work() -> None:
        try:
            record, _ = _run_chat(caller, args, on_event)
            if task.stop.is_set():
                finish_stopped(caller.db, record.id, task)
            put(("done", record))
        except BaseException as e:  # handed to the response: before the first event it is the answer
            put(("error", e))
        finally:
            if ids.get("task_id"):
                tasks.remove(ids["task_id"])

    threading.Thread(target=work, name="memlens-chat", daemon=True).start()
    first = await queue.get()  # the run starts with workflow_started; bad input fails before it
    if first[0] == "error":
        task.stream_closed.set()
        error = first[1]
        if isinstance(error, ApiError):
            return _error_response(error)
        if isinstance(error, MemLensError):
            return _error_response(_from_memlens(error))
        log.error("chat-messages failed", exc_info=error)
        return _error_response(ApiError(500, "internal_server_error", INTERNAL))

    async def frames():
        item = first
        try:
            while True:
                kind, payload = item
                if kind == "event":
                    if payload.get("event") == "message":
                        task.sent.append(str(payload.get("answer") or ""))
                    yield _sse(payload)
                elif kind == "stop":  # the client asked to stop: end the answer here
                    yield _sse({"event": "message_end", "task_id": ids.get("task_id"), "id": ids.get("message_id"),
                                "message_id": ids.get("message_id"), "conversation_id": ids.get("conversation_id"),
                                "created_at": ids.get("created_at"), "files": [],
                                "metadata": {"usage": dify_usage(None, time.perf_counter() - started),
                                             "retriever_resources": []}})
                    return
                elif kind == "done":
                    return
                else:  # a failure after the stream started: Dify's error event, then the end
                    log.error("chat-messages failed while streaming", exc_info=payload)
                    error = payload if isinstance(payload, ApiError) else \
                        ApiError(500, "internal_server_error", INTERNAL)
                    yield _sse({"event": "error", "status": error.status, "code": error.code,
                                "message": error.message})
                    return
                while True:
                    try:
                        item = await asyncio.wait_for(queue.get(), ping_interval)
                        break
                    except asyncio.TimeoutError:
                        yield PING
        finally:
            task.stream_closed.set()

    return StreamingResponse(frames(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _chat_blocking(caller: Caller, args: ChatArgs) -> dict:
    started = time.perf_counter()
    task: dict = {}

    def on_event(event: dict) -> None:
        if event.get("event") == "workflow_started":
            task["id"] = event.get("task_id")

    record, conversation_id = _run_chat(caller, args, on_event)
    if not record.succeeded:
        raise invalid(f"Run failed: {record.error}")
    return {"event": "message", "task_id": task.get("id") or record.id, "id": record.id, "message_id": record.id,
            "conversation_id": conversation_id, "mode": MODE, "answer": record.answer,
            "metadata": {"retriever_resources": [], "usage": dify_usage(record.usage, time.perf_counter() - started)},
            "created_at": _ts(record.created_at)}


# -- messages and conversations ---------------------------------------------------------------------

# Dify's message statuses. A running turn is "normal" with an empty answer, as Dify's message row
# is while its workflow runs; a turn whose process was killed is an "error" saying so.
_STATUS = {repo.SUCCEEDED: "normal", repo.FAILED: "error", repo.RUNNING: "normal", repo.INTERRUPTED: "error"}


def _message_item(row: TurnRow, feedback: dict | None = None) -> dict:
    return {"id": row.id, "conversation_id": row.conversation_id, "parent_message_id": row.parent_id,
            "inputs": dict(row.inputs or {}), "query": row.query, "answer": row.answer, "message_files": [],
            "feedback": feedback, "retriever_resources": [], "agent_thoughts": [], "created_at": _ts(row.created_at),
            "status": _STATUS.get(row.status, row.status), "error": row.error, "extra_contents": []}


def list_messages(caller: Caller, conversation_id: str, user: str, first_id: str | None, limit: int) -> dict:
    if not conversation_id:
        return {"limit": limit, "has_more": False, "data": []}
    row = _require_owned(caller, conversation_id, user)
    repo.settle_interrupted(caller.db, row.id)
    ratings = repo.feedbacks(caller.db, row.id)
    with caller.db.session(write=False) as s:
        q = select(TurnRow).where(TurnRow.conversation_id == row.id)
        if first_id:
            first = None if not _is_uuid(first_id) else s.scalars(select(TurnRow.seq).where(TurnRow.conversation_id == row.id,
                                                        TurnRow.id == first_id)).first()
            if first is None:
                raise not_found("First Message Not Exists.")
            q = q.where(TurnRow.seq < first)
        rows = s.scalars(q.order_by(TurnRow.seq.desc()).limit(limit + 1)).all()
        has_more = len(rows) > limit
        items = [_message_item(r, next(({"rating": f["rating"]} for f in ratings.get(r.id, [])
                                        if f["user_id"] == user), None)) for r in reversed(rows[:limit])]
    return {"limit": limit, "has_more": has_more, "data": items}


def _conversation_item(row: ConversationRow) -> dict:
    return {"id": row.id, "name": row.name, "inputs": dict(row.inputs or {}), "status": "normal",
            "introduction": "", "created_at": _ts(row.created_at), "updated_at": _ts(row.updated_at)}


def list_conversations(caller: Caller, user: str, last_id: str | None, limit: int, sort_by: str) -> dict:
    descending = sort_by.startswith("-")
    column = getattr(ConversationRow, sort_by.lstrip("-"))
    scope = (select(ConversationRow)
             .join(FlowVersionRow, FlowVersionRow.id == ConversationRow.flow_version_id)
             .where(ConversationRow.user_id == user, ConversationRow.source == SOURCE,
                    FlowVersionRow.flow_id == caller.flow_id))
    with caller.db.session(write=False) as s:
        q = scope
        if last_id:
            last = s.scalars(scope.where(ConversationRow.id == last_id)).first() if _is_uuid(last_id) else None
            if last is None:
                raise not_found("Last Conversation Not Exists.")
            value = getattr(last, sort_by.lstrip("-"))
            # Ties are broken by id, so a page never skips a conversation with the same timestamp.
            if descending:
                q = q.where(or_(column < value, and_(column == value, ConversationRow.id < last.id)))
            else:
                q = q.where(or_(column > value, and_(column == value, ConversationRow.id > last.id)))
        order = (column.desc(), ConversationRow.id.desc()) if descending else (column.asc(), ConversationRow.id.asc())
        rows = s.scalars(q.order_by(*order).limit(limit + 1)).all()
        return {"limit": limit, "has_more": len(rows) > limit, "data": [_conversation_item(r) for r in rows[:limit]]}


def rename(caller: Caller, conversation_id: str, body: RenameRequest) -> dict:
    user = _user(body.user)
    name = _clean(body.name, "name") if body.name is not None else ""
    auto = bool(body.auto_generate)
    if not auto and not name:
        raise invalid("name is required when auto_generate is false", "name")
    row = _require_owned(caller, conversation_id, user)
    if auto:
        with caller.db.session() as s:
            first = s.scalars(select(TurnRow.query).where(TurnRow.conversation_id == row.id)
                              .order_by(TurnRow.seq).limit(1)).first()
        if first is None:
            raise not_found("Message Not Exists.")
        name = conversation_name(first)
    if len(name) > 255:
        raise invalid("name must be at most 255 characters", "name")
    caller.service.rename(row.id, name)
    renamed = _require_owned(caller, row.id, user)
    return _conversation_item(renamed)


def delete(caller: Caller, conversation_id: str, user: str) -> None:
    row = _require_owned(caller, conversation_id, user)
    try:
        caller.service.delete(row.id)
    except StoreError:  # deleted by a concurrent request
        raise not_found(CONVERSATION_NOT_FOUND) from None


# -- variables --------------------------------------------------------------------------------------

def _exposed_type(value_type: str) -> str:
    return "number" if value_type in ("integer", "float") else value_type


def _variable_item(v: repo.StoredVariable, updated_at: float | None = None) -> dict:
    return {"id": v.id, "name": v.name, "value_type": _exposed_type(v.value_type), "value": str(v.value),
            "description": v.description or "", "created_at": _ts(v.created_at),
            "updated_at": _ts(updated_at if updated_at is not None else v.updated_at)}


def list_variables(caller: Caller, conversation_id: str, user: str, last_id: str | None, limit: int,
                   variable_name: str | None) -> dict:
    row = _require_owned(caller, conversation_id, user)
    stored = repo.get_variables(caller.db, row.id)  # created_at ascending (then id)
    if variable_name:
        needle = variable_name.lower()
        stored = [v for v in stored if needle in v.name.lower()]
    if last_id:
        last = next((v for v in stored if v.id == last_id), None)
        if last is None:
            raise invalid(f"last_id {last_id!r} is not a variable of this conversation", "last_id")
        # Dify pages by created_at alone: strictly newer rows (rows created together share it).
        stored = [v for v in stored if v.created_at > last.created_at]
    page = stored[: limit]
    return {"limit": limit, "has_more": len(stored) > limit, "data": [_variable_item(v) for v in page]}


def update_variable(caller: Caller, conversation_id: str, variable_id: str, body: VariableUpdate) -> dict:
    user = _user(body.user)
    if "value" not in body.model_fields_set:
        raise invalid("value is required", "value")
    row = _require_owned(caller, conversation_id, user)
    stored = next((v for v in repo.get_variables(caller.db, row.id) if v.id == variable_id), None)
    if stored is None:
        raise not_found("Conversation Variable Not Exists.")
    value = _clean(body.value, "value")
    try:
        expected = normalize_type(stored.value_type)
    except VariableError as e:
        raise invalid(str(e)) from None
    if not is_valid(expected, value):
        raise ApiError(400, "bad_request", f"Type mismatch: variable '{stored.name}' expects {expected}, "
                                           f"but got {infer_type(value)} type")
    if sys.getsizeof(value) > MAX_VARIABLE_SIZE:
        raise invalid(f"variable '{stored.name}' is too large: its size exceeds {MAX_VARIABLE_SIZE} bytes", "value")
    with caller.db.conversation_lock(row.id):  # after a turn running on the conversation, never under it
        stored = next((v for v in repo.get_variables(caller.db, row.id) if v.id == variable_id), stored)
        info = caller.service.info(row.id)
        repo.write_variable_changes(caller.db, row.id, [{"name": stored.name, "old": stored.value, "new": value,
                                                         "operation": "edit", "node_id": "user"}],
                                    turn_id=info.active_turn_id, turn_seq=info.turn_count or None)
    updated = next(v for v in repo.get_variables(caller.db, row.id) if v.id == variable_id)
    return _variable_item(updated, updated_at=time.time())


# -- the ledger extension ---------------------------------------------------------------------------

def _ledger_json(ledger: Ledger | Mapping[str, Any] | None, conversation: Conversation | None = None) -> dict | None:
    if ledger is None:
        return None
    data = ledger.to_dict() if isinstance(ledger, Ledger) else dict(ledger)
    labels = {}
    if isinstance(ledger, Ledger) and conversation is not None:
        labels = {(e.position, e.index): turn_label(conversation, e.position) for e in ledger.entries}
    positions = [(e.position, e.index) for e in ledger.entries] if isinstance(ledger, Ledger) else []
    entries = [{"ref": e.get("ref"), "turn": e.get("turn"),
                "turn_label": labels.get(positions[i], "") if i < len(positions) else "",
                "role": e.get("role"), "tokens": e.get("tokens"),
                "kept": bool(e.get("kept")), "reason": e.get("reason"), "kind": e.get("kind") or ""}
               for i, e in enumerate(data.get("entries") or [])]
    return {"turn": data.get("turn"), "entries": entries, "budget": data.get("budget"),
            "budget_note": data.get("budget_note") or "", "prompt_tokens": data.get("prompt_tokens") or 0,
            "history_tokens": data.get("history_tokens") or 0, "context_size": data.get("context_size"),
            "exceeds_context": bool(data.get("exceeds_context")), "config": dict(data.get("config") or {})}


def _prompt_json(prompt: Any) -> list[dict] | None:
    if prompt is None:
        return None
    return [m.to_dict() if hasattr(m, "to_dict") else dict(m) for m in prompt]


def message_ledger(caller: Caller, message_id: str, user: str) -> dict:
    if not _is_uuid(message_id):
        raise not_found("Message Not Exists.")
    def find() -> tuple | None:
        with caller.db.session(write=False) as s:
            turn = s.get(TurnRow, message_id)
            return None if turn is None else (turn.conversation_id, turn.query, turn.answer, turn.status,
                                              turn.dialogue_count)

    found = find()
    if found is None or _owned(caller, found[0], user) is None:
        raise not_found("Message Not Exists.")
    if found[3] == repo.RUNNING and repo.settle_interrupted(caller.db, found[0]):
        found = find()
    conversation_id, query, answer, status, dialogue_count = found
    conversation = caller.service.conversation(conversation_id)
    nodes = []
    for run in caller.service.node_runs(conversation, message_id):
        if run.get("type") != "llm":
            continue
        nodes.append({"node_id": run.get("node_id"), "title": run.get("title") or "", "type": run.get("type"),
                      "status": run.get("status") or "", "error": run.get("error"), "model": run.get("model"),
                      "ledger": _ledger_json(run.get("ledger"), conversation), "prompt": _prompt_json(run.get("prompt")),
                      "reply": run.get("reply"), "usage": run.get("usage")})
    position = conversation.tree.position.get(message_id)
    return {"message_id": message_id, "turn_label": turn_label(conversation, position) if position is not None else "",
            "conversation_id": conversation_id, "query": query, "answer": answer,
            "status": _STATUS.get(status, status), "dialogue_count": dialogue_count, "nodes": nodes}


def where_did_it_go(caller: Caller, conversation_id: str, user: str, phrase: str) -> dict:
    """:func:`core.analysis.why.where_did_it_go` on the conversation's active thread, per LLM node of its flow."""
    from core.analysis.why import node_subjects
    from core.analysis.why import where_did_it_go as follow

    row = _require_owned(caller, conversation_id, user)
    service = caller.service
    info = service.info(row.id)
    conversation = service.conversation(row.id)
    if not conversation.turns:
        raise invalid("the conversation has no message yet", "q")
    flow = service.flow(info.flow_version_id)
    thread = [conversation.tree.position[t] for t in service.active_thread(row.id, conversation)]
    subjects = node_subjects(flow, conversation, fidelity=info.meta.get("fidelity"),
                             overrides=info.meta.get("memory_overrides") or None)
    return follow(conversation, phrase, subjects, thread=thread).to_json()


# -- the application --------------------------------------------------------------------------------

def _from_memlens(error: MemLensError) -> ApiError:
    if isinstance(error, ConversationBusyError):
        return ApiError(error.status, error.code, str(error))
    if isinstance(error, StoreError) and str(error).startswith("no conversation"):
        return not_found(CONVERSATION_NOT_FOUND)
    return invalid(str(error))


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
        return ApiError(413, "request_entity_too_large",
                        f"The request body is larger than {cap:,} bytes, the server's limit "
                        f"(set by {limit('request_size').env}).")

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        cap = self._cap(scope)
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > cap:
            return await _error_response(self._error(cap))(scope, receive, send)
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


def _validation_message(error: RequestValidationError) -> ApiError:
    first = (error.errors() or [{}])[0]
    if first.get("type") == "json_invalid":
        return ApiError(400, "bad_request", "The request body is not valid JSON.")
    loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path", "header")]
    field = loc[0] if loc else None
    message = first.get("msg") or "invalid request"
    where = ".".join(loc)
    return invalid(f"{where}: {message}" if where else message, field)


def create_app(db: Database | str | None = None, *, llm: LLMClient | None = None,
               ping_interval: float = 10.0, max_body_bytes: int | None = None) -> FastAPI:
    """The Service API over the store at ``db`` (a :class:`Database` or URL; default: the UI's store).

    ``llm``: the model client turns run with (default: the UI's — configured models, the demo model
    where no key is set). ``ping_interval``: seconds of silence before a stream sends ``event: ping``.
    ``max_body_bytes``: the request size limit (default: ``core.limits.MAX_REQUEST_BYTES``).
    """
    database = db if isinstance(db, Database) else Database(db)
    app = FastAPI(title="MemLens Service API",
                  version="1",
                  description="Dify's Service API for chatflows (chat-messages, messages, conversations, "
                              "conversation variables) over the flows in the MemLens store, and the "
                              "MemLens ledger of every message. Authenticate with `Authorization: Bearer "
                              "<app key>`; errors are `{code, message, status}`.")
    app.state.service = ConversationService(database, llm)
    app.state.ping_interval = ping_interval

    app.add_middleware(_BodyLimit, max_bytes=MAX_REQUEST_BYTES if max_body_bytes is None else max_body_bytes,
                       per_path={UPLOAD_PATH: upload_body_limit})

    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, error: ApiError):
        return _error_response(error)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request: Request, error: RequestValidationError):
        return _error_response(_validation_message(error))

    @app.exception_handler(MemLensError)
    async def _memlens_error(_request: Request, error: MemLensError):
        return _error_response(_from_memlens(error))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, error: StarletteHTTPException):
        if error.status_code == 404:
            return _error_response(not_found("The requested URL was not found on the server. If you entered the "
                                             "URL manually please check your spelling and try again."))
        if error.status_code == 405:
            return _error_response(ApiError(405, "method_not_allowed",
                                            "The method is not allowed for the requested URL."))
        if isinstance(error.__cause__, RecursionError):  # a body too deep for the JSON parser itself
            return _error_response(invalid(too_deep("The request body")))
        code = {400: "bad_request", 413: "request_entity_too_large"}.get(error.status_code, "http_error")
        return _error_response(ApiError(error.status_code, code, str(error.detail)))

    @app.exception_handler(Exception)
    async def _internal(_request: Request, error: Exception):
        log.error("request failed", exc_info=error)
        return _error_response(ApiError(500, "internal_server_error", INTERNAL))

    # For text/event-stream, OpenAPI 3.1's schema describes one event as a client parses it.
    event_schema = {"type": "object", "required": ["event"], "properties": {
        "event": {"type": "string", "description": "message for data frames; ping for keep-alives"},
        "data": {"type": "string", "contentMediaType": "application/json",
                 "description": "one JSON object: {event, conversation_id, message_id, task_id, created_at, …} "
                                "with event workflow_started, node_started, node_finished, message, "
                                "message_end, workflow_finished or error"}}}
    chat_doc = {200: {"description": "blocking: the answer; streaming: Dify's server-sent events",
                      "content": {"text/event-stream": {"schema": event_schema}}},
                **_errors(400, 401, 404)}

    @app.post("/v1/chat-messages", response_model=ChatResponse, responses=chat_doc, tags=["chat"],
              summary="Send a chat message (blocking or streaming)")
    async def chat_messages(body: ChatRequest, caller: Caller = Depends(_authenticate)):
        args = _chat_args(body, app.state.uploads, caller.flow_id)
        if args.streaming:
            return await _chat_streaming(caller, args, app.state.ping_interval, app.state.tasks)
        return await run_in_threadpool(_chat_blocking, caller, args)

    @app.get("/v1/messages", response_model=MessageList, responses=_errors(400, 401, 404), tags=["chat"],
             summary="A conversation's messages, every branch, oldest first, newest page first")
    def get_messages(caller: Caller = Depends(_authenticate),
                     conversation_id: str = Query(default="", description="empty: an empty list"),
                     user: str | None = Query(default=None), first_id: str | None = Query(default=None),
                     limit: int = Query(default=20, ge=1, le=100)):
        return list_messages(caller, conversation_id, _user(user), first_id, limit)

    @app.get("/v1/conversations", response_model=ConversationList, responses=_errors(400, 401, 404),
             tags=["conversations"], summary="The user's conversations with this app")
    def get_conversations(caller: Caller = Depends(_authenticate), user: str | None = Query(default=None),
                          last_id: str | None = Query(default=None), limit: int = Query(default=20, ge=1, le=100),
                          sort_by: Literal["created_at", "-created_at", "updated_at", "-updated_at"] =
                          Query(default="-updated_at")):
        return list_conversations(caller, _user(user), last_id, limit, sort_by)

    @app.delete("/v1/conversations/{conversation_id}", status_code=204, response_class=Response,
                responses=_errors(400, 401, 404), tags=["conversations"], summary="Delete a conversation")
    def delete_conversation(conversation_id: str, body: UserBody | None = Body(default=None),
                            caller: Caller = Depends(_authenticate)):
        delete(caller, conversation_id, _user(body.user if body else None))
        return Response(status_code=204)

    @app.post("/v1/conversations/{conversation_id}/name", response_model=ConversationItem,
              responses=_errors(400, 401, 404), tags=["conversations"], summary="Rename a conversation")
    def rename_conversation(conversation_id: str, body: RenameRequest, caller: Caller = Depends(_authenticate)):
        return rename(caller, conversation_id, body)

    @app.get("/v1/conversations/{conversation_id}/variables", response_model=VariableList,
             responses=_errors(400, 401, 404), tags=["conversations"],
             summary="A conversation's variables (values as str(), created_at ascending)")
    def get_variables(conversation_id: str, caller: Caller = Depends(_authenticate),
                      user: str | None = Query(default=None), last_id: str | None = Query(default=None),
                      limit: int = Query(default=20, ge=1, le=100),
                      variable_name: str | None = Query(default=None, min_length=1, max_length=255,
                                                        pattern=r"^[A-Za-z0-9_.\-]+$")):
        return list_variables(caller, conversation_id, _user(user), last_id, limit, variable_name)

    @app.put("/v1/conversations/{conversation_id}/variables/{variable_id}", response_model=VariableItem,
             responses=_errors(400, 401, 404), tags=["conversations"],
             summary="Set a conversation variable (type-checked as Dify does)")
    def put_variable(conversation_id: str, variable_id: str, body: VariableUpdate,
                     caller: Caller = Depends(_authenticate)):
        return update_variable(caller, conversation_id, variable_id, body)

    register_app_routes(app)

    @app.get("/v1/memlens/messages/{message_id}/ledger", response_model=MessageLedger,
             responses=_errors(400, 401, 404), tags=["memlens"],
             summary="MemLens extension: what each LLM node's memory kept and dropped for this message")
    def get_ledger(message_id: str, caller: Caller = Depends(_authenticate), user: str | None = Query(default=None)):
        return message_ledger(caller, message_id, _user(user))

    @app.get("/v1/memlens/conversations/{conversation_id}/why", response_model=WhyResult,
             responses=_errors(400, 401, 404), tags=["memlens"],
             summary="MemLens extension: where did a word or phrase go — the turn that said it and, per LLM "
                     "node, the first turn whose context no longer holds it, and why")
    def get_why(conversation_id: str, caller: Caller = Depends(_authenticate), user: str | None = Query(default=None),
                q: str = Query(min_length=1, max_length=MAX_PHRASE)):
        return where_did_it_go(caller, conversation_id, _user(user), q)

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


__all__ = ["create_app", "ApiError", "Caller", "conversation_name", "dify_usage", "DEFAULT_USER", "SOURCE"]
