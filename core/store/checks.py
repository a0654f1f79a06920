"""What the store accepts: column widths and the check every imported conversation passes.

Readers turn many formats into :class:`~core.model.conversation.Conversation` objects; this is the
last look before they are written, so a value no reader thought to check (a NaN timestamp, a
status too long for its column, an error that is an object) is refused with the conversation,
turn and field named, and nothing is written — instead of failing half-way in the database.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from core.model.conversation import Conversation

from .db import Unreadable
from .errors import ImportCheckError

#: Column widths (``models.py``); PostgreSQL refuses longer values, SQLite would keep them silently.
ID_WIDTH = 36
NAME_WIDTH = 255
SOURCE_WIDTH = 32
STATUS_WIDTH = 16
NODE_TYPE_WIDTH = 64
VARIABLE_ID_WIDTH = 64
VALUE_TYPE_WIDTH = 32
OPERATION_WIDTH = 32
STRUCTURE_WIDTH = 64
#: An INTEGER column on PostgreSQL.
MAX_INT = 2**31 - 1


def kind_of(value: Any) -> str:
    """A value's JSON kind for an error message: "null", "a boolean", "the number 3", "a string"…"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    return "a list" if isinstance(value, list) else type(value).__name__


def _text(value: Any, where: str, key: str, *, width: int | None = None, nullable: bool = False) -> None:
    if value is None and nullable:
        return
    if not isinstance(value, str):
        raise ImportCheckError(
            f"{where}: '{key}' must be a string{' or null' if nullable else ''}, not {kind_of(value)}"
        )
    if width is not None and len(value) > width:
        raise ImportCheckError(f"{where}: '{key}' is {len(value)} characters; at most {width} fit")


def check_conversation(conv: Conversation, name: str = "input") -> None:
    """Raise :class:`ImportCheckError` naming the conversation, turn and field of the first value
    the store cannot keep."""
    label = f"{name}: conversation {conv.id!r}"
    _text(conv.id, label, "id")
    _text(conv.system_prompt, label, "system prompt", nullable=True)
    for i, turn in enumerate(conv.turns):
        where = f"{label} turn {i}"
        _text(turn.id, where, "id")
        _text(turn.status, where, "status", width=STATUS_WIDTH, nullable=True)
        _text(turn.error, where, "error", nullable=True)
        if turn.created_at is not None and (
            isinstance(turn.created_at, bool)
            or not isinstance(turn.created_at, (int, float))
            or not math.isfinite(turn.created_at)
        ):
            raise ImportCheckError(f"{where}: 'created_at' must be a finite number, not {kind_of(turn.created_at)}")
        tokens = turn.answer_tokens
        if tokens is not None and (
            isinstance(tokens, bool) or not isinstance(tokens, int) or not 0 <= tokens <= MAX_INT
        ):
            raise ImportCheckError(
                f"{where}: 'answer_tokens' must be a whole number from 0 to {MAX_INT}, not {kind_of(tokens)}"
            )
        for k, m in enumerate(turn.messages):
            at = f"{where} message {k}"
            _text(m.role, at, "role")
            _text(m.content, at, "content")
            for call in m.tool_calls:
                for key in ("id", "name", "arguments"):
                    _text(getattr(call, key), f"{at} tool call", key)


def check_conversations(conversations: Iterable[Conversation], name: str = "input") -> None:
    for conv in conversations:
        check_conversation(conv, name)


# -- reading rows back ------------------------------------------------------------------------------
#
# Imports are checked, but a database can still hold a row no check saw: written by hand, by an
# older MemLens, by another tool. Readers take every column through these, which give the
# column's default for a value of the wrong kind and record the field's name in ``damaged``, so a
# listing, an export or a page shows the row as damaged and goes on instead of failing.


def as_text(value: Any, field: str, damaged: list, default: str = "") -> str:
    if isinstance(value, str) and not isinstance(value, Unreadable):
        return value
    damaged.append(field)
    return default if value is None or isinstance(value, (dict, list, Unreadable)) else str(value)


def as_optional_text(value: Any, field: str, damaged: list) -> str | None:
    return None if value is None else as_text(value, field, damaged)


def as_whole(value: Any, field: str, damaged: list, default: int | None = 0) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    damaged.append(field)
    return default


def as_number(value: Any, field: str, damaged: list, default: float = 0.0) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    damaged.append(field)
    return default


def as_optional_number(value: Any, field: str, damaged: list) -> float | None:
    return None if value is None else as_number(value, field, damaged)


def as_object(value: Any, field: str, damaged: list, *, nullable: bool = False) -> dict | None:
    if isinstance(value, dict):
        return value
    if value is None:
        return None if nullable else {}
    damaged.append(field)
    return None if nullable else {}


def as_items(value: Any, field: str, damaged: list, *, nullable: bool = False) -> list | None:
    if isinstance(value, list):
        return value
    if value is None:
        return None if nullable else []
    damaged.append(field)
    return None if nullable else []


__all__ = [
    "ID_WIDTH",
    "NAME_WIDTH",
    "SOURCE_WIDTH",
    "STATUS_WIDTH",
    "NODE_TYPE_WIDTH",
    "VARIABLE_ID_WIDTH",
    "VALUE_TYPE_WIDTH",
    "OPERATION_WIDTH",
    "STRUCTURE_WIDTH",
    "MAX_INT",
    "ImportCheckError",
    "check_conversation",
    "check_conversations",
    "Unreadable",
    "as_text",
    "as_optional_text",
    "as_whole",
    "as_number",
    "as_optional_number",
    "as_object",
    "as_items",
]
