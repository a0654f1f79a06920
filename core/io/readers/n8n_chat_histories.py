"""n8n's chat history table (``n8n_chat_histories``), exported as CSV or JSON.

n8n's Postgres Chat Memory keeps a conversation as rows ``(id, session_id, message)`` in the table
``n8n_chat_histories`` (unless renamed), one row per message, written by LangChain's Postgres
history: ``message`` is the message LangChain stores, flattened, e.g. ``{"type": "human",
"content": "hi", "additional_kwargs": {}, "response_metadata": {}}``, an assistant message with its
``tool_calls`` ``[{id, name, args}]`` and a tool result with its ``tool_call_id``. A database tool
exports the table as CSV (``message`` as JSON text) or as JSON (``message`` an object, or its text);
LangChain's ``{"type", "data"}`` form (``messages_to_dict``, how its Redis history keeps a message)
reads too. Each ``session_id`` is one conversation, its rows in ``id`` order when every row has one
(the order n8n reads them back), else in file order. What n8n stored is read as stored: a tool round
as one assistant message per call, an answer with its ``[Used tools: …]`` prefix.
"""

from __future__ import annotations

from typing import Any, Iterator

from core.errors import MemLensError
from core.io.errors import RecordError
from core.limits import load_json
from core.model.conversation import Conversation

from .common import conversation_from_messages, excerpt
from .langchain import ROLES, unflattened
from .openai import openai_messages
from .records import Problem, ReadContext, Records
from .registry import Format

NAME = "n8n-chat-histories"
COLUMNS = ("session_id", "message")


def _session(row: Any) -> str:
    value = row.get("session_id") if isinstance(row, dict) else None
    return str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) and value != "" else ""


def stored_message(value: Any, field: str = "message") -> dict:
    """A stored LangChain message (flattened, or ``{"type", "data"}``; an object or its JSON text) as
    LangChain's ``{"type", "data"}``, held to the depth limit; a bad one raises :class:`RecordError`."""
    if isinstance(value, str):  # JSON text (a CSV cell); an object was held to the depth limit with its row
        try:
            value = load_json(value, f"'{field}'")
        except MemLensError as e:  # not JSON, or nested too deep
            raise RecordError(str(e), field) from None
    if not isinstance(value, dict):
        raise RecordError(
            f'\'{field}\' is not an object; expected the message n8n stored, e.g. {{"type": "human", "content": "hi"}}',
            field,
        )
    kind = value.get("type")
    if kind not in ROLES:
        raise RecordError(f"'{field}' has type {excerpt(str(kind), 30)!r}; expected one of {', '.join(ROLES)}", field)
    data = value["data"] if isinstance(value.get("data"), dict) else unflattened(value).get("data", {})
    if "content" not in data:
        raise RecordError(f"'{field}' has no 'content'", field)
    stored = {"type": kind, "data": data}
    try:
        openai_messages([stored])
    except RecordError as e:
        raise RecordError(f"'{field}': {str(e).removeprefix('message 0').lstrip(': ')}", field) from None
    return stored


def _order(value: Any) -> int | None:
    """A row's id as n8n orders by it (a serial number), or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _sniff(first: Any, layout: str) -> bool:
    return isinstance(first, dict) and all(c in first for c in COLUMNS)


def _read(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
    rows: dict[str, list[tuple[int | None, int, dict]]] = {}
    failed: set[str] = set()

    def parse(row: Any, n: int | None) -> None:
        if not isinstance(row, dict):
            raise RecordError("the row is not an object with 'session_id' and 'message'", "")
        session = _session(row)
        if not session:
            raise RecordError(
                "'session_id' is missing or empty; each row needs the session it belongs to", "session_id"
            )
        rows.setdefault(session, []).append((_order(row.get("id")), n or 0, stored_message(row.get("message"))))

    for rec in records:
        before = len(ctx.problems)
        for _ in ctx.each([rec], parse, _session):
            pass
        if len(ctx.problems) > before:
            failed.add(_session(rec.value))
    for session, listed in rows.items():
        if session in failed:
            continue  # a conversation with a bad row is left out whole
        if all(order is not None for order, _, _ in listed):
            listed.sort(key=lambda r: (r[0], r[1]))
        conv = conversation_from_messages(
            openai_messages([m for _, _, m in listed]), session, source_format=NAME, meta={"session_id": session}
        )
        if not conv.turns:
            ctx.report(
                Problem(
                    None, "message", f"session {excerpt(session, 60)!r} holds no user or assistant message", session
                )
            )
            continue
        yield conv


FORMAT = Format(
    NAME,
    "n8n's chat history table (n8n_chat_histories rows: session_id, message; CSV or JSON)",
    _sniff,
    _read,
    tables=True,
)
