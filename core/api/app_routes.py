"""The rest of Dify's Service API for chat apps, so Dify's own client SDK works unchanged.

* ``GET /v1/parameters`` — the app's features as the flow exports them (opening statement,
  suggested questions, file upload settings …) and its start form as Dify's ``user_input_form``.
* ``GET /v1/meta`` and ``GET /v1/info`` — the app's tool icons (none) and its name and description.
* ``POST /v1/messages/{message_id}/feedbacks`` — rate an answer ``like`` / ``dislike`` (``null``
  revokes); stored, listed with the message and shown on the turn in the debugger.
* ``GET /v1/messages/{message_id}/suggested`` — three follow-up questions from the app's first LLM
  node's model, when the flow enables ``suggested_questions_after_answer`` (else Dify's 400).
* ``POST /v1/chat-messages/{task_id}/stop`` — stop a streaming answer: the stream ends with
  ``message_end`` and the turn is stored as ``stopped`` with the answer sent so far.
* ``POST /v1/files/upload`` — one file, with Dify's type and size checks; MemLens keeps its name,
  size and type (flows do not read file contents), so a chat message can refer to it.

Shapes and messages follow spec/dify-memory.md §4 and Dify's Service API reference.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Literal

from fastapi import Depends, FastAPI, File, Form, Query, UploadFile
from pydantic import BaseModel, Field

from core.llm.client import LiteLLMClient, LLMError
from core.store import repo
from core.store.db import StoreError
from core.store.models import TurnRow

from .base import MODE, ApiError, Caller, ErrorBody, _authenticate, _clean, _errors, _owned, _ts, _user, not_found

MESSAGE_NOT_FOUND = "Message Not Exists."

# Dify's file categories (``FileType``) by extension, and its default upload size limits in MB
# (``UPLOAD_FILE_SIZE_LIMIT``, ``UPLOAD_IMAGE_FILE_SIZE_LIMIT``, …).
FILE_EXTENSIONS = {
    "image": {"jpg", "jpeg", "png", "webp", "gif", "svg"},
    "document": {"txt", "markdown", "md", "mdx", "pdf", "html", "htm", "xlsx", "xls", "vtt", "properties", "doc",
                 "docx", "csv", "eml", "msg", "pptx", "xml", "epub", "ppt"},
    "audio": {"mp3", "m4a", "wav", "amr", "mpga"},
    "video": {"mp4", "mov", "mpeg", "webm"},
}
SIZE_LIMIT_MB = {"image": 10, "document": 15, "audio": 50, "video": 100}
SYSTEM_PARAMETERS = {"image_file_size_limit": SIZE_LIMIT_MB["image"], "video_file_size_limit": SIZE_LIMIT_MB["video"],
                     "audio_file_size_limit": SIZE_LIMIT_MB["audio"], "file_size_limit": SIZE_LIMIT_MB["document"],
                     "workflow_file_upload_limit": 10}
_DISABLED = {"enabled": False}
_DEFAULT_FILE_UPLOAD = {"image": {"enabled": False, "number_limits": 3, "detail": "high",
                                  "transfer_methods": ["remote_url", "local_file"]}}
UPLOAD_PATH = "/v1/files/upload"


def upload_body_limit() -> int:
    """The request size an upload may have: the largest file limit, plus room for the form around it
    (the handler then holds each file to its own type's limit)."""
    return max(SIZE_LIMIT_MB.values()) * 1024 * 1024 + 64 * 1024


#: Uploads kept per server (metadata only); the oldest are forgotten past this.
MAX_UPLOADS = 10_000
_CHUNK = 1024 * 1024


# -- response shapes --------------------------------------------------------------------------------

class ResultBody(BaseModel):
    result: Literal["success"]


class Parameters(BaseModel):
    opening_statement: str
    suggested_questions: list[str]
    suggested_questions_after_answer: dict[str, Any]
    speech_to_text: dict[str, Any]
    text_to_speech: dict[str, Any]
    retriever_resource: dict[str, Any]
    annotation_reply: dict[str, Any]
    more_like_this: dict[str, Any]
    user_input_form: list[dict[str, Any]]
    sensitive_word_avoidance: dict[str, Any]
    file_upload: dict[str, Any]
    system_parameters: dict[str, int]


class AppMeta(BaseModel):
    tool_icons: dict[str, Any]


class AppInfo(BaseModel):
    name: str
    description: str
    tags: list[str]
    mode: str
    author_name: str


class FeedbackRequest(BaseModel):
    rating: Literal["like", "dislike"] | None = Field(default=None, description="null revokes the rating")
    user: str | None = None
    content: str | None = Field(default=None, max_length=10_000)


class StopRequest(BaseModel):
    user: str | None = None


class Suggested(BaseModel):
    result: Literal["success"]
    data: list[str]


class UploadedFile(BaseModel):
    id: str
    name: str
    size: int
    extension: str
    mime_type: str
    created_by: str
    created_at: int


# -- parameters -------------------------------------------------------------------------------------

def user_input_form(caller: Caller) -> list[dict]:
    """The start node's variables as Dify lists them: ``[{"text-input": {label, variable, …}}, …]``."""
    form = []
    for raw in caller.flow.start.data.get("variables") or []:
        if not isinstance(raw, dict) or not raw.get("variable"):
            continue
        kind = str(raw.get("type") or "text-input")
        item = {"label": str(raw.get("label") or raw["variable"]), "variable": str(raw["variable"]),
                "required": bool(raw.get("required", False)), "default": raw.get("default", "")}
        for key in ("max_length", "options", "allowed_file_types", "allowed_file_extensions",
                    "allowed_file_upload_methods"):
            if key in raw:
                item[key] = raw[key]
        form.append({kind: item})
    return form


def parameters(caller: Caller) -> dict:
    features = caller.flow.features
    file_upload = dict(_DEFAULT_FILE_UPLOAD)
    if isinstance(features.get("file_upload"), dict):
        file_upload.update(features["file_upload"])
    questions = features.get("suggested_questions")
    return {"opening_statement": str(features.get("opening_statement") or ""),
            "suggested_questions": [str(q) for q in questions] if isinstance(questions, list) else [],
            **{k: dict(features[k]) if isinstance(features.get(k), dict) else dict(_DISABLED)
               for k in ("suggested_questions_after_answer", "speech_to_text", "text_to_speech",
                         "retriever_resource", "annotation_reply", "more_like_this", "sensitive_word_avoidance")},
            "user_input_form": user_input_form(caller), "file_upload": file_upload,
            "system_parameters": dict(SYSTEM_PARAMETERS)}


# -- messages: feedback and suggested questions -----------------------------------------------------

def _owned_message(caller: Caller, message_id: str, user: str) -> TurnRow:
    try:
        uuid.UUID(message_id)
    except ValueError:
        raise not_found(MESSAGE_NOT_FOUND) from None
    with caller.db.session(write=False) as s:
        row = s.get(TurnRow, message_id)
        if row is not None:
            s.expunge(row)
    if row is None or _owned(caller, row.conversation_id, user) is None:
        raise not_found(MESSAGE_NOT_FOUND)
    return row


def feedback(caller: Caller, message_id: str, body: FeedbackRequest) -> dict:
    user = _user(body.user)
    row = _owned_message(caller, message_id, user)
    content = _clean(body.content, "content") if body.content is not None else None
    try:
        repo.set_feedback(caller.db, row.id, user, body.rating, content)
    except StoreError:  # deleted by a concurrent request
        raise not_found(MESSAGE_NOT_FOUND) from None
    return {"result": "success"}


SUGGEST_PROMPT = ("Given the conversation below, predict the three questions the user is most likely to ask "
                  "next. Keep each under 20 words and in the language of the conversation. Reply with a JSON "
                  "array of three strings and nothing else.")


def parse_questions(text: str) -> list[str]:
    """Up to three questions from a model's reply: a JSON array if there is one, else its lines."""
    match = re.search(r"\[.*\]", text or "", re.S)
    if match:
        try:
            items = json.loads(match.group(0))
        except json.JSONDecodeError:
            items = None
        if isinstance(items, list):
            return [str(q).strip() for q in items if str(q).strip()][:3]
    lines = [re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip() for line in (text or "").splitlines()]
    return [line for line in lines if line][:3]


def suggested(caller: Caller, message_id: str, user: str) -> dict:
    row = _owned_message(caller, message_id, user)
    if not (caller.flow.features.get("suggested_questions_after_answer") or {}).get("enabled"):
        raise ApiError(400, "bad_request", "Function Suggested questions after answer disabled.")
    nodes = caller.flow.llm_nodes
    if not nodes:
        return {"result": "success", "data": []}
    conversation = caller.service.conversation(row.conversation_id)
    path = conversation.tree.thread(conversation.index_of(row.id))
    history = "\n".join(f"user: {conversation.turns[i].query}\nassistant: {conversation.turns[i].answer}"
                        for i in path[-3:])
    model = caller.flow.llm(nodes[0].id).model
    try:
        reply = (caller.service.llm or LiteLLMClient()).complete(model, [{"role": "system", "content": SUGGEST_PROMPT},
                                                    {"role": "user", "content": history}], 256)
    except LLMError:
        return {"result": "success", "data": []}  # as Dify: a failed suggestion is no suggestion
    return {"result": "success", "data": parse_questions(reply.text)}


# -- stopping a streaming answer --------------------------------------------------------------------

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


def finish_stopped(db, message_id: str, task: Task, timeout: float = 30.0) -> None:
    """After a stopped run: once the stream has closed, store the turn as stopped with what was sent."""
    task.stream_closed.wait(timeout)
    repo.mark_stopped(db, message_id, "".join(task.sent))


# -- file upload ------------------------------------------------------------------------------------

def file_category(extension: str) -> str | None:
    return next((kind for kind, exts in FILE_EXTENSIONS.items() if extension in exts), None)


async def upload(app: FastAPI, caller: Caller, files: list[UploadFile], user: str | None) -> dict:
    user = _user(user)
    if not files:
        raise ApiError(400, "no_file_uploaded", "Please upload your file.")
    if len(files) > 1:
        raise ApiError(400, "too_many_files", "Only one file is allowed.")
    upload_file = files[0]
    name = PurePosixPath((upload_file.filename or "").replace("\\", "/")).name
    if not name:
        raise ApiError(400, "filename_not_exists_error", "The specified filename does not exist.")
    extension = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    kind = file_category(extension)
    if kind is None:
        raise ApiError(415, "unsupported_file_type", "File type not allowed.")
    limit = SIZE_LIMIT_MB[kind] * 1024 * 1024
    size = 0
    while chunk := await upload_file.read(_CHUNK):
        size += len(chunk)
        if size > limit:
            raise ApiError(413, "file_too_large", f"File size exceeded. {name} is larger than the {kind} limit "
                                                  f"of {SIZE_LIMIT_MB[kind]} MB.")
    record = {"id": str(uuid.uuid4()), "name": _clean(name, "file")[:255], "size": size, "extension": extension,
              "mime_type": upload_file.content_type or "application/octet-stream", "created_by": user,
              "created_at": _ts(time.time())}
    uploads: dict = app.state.uploads
    uploads[record["id"]] = {**record, "flow_id": caller.flow_id, "type": kind}
    while len(uploads) > MAX_UPLOADS:
        uploads.pop(next(iter(uploads)))
    return record


# -- routes -----------------------------------------------------------------------------------------

def register(app: FastAPI) -> None:
    app.state.tasks = Tasks()
    app.state.uploads = {}

    @app.get("/v1/parameters", response_model=Parameters, responses=_errors(400, 401), tags=["app"],
             summary="The app's features and start form (what a client shows before the first message)")
    def get_parameters(caller: Caller = Depends(_authenticate), user: str | None = Query(default=None)):
        return parameters(caller)

    @app.get("/v1/meta", response_model=AppMeta, responses=_errors(400, 401), tags=["app"],
             summary="The app's tool icons")
    def get_meta(caller: Caller = Depends(_authenticate)):
        return {"tool_icons": {}}

    @app.get("/v1/info", response_model=AppInfo, responses=_errors(400, 401), tags=["app"],
             summary="The app's name, description and mode")
    def get_info(caller: Caller = Depends(_authenticate)):
        return {"name": caller.flow.name, "description": caller.flow.description, "tags": [], "mode": MODE,
                "author_name": ""}

    @app.post("/v1/messages/{message_id}/feedbacks", response_model=ResultBody, responses=_errors(400, 401, 404),
              tags=["chat"], summary="Rate an answer like or dislike (null revokes the rating)")
    def post_feedback(message_id: str, body: FeedbackRequest, caller: Caller = Depends(_authenticate)):
        return feedback(caller, message_id, body)

    @app.get("/v1/messages/{message_id}/suggested", response_model=Suggested, responses=_errors(400, 401, 404),
             tags=["chat"], summary="Follow-up questions after an answer")
    def get_suggested(message_id: str, caller: Caller = Depends(_authenticate),
                      user: str | None = Query(default=None)):
        return suggested(caller, message_id, _user(user))

    @app.post("/v1/chat-messages/{task_id}/stop", response_model=ResultBody, responses=_errors(400, 401),
              tags=["chat"], summary="Stop a streaming answer (the turn is stored as stopped)")
    def stop(task_id: str, body: StopRequest, caller: Caller = Depends(_authenticate)):
        user = _user(body.user, required=True)
        app.state.tasks.stop(task_id, user, caller.flow_id)
        return {"result": "success"}  # as Dify: success whether or not the task was still running

    upload_errors = {**_errors(400, 401),
                     413: {"model": ErrorBody, "description": "file_too_large"},
                     415: {"model": ErrorBody, "description": "unsupported_file_type"}}

    @app.post(UPLOAD_PATH, response_model=UploadedFile, status_code=201, responses=upload_errors,
              tags=["files"], summary="Upload one file for a later message")
    async def post_upload(caller: Caller = Depends(_authenticate), file: list[UploadFile] = File(default=[]),
                          user: str | None = Form(default=None)):
        return await upload(app, caller, file, user)


__all__ = ["register", "parameters", "parse_questions", "Task", "Tasks", "finish_stopped", "FILE_EXTENSIONS",
           "SIZE_LIMIT_MB"]
