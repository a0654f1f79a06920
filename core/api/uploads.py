"""Files sent with chat messages: Dify's ``files`` field, checked and turned into message files.

A file is ``{type, transfer_method, url | upload_file_id}`` (spec/dify-memory.md §4.1): ``type``
is ``document``, ``image``, ``audio``, ``video`` or ``custom``; ``transfer_method`` is
``remote_url`` (with a ``url``) or ``local_file`` (with the ``upload_file_id`` an upload returned).
Upload ids resolve through the records ``POST /v1/files/upload`` keeps (id → ``{id, name, type,
flow_id, …}``); a chat message naming an unknown id, or one uploaded to another app, is refused.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from core.model.conversation import FileRef

from .errors import FileInputError

FILE_TYPES = ("document", "image", "audio", "video", "custom")
TRANSFER_METHODS = ("remote_url", "local_file")
#: At most this many files on one message, and this long a URL.
MAX_FILES = 10
MAX_URL = 2048


def parse_files(
    items: Any, uploads: Mapping[str, Mapping[str, Any]] | None = None, flow_id: str | None = None
) -> tuple[FileRef, ...]:
    """A request's ``files`` as message files; a bad entry raises :class:`FileInputError` naming it.

    ``uploads`` are the upload endpoint's records by id; ``flow_id`` the app the message is for."""
    if items is None:
        return ()
    if not isinstance(items, Sequence) or isinstance(items, (str, bytes)):
        raise FileInputError("files must be a list of {type, transfer_method, url | upload_file_id}")
    if len(items) > MAX_FILES:
        raise FileInputError(f"files holds {len(items)} files; at most {MAX_FILES} go with one message")
    out = []
    for n, item in enumerate(items, start=1):
        if not isinstance(item, Mapping):
            raise FileInputError(f"files[{n}] must be an object {{type, transfer_method, url | upload_file_id}}")
        kind, method = item.get("type"), item.get("transfer_method")
        if kind not in FILE_TYPES:
            raise FileInputError(f"files[{n}]: type {kind!r} is unknown; expected one of {', '.join(FILE_TYPES)}")
        if method not in TRANSFER_METHODS:
            raise FileInputError(
                f"files[{n}]: transfer_method {method!r} is unknown; expected remote_url or local_file"
            )
        if method == "remote_url":
            url = item.get("url")
            if not isinstance(url, str) or not url.startswith(("http://", "https://")) or len(url) > MAX_URL:
                raise FileInputError(
                    f"files[{n}]: remote_url needs a url starting with http:// or https:// "
                    f"(at most {MAX_URL} characters)"
                )
            out.append(FileRef(str(kind), url, ""))
        else:
            upload_id = item.get("upload_file_id")
            found = uploads.get(upload_id) if uploads is not None and isinstance(upload_id, str) else None
            if found is None or (flow_id is not None and found.get("flow_id") not in (None, flow_id)):
                raise FileInputError(
                    f"files[{n}]: upload_file_id {upload_id!r} is not a file uploaded to this "
                    f"app; upload it first, or send it as remote_url"
                )
            out.append(FileRef(str(kind), "", str(upload_id), str(found.get("name") or "")))
    return tuple(out)


__all__ = ["FILE_TYPES", "TRANSFER_METHODS", "MAX_FILES", "MAX_URL", "FileInputError", "parse_files"]
