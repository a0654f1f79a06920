"""What the readers share: role names, conversation ids and labels, the one-record-one-conversation
reader, and splitting a flat message list into turns (:func:`conversation_from_messages`)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

from core.io.errors import RecordError
from core.model.conversation import REASONING, Conversation, Message, Turn, turn_messages

from .records import ReadContext, Records

ROLE_ALIASES = {"developer": "system", "function": "tool", "human": "user", "ai": "assistant"}
VALID_ROLES = ("system", "user", "assistant", "tool")

#: ``convert(record, index, stem)``: one record's conversation; raises :class:`RecordError` for a bad one.
Convert = Callable[[Any, "int | None", str], Conversation]


def excerpt(text: Any, width: int = 40) -> str:
    if not isinstance(text, str):
        return ""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def read_each(
    convert: Convert, label: Callable[[Any], str], check: Callable[[Any, str], None] | None = None
) -> Callable[[Records, ReadContext], Iterator[Conversation]]:
    """A format's ``read`` when each record is one conversation: ``convert(record, index, stem)``
    (``check``: how the format holds a record to the depth limit, :meth:`ReadContext.each`)."""

    def read(records: Records, ctx: ReadContext) -> Iterator[Conversation]:
        yield from ctx.each(records, lambda rec, n: convert(rec, n, ctx.stem), label, check)

    return read


def read_named(
    records: Records, ctx: ReadContext, convert: Convert, label: Callable[[Any], str]
) -> Iterator[Conversation]:
    """Each record one conversation, as :func:`read_each`; a file of one record without an ``id`` names
    its conversation after the file, as it always has."""
    named = set()

    def parse(rec: Any, n: int | None) -> Conversation:
        conv = convert(rec, n, ctx.stem)
        if rec.get("id"):
            named.add(conv.id)
        return conv

    out = list(ctx.each(records, parse, label))
    if ctx.records == 1 and len(out) == 1 and out[0].id not in named:
        out[0].id = ctx.stem
        if out[0].name.startswith(f"{ctx.stem}#"):
            out[0].name = ctx.stem
    yield from out


def record_field(rec: Any, key: str, kind: type | tuple[type, ...], what: str, problem: str) -> Any:
    """A record's ``key``, which must be a ``kind``; a record that is not an object (``what`` says what it
    should hold: "a 'messages' list") or whose ``key`` is not one (``problem`` says so) is bad."""
    if not isinstance(rec, dict):
        raise RecordError(f"the record is not an object with {what}", "")
    value = rec.get(key)
    if not isinstance(value, kind):
        raise RecordError(problem, key)
    return value


def conversation_id(rec: dict, n: int | None, stem: str, *keys: str) -> str:
    """A record's conversation id: the first of its ``keys`` it has, else the file's stem (``stem#n``
    for record ``n`` of several)."""
    for key in keys:
        if rec.get(key):
            return str(rec[key])
    return stem if n is None else f"{stem}#{n}"


def label_of(rec: Any, *keys: str) -> str:
    """The first of ``keys`` a record names (a string or a number), to name it in a problem; "" if none."""
    if isinstance(rec, dict):
        for key in keys:
            value = rec.get(key)
            if isinstance(value, (str, int)) and not isinstance(value, bool) and value != "":
                return str(value)
    return ""


def arguments(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def conversation_from_messages(
    messages: list[Message], conv_id: str, *, source_format: str = "openai", name: str = "", meta: dict | None = None
) -> Conversation:
    """Split a flat message list into turns: one per user message; leading system → system prompt."""
    system: list[str] = []
    i = 0
    while i < len(messages) and messages[i].role == "system" and messages[i].kind != REASONING:
        system.append(messages[i].content)
        i += 1
    groups: list[list[Message]] = []
    for m in messages[i:]:
        if m.role == "user" or not groups:
            groups.append([m])
        else:
            groups[-1].append(m)
    turns: list[Turn] = []
    offset = 0 if groups and groups[0][0].role != "user" else 1  # an opening without a query is turn 0
    for g in groups:
        msgs, query_index, answer_index = turn_messages(g)
        turn_id = str(len(turns) + offset)
        parent = turns[-1].id if turns else None
        turns.append(
            Turn(id=turn_id, parent_id=parent, messages=msgs, query_index=query_index, answer_index=answer_index)
        )
    return Conversation(
        id=conv_id,
        turns=turns,
        system_prompt="\n\n".join(s for s in system if s),
        source_format=source_format,
        name=name or conv_id,
        meta=meta or {},
    )


def first_user_text(
    messages: Any, role_key: str = "role", user: tuple[str, ...] = ("user",), text_key: str = "content"
) -> str:
    if not isinstance(messages, list):
        return ""
    for m in messages:
        if isinstance(m, dict) and m.get(role_key) in user:
            content = m.get(text_key)
            if isinstance(content, list):
                content = " ".join(p.get("text") or p.get("value") or "" for p in content if isinstance(p, dict))
            return excerpt(content)
    return ""


def iso_time(value: Any) -> float | None:
    """Seconds since the epoch of an ISO 8601 time ("2024-05-01T10:00:00.000000Z"), or None."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    # A time without a zone is UTC, as the export writes it; the machine's zone must not matter.
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()
