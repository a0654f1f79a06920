"""Flowise's chat message export: the JSON a chatflow's "View Messages" dialog downloads (Export).

It is a list of chats, ``{id, source, sessionId, memoryType, email, messages}``, one per chat id,
memory and session (``source`` is ``"UI"`` or ``"API/Embed"``), each message ``{content, role, time}``
with ``role`` ``"user"`` or ``"bot"`` (what the chat message table keeps as ``userMessage`` and
``apiMessage``), oldest first, and what the answer used beside it (``usedTools``,
``sourceDocuments``, ``fileAnnotations``, ``agentReasoning``, ``artifacts``, ``filePaths``,
``feedback``). Flowise's memory replays each question and answer as a message and nothing else (a
tool call is no message of its own), so each chat reads as its questions and answers. An empty
answer stays an empty message: Flowise sends it as one.
"""

from __future__ import annotations

from typing import Any

from core.io.errors import RecordError
from core.model.conversation import Conversation, Message

from .common import conversation_from_messages, conversation_id, label_of, read_each, record_field
from .registry import Format

NAME = "flowise-messages"
ROLES = {"user": "user", "bot": "assistant"}
#: The chat's own fields, kept in the conversation's meta under these names.
CHAT_FIELDS = {"source": "source", "sessionId": "session_id", "memoryType": "memory_type"}


def _conversation(rec: Any, n: int | None, stem: str) -> Conversation:
    listed = record_field(rec, "messages", list, "a 'messages' list", "'messages' must be a list of messages")
    messages = []
    for i, m in enumerate(listed):
        at = f"message {i}"
        if not isinstance(m, dict):
            raise RecordError(f"{at} is not an object", at)
        if m.get("role") not in ROLES:
            raise RecordError(f"{at} has role {m.get('role')!r}; a Flowise export's messages are 'user' or 'bot'", at)
        content = m.get("content")
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise RecordError(f"{at}: 'content' must be text, not {type(content).__name__}", at)
        messages.append(Message(ROLES[m["role"]], content, "", i))
    conv_id = conversation_id(rec, n, stem, "id")
    meta = {name: rec[key] for key, name in CHAT_FIELDS.items() if isinstance(rec.get(key), str) and rec[key]}
    conv = conversation_from_messages(messages, conv_id, source_format=NAME, meta=meta)
    if not conv.turns:
        raise RecordError("the chat has no message", "messages")
    return conv


def _sniff(first: Any, layout: str) -> bool:
    """An export's chat: its messages beside every field the export writes for a chat."""
    return isinstance(first, dict) and "messages" in first and all(key in first for key in CHAT_FIELDS)


FORMAT = Format(
    NAME,
    "Flowise chat messages (View Messages → Export: chats of user and bot messages)",
    _sniff,
    read_each(_conversation, lambda rec: label_of(rec, "id", "sessionId")),
)
