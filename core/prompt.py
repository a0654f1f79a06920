"""Messages in the shape a chat model receives them (OpenAI wire format).

History messages carry their files as content parts, files first and then the text, as Dify's
``_build_prompt_message_with_files`` does; when the producing workflow has file upload switched
off the files are ignored and the message is plain text; image detail defaults to ``high``
(spec/dify-memory.md §1.5).
"""

from __future__ import annotations

from .conversation import Message


def file_part(file, image_detail: str = "high") -> dict:
    if file.type == "image":
        return {"type": "image_url", "image_url": {"url": file.url, "detail": image_detail}}
    return {"type": "file", "file": {"url": file.url, "file_type": file.type}}


def to_prompt_message(message: Message, *, file_upload: bool = True, image_detail: str = "high") -> dict:
    out = message.to_openai()
    if message.files and file_upload:
        out["content"] = [file_part(f, image_detail) for f in message.files] + \
                         [{"type": "text", "text": message.content}]
    return out


def to_prompt_messages(messages, *, file_upload: bool = True, image_detail: str = "high") -> list[dict]:
    return [to_prompt_message(m, file_upload=file_upload, image_detail=image_detail) for m in messages]
