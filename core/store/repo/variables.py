"""Conversation variables: their values, each node's writes stored together, and their history."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from sqlalchemy import and_, func, null, or_, select
from sqlalchemy.orm import Session

from core.flow.variables import USER as USER_EDIT

from .. import checks
from ..db import Database
from ..errors import StoreError
from ..models import ConversationRow, VariableChangeRow, VariableRow
from .ids import now


@dataclass(frozen=True)
class StoredVariable:
    id: str
    name: str
    value_type: str
    value: Any
    description: str
    created_at: float
    updated_at: float


def _var(row: VariableRow) -> StoredVariable:
    bad: list[str] = []
    value = None if isinstance(row.value, checks.Unreadable) else row.value
    return StoredVariable(
        row.id,
        checks.as_text(row.name, "name", bad),
        checks.as_text(row.value_type, "value_type", bad),
        value,
        checks.as_text(row.description, "description", bad),
        checks.as_number(row.created_at, "created_at", bad),
        checks.as_number(row.updated_at, "updated_at", bad),
    )


def get_variables(db: Database, conversation_id: str) -> list[StoredVariable]:
    with db.session(write=False) as s:
        rows = s.scalars(
            select(VariableRow)
            .where(VariableRow.conversation_id == conversation_id)
            .order_by(VariableRow.created_at, VariableRow.id)
        ).all()
        return [_var(r) for r in rows]


def ensure_variables(db: Database, conversation_id: str, specs: Iterable[dict]) -> list[StoredVariable]:
    """Dify's initialisation: create missing variables (by id) with their defaults; keep the rest.
    Runs before every turn: when none is missing (the usual case) it only reads."""
    specs = list(specs)
    stored = get_variables(db, conversation_id)
    if {spec["id"] for spec in specs} <= {v.id for v in stored}:
        return stored
    with db.session() as s:
        have = set(s.scalars(select(VariableRow.id).where(VariableRow.conversation_id == conversation_id)))
        t = now()
        for spec in specs:
            if spec["id"] not in have:
                s.add(
                    VariableRow(
                        id=spec["id"],
                        conversation_id=conversation_id,
                        name=spec["name"],
                        value_type=spec["value_type"],
                        value=spec.get("value"),
                        description=spec.get("description", ""),
                        created_at=t,
                        updated_at=t,
                    )
                )
    return get_variables(db, conversation_id)


def write_variable_changes(
    db: Database, conversation_id: str, changes: list[dict], *, turn_id: str | None, turn_seq: int | None
) -> None:
    """Apply one node's variable writes (or one user edit) and record them, in one transaction.

    Each change: ``{name, new, old, operation, node_id}``; unknown names are a StoreError and
    nothing is written.
    """
    with db.session() as s:
        rows = {r.name: r for r in s.scalars(select(VariableRow).where(VariableRow.conversation_id == conversation_id))}
        t = now()
        record_changes(s, conversation_id, rows, changes, turn_id, turn_seq, t)
        conv = s.get(ConversationRow, conversation_id)
        if conv is not None:
            conv.updated_at = t


#: :attr:`VariableChangeRow.delta` of a change stored as the items it appended to the variable's
#: previous value (a list that grows every turn would otherwise be written whole, twice, each turn).
APPENDED = "append"


def _appended(row: VariableRow, change: dict) -> list | None:
    """The items ``change`` appends to the variable's stored value, when it can be stored as just
    those: the value is the one its newest change row leaves (``chained``), the change says that
    value was the old one, and the new value is it with items added at the end."""
    before, old, new = row.value, change.get("old"), change["new"]
    if not row.chained or type(before) is not list or type(new) is not list or len(new) < len(before):
        return None
    if type(old) is not list or old != before or new[: len(before)] != before:
        return None
    return new[len(before) :]


def record_changes(
    s: Session,
    conversation_id: str,
    rows: dict,
    changes: list[dict],
    turn_id: str | None,
    turn_seq: int | None,
    t: float,
) -> None:
    for c in changes:
        row = rows.get(c["name"])
        if row is None:
            raise StoreError(f"conversation {conversation_id!r} has no variable named {c['name']!r}")
        items = _appended(row, c)
        old, new, delta = (null(), items, APPENDED) if items is not None else (c.get("old"), c["new"], None)
        row.value = c["new"]
        row.chained = True
        if c.get("value_type"):
            row.value_type = c["value_type"]
        row.updated_at = t
        s.add(
            VariableChangeRow(
                conversation_id=conversation_id,
                turn_id=turn_id,
                turn_seq=turn_seq,
                node_id=str(c.get("node_id") or USER_EDIT),
                operation=str(c.get("operation") or ""),
                name=c["name"],
                old=old,
                new=new,
                delta=delta,
                created_at=t,
            )
        )


def variable_history(db: Database, conversation_id: str) -> list[dict]:
    """Every recorded variable change, oldest first, each with the whole value before and after."""
    with db.session(write=False) as s:
        rows = s.scalars(
            select(VariableChangeRow)
            .where(VariableChangeRow.conversation_id == conversation_id)
            .order_by(VariableChangeRow.id)
        ).all()
        return _changes(rows)


def variable_changes_until(db: Database, conversation_id: str, turn_seq: int) -> list[dict]:
    """Each variable's last recorded change up to ``turn_seq`` (in :func:`variable_history`'s shape,
    oldest first): what its value was after that turn, read without the whole history (a value
    that grows every turn makes that quadratic) — the user's edits filed under that turn (made
    after it ran) left out. A change stored as appended items is read with the changes of its
    variable back to the last one stored whole (each of those holds only its own items)."""
    with db.session(write=False) as s:
        last = (
            select(func.max(VariableChangeRow.id))
            .where(
                VariableChangeRow.conversation_id == conversation_id,
                or_(
                    VariableChangeRow.turn_seq < turn_seq,
                    and_(VariableChangeRow.turn_seq == turn_seq, VariableChangeRow.node_id != USER_EDIT),
                ),
            )
            .group_by(VariableChangeRow.name)
        )
        rows = s.scalars(
            select(VariableChangeRow).where(VariableChangeRow.id.in_(last)).order_by(VariableChangeRow.id)
        ).all()
        out = []
        for row in rows:
            if row.delta is None:
                out += _changes([row])
                continue
            whole = s.scalar(
                select(func.max(VariableChangeRow.id)).where(
                    VariableChangeRow.conversation_id == conversation_id,
                    VariableChangeRow.name == row.name,
                    VariableChangeRow.id < row.id,
                    VariableChangeRow.delta.is_(None),
                )
            )
            value = None
            if whole is not None:  # the whole value, then every append up to the row's own
                value = s.scalar(select(VariableChangeRow.new).where(VariableChangeRow.id == whole))
                value = list(value) if type(value) is list else None
                for items, delta in s.execute(
                    select(VariableChangeRow.new, VariableChangeRow.delta)
                    .where(
                        VariableChangeRow.conversation_id == conversation_id,
                        VariableChangeRow.name == row.name,
                        VariableChangeRow.id > whole,
                        VariableChangeRow.id < row.id,
                    )
                    .order_by(VariableChangeRow.id)
                ):
                    if value is None or delta != APPENDED or type(items) is not list:
                        value = None
                        break
                    value += items
            out += _changes([row], {row.name: value})
        return out


def _changes(rows, after: dict[str, Any] | None = None) -> list[dict]:
    """Change rows as dicts, oldest first; a row stored as appended items gets its whole values
    from the row before it of the same variable (a damaged or missing one leaves them None).
    ``after``: each variable's value after the rows before these, when they were not read."""
    out = []
    after = dict(after or {})  # each variable's value after the latest row read
    for r in rows:
        bad: list[str] = []
        name = checks.as_text(r.name, "name", bad)
        old = None if isinstance(r.old, checks.Unreadable) else r.old
        new = None if isinstance(r.new, checks.Unreadable) else r.new
        if r.delta is not None:
            before = after.get(name)
            if r.delta == APPENDED and type(before) is list and type(new) is list:
                old, new = list(before), before + new
            else:
                old = new = None
                bad.append("delta" if r.delta != APPENDED else "new")
        after[name] = new
        item = {
            "turn_id": checks.as_optional_text(r.turn_id, "turn_id", bad),
            "turn_seq": None if r.turn_seq is None else checks.as_whole(r.turn_seq, "turn_seq", bad, None),
            "node_id": checks.as_text(r.node_id, "node_id", bad),
            "operation": checks.as_text(r.operation, "operation", bad),
            "name": name,
            "old": old,
            "new": new,
            "created_at": checks.as_number(r.created_at, "created_at", bad),
        }
        if bad:
            item["damaged"] = bad
        out.append(item)
    return out
