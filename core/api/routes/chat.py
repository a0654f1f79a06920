"""``POST /v1/chat-messages`` — ``blocking`` (one JSON answer) or ``streaming`` (server-sent events in
Dify's order: ``workflow_started``, ``node_started``/``node_finished`` per node, ``message`` deltas,
``message_end``, ``workflow_finished``; ``error`` when the run fails; ``event: ping`` while nothing
else is sent) — and ``POST /v1/chat-messages/{task_id}/stop``, which ends a streaming answer — with
``workflow_finished`` (status ``stopped``) then ``message_end``, as Dify's advanced chat does, or
``message_end`` alone for an app without a graph — and stores the turn as ``stopped`` with the answer
sent so far. A basic Chatbot's
stream (a flow from an ``app.mode: chat`` export) has no workflow or node events, as in Dify; nor
has an Agent app's (``agent-chat``), whose answer comes in ``agent_message`` events and which, as
Dify's, refuses blocking mode (400 ``invalid_param``). Its run's thought comes as Dify's function-calling
runner sends it: an ``agent_thought`` with no text before the first answer chunk, and the same thought
with the whole answer before ``message_end``.

An empty ``conversation_id`` starts a conversation; an unknown one starts a new conversation too
(Dify's advanced-chat rule), except for a basic Chatbot or an Agent app, where it is 404
``Conversation Not Exists.`` as in Dify. Every message is stored with ``parent_message_id = UUID_NIL``, so API
conversations are linear, as in Dify.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from core.errors import MemLensError
from core.flow.agent_chat import AGENT_CHAT, BLOCKING_REFUSED
from core.flow.basic_chat import BASIC_CHAT
from core.flow.errors import RunError
from core.flow.records import TurnRecord
from core.model.conversation import UUID_NIL
from core.store import repo
from core.store.errors import StoreError

from ..caller import SOURCE, Caller, authenticate, owned
from ..errors import CONVERSATION_NOT_FOUND, INTERNAL, ApiError, error_response, from_memlens, invalid, log, not_found
from ..schemas import (
    ChatArgs,
    ChatRequest,
    ChatResponse,
    ResultBody,
    StopRequest,
    chat_args,
    check_user,
    error_responses,
    ts,
)
from .conversations import conversation_name
from .messages import agent_thought

#: The app modes without a graph: no workflow events, and an unknown conversation id is 404.
_NO_GRAPH = (BASIC_CHAT, AGENT_CHAT)


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
    row = owned(caller, args.conversation_id, args.user) if args.conversation_id else None
    if row is None and args.conversation_id and caller.flow.app_mode in _NO_GRAPH:
        raise not_found(CONVERSATION_NOT_FOUND)  # only a Chatflow starts a new one for an unknown id
    created = row is None
    if created:
        info = caller.service.start(
            caller.flow_id, user_id=args.user, name=conversation_name(args.query), source=SOURCE, inputs=args.inputs
        )
        conversation_id = info.id
    else:
        conversation_id = row.id
    try:
        record = caller.service.send(
            conversation_id,
            args.query,
            args.inputs,
            parent_id=UUID_NIL,
            flow_version_id=flow_version_id,
            on_event=on_event,
            granularity=args.granularity,
            files=args.files,
        )
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
    return {
        "prompt_tokens": prompt,
        "prompt_unit_price": "0",
        "prompt_price_unit": "0",
        "prompt_price": "0",
        "completion_tokens": completion,
        "completion_unit_price": "0",
        "completion_price_unit": "0",
        "completion_price": "0",
        "total_tokens": int(usage.get("total_tokens", prompt + completion)),
        "total_price": "0",
        "currency": "USD",
        "latency": round(latency, 6),
    }


def _sse(event: dict) -> str:
    return f"data: {json.dumps(event, ensure_ascii=False, default=str)}\n\n"


PING = "event: ping\n\n"
#: The events of a Chatflow's run that a basic Chatbot's stream does not have.
WORKFLOW_EVENTS = ("workflow_", "node_")


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


def _agent_events(event: dict, thought: list[str], put) -> None:
    """An Agent app's answer chunk (``message``) or end, as Dify streams them: ``agent_message``
    chunks, its thought (``agent_thought``) announced with the first one and sent whole before
    ``message_end`` (announced then when no chunk came). ``thought`` holds the answer so far."""
    ids = {k: event.get(k) for k in ("task_id", "message_id", "conversation_id", "created_at")}

    def send_thought(text: str) -> None:
        put(
            (
                "event",
                {"event": "agent_thought", **ids, **agent_thought(str(ids["message_id"]), text), "message_files": []},
            )
        )

    if event["event"] == "message":
        if not thought:
            send_thought("")
            thought.append("")
        thought.append(str(event.get("answer") or ""))
        put(("event", {**event, "event": "agent_message"}))
        return
    send_thought("".join(thought))
    put(("event", event))


async def _chat_streaming(caller: Caller, args: ChatArgs, ping_interval: float, tasks: Tasks):
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    started = time.perf_counter()
    task = Task(
        user=args.user, flow_id=caller.flow_id, wake=lambda: loop.call_soon_threadsafe(queue.put_nowait, ("stop", None))
    )
    ids: dict = {}
    no_graph = caller.flow.app_mode in _NO_GRAPH
    agent = caller.flow.app_mode == AGENT_CHAT
    thought: list[str] = []  # an Agent app's answer so far, once its thought is announced

    def put(item: tuple) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, item)

    def on_event(event: dict) -> None:
        if task.stop.is_set():
            return  # stopped: nothing more reaches the client
        event = _dify_event(event, started)
        if event.get("event") == "workflow_started":
            ids.update(
                task_id=event.get("task_id"),
                message_id=event.get("message_id"),
                conversation_id=event.get("conversation_id"),
                created_at=event.get("created_at"),
                workflow_run_id=event.get("workflow_run_id"),
                workflow=event.get("data") or {},
            )
            tasks.add(ids["task_id"], task)
        elif event.get("event") == "node_finished":
            ids["steps"] = ids.get("steps", 0) + 1
        if no_graph and event.get("event", "").startswith(WORKFLOW_EVENTS):
            return  # an app without a graph streams no workflow: Dify sends its messages alone
        if agent and event.get("event") in ("message", "message_end"):
            _agent_events(event, thought, put)
            return
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
            return error_response(error)
        if isinstance(error, MemLensError):
            return error_response(from_memlens(error))
        log.error("chat-messages failed", exc_info=error)
        return error_response(ApiError(500, "internal_server_error", INTERNAL))

    async def frames():
        item = first
        try:
            while True:
                kind, payload = item
                if kind == "event":
                    if payload.get("event") in ("message", "agent_message"):
                        task.sent.append(str(payload.get("answer") or ""))
                    yield _sse(payload)
                elif kind == "stop":  # the client asked to stop: end the answer here
                    if not no_graph and not agent:  # Dify's advanced chat: the run finishes as stopped first
                        yield _sse(_stopped_workflow(ids, args.user, time.perf_counter() - started))
                    yield _sse(
                        {
                            "event": "message_end",
                            "task_id": ids.get("task_id"),
                            "id": ids.get("message_id"),
                            "message_id": ids.get("message_id"),
                            "conversation_id": ids.get("conversation_id"),
                            "created_at": ids.get("created_at"),
                            "files": [],
                            "metadata": {
                                "usage": dify_usage(None, time.perf_counter() - started),
                                "retriever_resources": [],
                            },
                        }
                    )
                    return
                elif kind == "done":
                    return
                else:  # a failure after the stream started: Dify's error event, then the end
                    log.error("chat-messages failed while streaming", exc_info=payload)
                    error = (
                        payload if isinstance(payload, ApiError) else ApiError(500, "internal_server_error", INTERNAL)
                    )
                    yield _sse({"event": "error", "status": error.status, "code": error.code, "message": error.message})
                    return
                while True:
                    try:
                        item = await asyncio.wait_for(queue.get(), ping_interval)
                        break
                    except asyncio.TimeoutError:
                        yield PING
        finally:
            task.stream_closed.set()

    return StreamingResponse(
        frames(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )


def _chat_blocking(caller: Caller, args: ChatArgs) -> dict:
    started = time.perf_counter()
    task: dict = {}

    def on_event(event: dict) -> None:
        if event.get("event") == "workflow_started":
            task["id"] = event.get("task_id")

    record, conversation_id = _run_chat(caller, args, on_event)
    if not record.succeeded:
        raise invalid(f"Run failed: {record.error}")
    return {
        "event": "message",
        "task_id": task.get("id") or record.id,
        "id": record.id,
        "message_id": record.id,
        "conversation_id": conversation_id,
        "mode": caller.flow.app_mode,
        "answer": record.answer,
        "metadata": {"retriever_resources": [], "usage": dify_usage(record.usage, time.perf_counter() - started)},
        "created_at": ts(record.created_at),
    }


@dataclass
class Task:
    """A streaming answer in progress: who may stop it and what the client has received."""

    user: str
    flow_id: str
    stop: threading.Event = field(default_factory=threading.Event)
    sent: list[str] = field(default_factory=list)  # answer chunks the client received
    stream_closed: threading.Event = field(default_factory=threading.Event)
    wake: Any = None  # called (on the event loop) to wake the stream when a stop arrives


class Tasks:
    """The streaming answers in progress, by task id."""

    def __init__(self):
        self._tasks: dict[str, Task] = {}
        self._lock = threading.Lock()

    def add(self, task_id: str, task: Task) -> None:
        with self._lock:
            self._tasks[task_id] = task

    def remove(self, task_id: str) -> None:
        with self._lock:
            self._tasks.pop(task_id, None)

    def stop(self, task_id: str, user: str, flow_id: str) -> bool:
        with self._lock:
            task = self._tasks.get(task_id)
        if task is None or task.user != user or task.flow_id != flow_id:
            return False
        task.stop.set()
        if task.wake is not None:
            task.wake()
        return True


def _stopped_workflow(ids: dict, user: str, elapsed: float) -> dict:
    """The ``workflow_finished`` Dify's advanced chat sends when a client stops a run: status
    ``stopped`` with the stop's reason, before the stream's ``message_end``."""
    run = ids.get("workflow") or {}
    return {
        "event": "workflow_finished",
        "task_id": ids.get("task_id"),
        "workflow_run_id": ids.get("workflow_run_id"),
        "message_id": ids.get("message_id"),
        "conversation_id": ids.get("conversation_id"),
        "created_at": ids.get("created_at"),
        "data": {
            "id": ids.get("workflow_run_id"),
            "workflow_id": run.get("workflow_id"),
            "status": repo.STOPPED,
            "outputs": {},
            "error": "Stopped by user.",
            "elapsed_time": round(elapsed, 6),
            "total_tokens": 0,
            "total_steps": ids.get("steps", 0),
            "created_by": {"id": user, "user": user},
            "created_at": run.get("created_at"),
            "finished_at": int(time.time()),
            "exceptions_count": 0,
            "files": [],
        },
    }


def finish_stopped(db, message_id: str, task: Task, timeout: float = 30.0) -> None:
    """After a stopped run: once the stream has closed, store the turn as stopped with what was sent."""
    task.stream_closed.wait(timeout)
    repo.mark_stopped(db, message_id, "".join(task.sent))


def register(app: FastAPI) -> None:
    # For text/event-stream, OpenAPI 3.1's schema describes one event as a client parses it.
    event_schema = {
        "type": "object",
        "required": ["event"],
        "properties": {
            "event": {"type": "string", "description": "message for data frames; ping for keep-alives"},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "description": "one JSON object: {event, conversation_id, message_id, task_id, created_at, …} "
                "with event workflow_started, node_started, node_finished, message (an Agent "
                "app: agent_thought and agent_message), "
                "message_end, workflow_finished or error",
            },
        },
    }
    chat_doc = {
        200: {
            "description": "blocking: the answer; streaming: Dify's server-sent events",
            "content": {"text/event-stream": {"schema": event_schema}},
        },
        **error_responses(400, 401, 404),
    }

    @app.post(
        "/v1/chat-messages",
        response_model=ChatResponse,
        responses=chat_doc,
        tags=["chat"],
        summary="Send a chat message (blocking or streaming)",
    )
    async def chat_messages(body: ChatRequest, caller: Caller = Depends(authenticate)):
        args = chat_args(body, app.state.uploads, caller.flow_id)
        if not args.streaming and caller.flow.app_mode == AGENT_CHAT:
            raise invalid(BLOCKING_REFUSED)
        if args.streaming:
            return await _chat_streaming(caller, args, app.state.ping_interval, app.state.tasks)
        return await run_in_threadpool(_chat_blocking, caller, args)

    @app.post(
        "/v1/chat-messages/{task_id}/stop",
        response_model=ResultBody,
        responses=error_responses(400, 401),
        tags=["chat"],
        summary="Stop a streaming answer (the turn is stored as stopped)",
    )
    def stop(task_id: str, body: StopRequest, caller: Caller = Depends(authenticate)):
        user = check_user(body.user, required=True)
        app.state.tasks.stop(task_id, user, caller.flow_id)
        return {"result": "success"}  # as Dify: success whether or not the task was still running
