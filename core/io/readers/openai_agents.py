"""An OpenAI Agents SDK session: a ``SQLiteSession`` database file, or one session's items as JSON.

``SQLiteSession`` keeps two tables, ``agent_sessions`` (``session_id``, ``created_at``, ``updated_at``) and
``agent_messages`` (``id``, ``session_id``, ``message_data``, ``created_at``; the names are the session's
``sessions_table`` and ``messages_table``, so a renamed table is found by its columns): one row per item,
``message_data`` the item's JSON, read back in ``id`` order. Each session is one conversation, its items
read as the messages they stand for, one message per item (:mod:`.responses`: a user message, a
``function_call``, its ``function_call_output``, a ``reasoning`` item, the answer's ``message``), so a
session's ``limit`` counts them as the SDK does. A row whose ``message_data`` is not JSON is a bad record
named by its row id (the SDK itself skips such a row when it reads the session).

The JSON is one session's items, an array (``result.to_input_list()``, ``await session.get_items()``) or
JSON Lines: one conversation. It looks like any Responses API input, so it is read as this format when
named (``--input-format openai-agents``); detected, the ``openai`` format reads the same messages without
the platform.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Iterator

from core.errors import MemLensError
from core.io.errors import FormatError, RecordError
from core.limits import load_json
from core.model.conversation import Conversation

from .common import conversation_from_messages
from .openai import openai_messages
from .records import Problem, ReadContext, Record, Records
from .registry import Format

NAME = "openai-agents"
#: The first bytes of every SQLite database file.
SQLITE_MAGIC = b"SQLite format 3\x00"
MESSAGES_TABLE = "agent_messages"
SESSIONS_TABLE = "agent_sessions"
#: The columns of the items table (``messages_table``), whatever it is named.
ITEM_COLUMNS = {"id", "session_id", "message_data"}


def item_message(value: Any, field: str) -> Any:
    """One stored item, checked to stand for a message MemLens reads; a bad one raises :class:`RecordError`."""
    try:
        openai_messages([value])
    except RecordError as e:
        raise RecordError(f"'{field}': {str(e).removeprefix('message 0').lstrip(': ')}", field) from None
    return value


def _session(items: list, session_id: str, meta: dict) -> Conversation | None:
    conv = conversation_from_messages(openai_messages(items), session_id, source_format=NAME, meta=meta)
    return conv if conv.turns else None


# -- the database ------------------------------------------------------------------------------------


def _tables(conn: sqlite3.Connection, name: str) -> tuple[str, str | None]:
    """The items table (``agent_messages``, else the one table with its columns) and the sessions table."""
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    columns = {t: {row[1] for row in conn.execute(f'PRAGMA table_info("{t}")')} for t in tables}
    items = [t for t in tables if ITEM_COLUMNS <= columns[t]]
    if MESSAGES_TABLE in items:
        items = [MESSAGES_TABLE]
    if len(items) != 1:
        found = ", ".join(tables[:8]) or "none"
        raise FormatError(
            f"{name} is a SQLite database without {'one' if not items else 'a single'} table of session "
            f"items ({MESSAGES_TABLE}: id, session_id, message_data; tables found: {found}); expected "
            "an OpenAI Agents SDK SQLiteSession file"
        )
    sessions = (
        SESSIONS_TABLE if {"session_id", "created_at", "updated_at"} <= columns.get(SESSIONS_TABLE, set()) else None
    )
    return items[0], sessions


def _rollback_journal(data: bytes) -> bytes:
    """The database with its header saying "rollback journal": SQLiteSession switches its file to WAL, which
    a database read from memory cannot open (header bytes 18 and 19 are 2 in WAL mode, 1 otherwise). What is
    read is the file alone: items still in a ``-wal`` file beside it (a session left open) are not in it."""
    return data[:18] + b"\x01\x01" + data[20:] if len(data) >= 20 and data[18:20] == b"\x02\x02" else data


def _read_database(data: bytes, ctx: ReadContext) -> Iterator[Conversation]:
    conn = sqlite3.connect(":memory:")
    try:
        try:
            conn.deserialize(_rollback_journal(data))
            items_table, sessions_table = _tables(conn, ctx.name)
            rows = conn.execute(f'SELECT id, session_id, message_data FROM "{items_table}" ORDER BY id').fetchall()
            times = dict(
                (
                    (s, (c, u))
                    for s, c, u in conn.execute(f'SELECT session_id, created_at, updated_at FROM "{sessions_table}"')
                )
                if sessions_table
                else ()
            )
        except sqlite3.DatabaseError as e:
            raise FormatError(
                f"{ctx.name} is not a readable SQLite database ({e}); expected an OpenAI Agents SDK SQLiteSession file"
            ) from None
    finally:
        conn.close()
    sessions: dict[str, list] = {}
    failed: set[str] = set()

    def parse(row: dict, _n: int | None) -> None:
        if not isinstance(row["message_data"], (str, bytes)):
            raise RecordError(f"row {row['id']}: 'message_data' is not text", "message_data")
        try:
            item = load_json(row["message_data"], f"row {row['id']}: 'message_data'")
        except MemLensError as e:  # not JSON, or nested too deep
            raise RecordError(str(e), "message_data") from None
        sessions[row["session_id"]].append(item_message(item, "message_data"))

    for row_id, session_id, message_data in rows:
        session_id = str(session_id)
        sessions.setdefault(session_id, [])
        before = len(ctx.problems)
        for _ in ctx.each(
            [Record(row_id, {"id": row_id, "session_id": session_id, "message_data": message_data})],
            parse,
            lambda row: row["session_id"],
        ):
            pass
        if len(ctx.problems) > before:
            failed.add(session_id)  # a session with a bad row is left out whole
    for session_id, items in sessions.items():
        if session_id in failed:
            continue
        meta = {"session_id": session_id}
        if session_id in times:
            meta["created_at"], meta["updated_at"] = (str(t) for t in times[session_id])
        conv = _session(items, session_id, meta)
        if conv is None:
            ctx.report(
                Problem(None, "message_data", f"session {session_id!r} holds no user or assistant message", session_id)
            )
            continue
        yield conv


# -- the JSON ------------------------------------------------------------------------------------------


def _read_items(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    if records.layout == "document":
        ctx.records = 1
        ctx.report(
            Problem(
                None,
                "",
                f"{ctx.name} is one JSON value; expected a session's items: a JSON array "
                "(to_input_list(), get_items()) or JSON Lines",
            )
        )
        return
    items = list(ctx.each(records, lambda value, _n: item_message(value, "item")))
    if ctx.problems or not items:
        return
    conv = _session(items, ctx.stem, {})
    if conv is None:
        ctx.report(Problem(None, "item", f"{ctx.name} holds no user or assistant message"))
        return
    yield conv


def _sniff(first: Any, layout: str) -> bool:
    """Never detected from its JSON (any Responses input looks the same); the database by its first bytes."""
    return False


FORMAT = Format(
    NAME,
    "OpenAI Agents SDK session (a SQLiteSession database file, or its items as JSON: to_input_list(), get_items())",
    _sniff,
    _read_items,
    magic=SQLITE_MAGIC,
    binary=_read_database,
)
