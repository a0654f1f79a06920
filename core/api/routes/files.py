"""``POST /v1/files/upload`` — one file, with Dify 1.x's size checks (any type: one Dify does not
name is ``custom``); MemLens keeps its name, size and type (flows do not read file contents), so a
chat message can refer to it."""

from __future__ import annotations

import time
import uuid
from pathlib import PurePosixPath

from fastapi import Depends, FastAPI, File, Form, UploadFile

from ..caller import Caller, authenticate
from ..errors import ApiError
from ..schemas import ErrorBody, UploadedFile, check_user, clean, error_responses, ts

# Dify's file categories (``FileType``) by extension, and its default upload size limits in MB
# (``UPLOAD_FILE_SIZE_LIMIT``, ``UPLOAD_IMAGE_FILE_SIZE_LIMIT``, …).
FILE_EXTENSIONS = {
    "image": {"jpg", "jpeg", "png", "webp", "gif", "svg"},
    "document": {
        "txt",
        "markdown",
        "md",
        "mdx",
        "pdf",
        "html",
        "htm",
        "xlsx",
        "xls",
        "vtt",
        "properties",
        "doc",
        "docx",
        "csv",
        "eml",
        "msg",
        "pptx",
        "xml",
        "epub",
        "ppt",
    },
    "audio": {"mp3", "m4a", "wav", "amr", "mpga"},
    "video": {"mp4", "mov", "mpeg", "webm"},
}
SIZE_LIMIT_MB = {"image": 10, "document": 15, "audio": 50, "video": 100}
SYSTEM_PARAMETERS = {
    "image_file_size_limit": SIZE_LIMIT_MB["image"],
    "video_file_size_limit": SIZE_LIMIT_MB["video"],
    "audio_file_size_limit": SIZE_LIMIT_MB["audio"],
    "file_size_limit": SIZE_LIMIT_MB["document"],
    "workflow_file_upload_limit": 10,
}
UPLOAD_PATH = "/v1/files/upload"


def upload_body_limit() -> int:
    """The request size an upload may have: the largest file limit, plus room for the form around it
    (the handler then holds each file to its own type's limit)."""
    return max(SIZE_LIMIT_MB.values()) * 1024 * 1024 + 64 * 1024


#: Uploads kept per server (metadata only); the oldest are forgotten past this.
MAX_UPLOADS = 10_000
_CHUNK = 1024 * 1024


def file_category(extension: str) -> str:
    """Dify's file type of an extension; any other file (``.json``, ``.py``, none at all) is
    ``custom``, which Dify 1.x takes too, held to the document size limit."""
    return next((kind for kind, exts in FILE_EXTENSIONS.items() if extension in exts), "custom")


async def upload(app: FastAPI, caller: Caller, files: list[UploadFile], user: str | None) -> dict:
    user = check_user(user)
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
    limit_mb = SIZE_LIMIT_MB.get(kind, SIZE_LIMIT_MB["document"])
    limit = limit_mb * 1024 * 1024
    size = 0
    while chunk := await upload_file.read(_CHUNK):
        size += len(chunk)
        if size > limit:
            raise ApiError(
                413, "file_too_large", f"File size exceeded. {name} is larger than the {kind} limit of {limit_mb} MB."
            )
    record = {
        "id": str(uuid.uuid4()),
        "name": clean(name, "file")[:255],
        "size": size,
        "extension": extension,
        "mime_type": upload_file.content_type or "application/octet-stream",
        "created_by": user,
        "created_at": ts(time.time()),
    }
    uploads: dict = app.state.uploads
    uploads[record["id"]] = {**record, "flow_id": caller.flow_id, "type": kind}
    while len(uploads) > MAX_UPLOADS:
        uploads.pop(next(iter(uploads)))
    return record


def register(app: FastAPI) -> None:
    upload_errors = {**error_responses(400, 401), 413: {"model": ErrorBody, "description": "file_too_large"}}

    @app.post(
        UPLOAD_PATH,
        response_model=UploadedFile,
        status_code=201,
        responses=upload_errors,
        tags=["files"],
        summary="Upload one file for a later message",
    )
    async def post_upload(
        caller: Caller = Depends(authenticate),
        file: list[UploadFile] = File(default=[]),
        user: str | None = Form(default=None),
    ):
        return await upload(app, caller, file, user)
