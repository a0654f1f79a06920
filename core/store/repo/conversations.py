"""Conversations: created, listed, renamed, deleted, and loaded whole with their turns."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import aliased

from core.model.conversation import SOURCE_MODEL, Conversation, source_model

from .. import checks
from ..db import Database
from ..errors import NotFoundError, StoreError
from ..models import ConversationRow, FeedbackRow, FlowVersionRow, NodeRunRow, TurnRow, VariableChangeRow, VariableRow
from .counts import remember_token_counts
from .ids import new_id, now
from .turns import load_turn_rows, settle_interrupted, turn_from_dict


@dataclass
class ConversationInfo:
    id: str
    flow_version_id: str | None
    user_id: str
    name: str
    source: str
    inputs: dict
    active_turn_id: str | None
    created_at: float
    updated_at: float
    turn_count: int = 0  # every stored turn, branches included
    meta: dict = field(default_factory=dict)
    thread_turns: int = 0  # the turns of the active thread (its newest turn's dialogue count)
    #: Columns whose stored value was unusable (shown with their default instead).
    damaged: tuple[str, ...] = ()


def _info(row: ConversationRow, turn_count: int = 0, thread_turns: int | None = None) -> ConversationInfo:
    bad: list[str] = []
    return ConversationInfo(
        row.id,
        checks.as_optional_text(row.flow_version_id, "flow_version_id", bad),
        checks.as_text(row.user_id, "user_id", bad),
        checks.as_text(row.name, "name", bad),
        checks.as_text(row.source, "source", bad),
        dict(checks.as_object(row.inputs, "inputs", bad)),
        checks.as_optional_text(row.active_turn_id, "active_turn_id", bad),
        checks.as_number(row.created_at, "created_at", bad),
        checks.as_number(row.updated_at, "updated_at", bad),
        turn_count,
        dict(checks.as_object(row.meta, "meta", bad)),
        checks.as_whole(thread_turns or 0, "dialogue_count", [], 0),
        tuple(bad),
    )


def create_conversation(
    db: Database,
    *,
    flow_version_id: str | None,
    user_id: str = "user",
    name: str = "",
    source: str = "ui",
    inputs: dict | None = None,
    conversation_id: str | None = None,
    meta: dict | None = None,
) -> ConversationInfo:
    with db.session() as s:
        t = now()
        row = ConversationRow(
            id=conversation_id or new_id(),
            flow_version_id=flow_version_id,
            user_id=user_id,
            name=name,
            source=source,
            inputs=inputs or {},
            active_turn_id=None,
            meta=meta or {},
            created_at=t,
            updated_at=t,
        )
        s.add(row)
        s.flush()
        return _info(row)


def get_conversation(db: Database, conversation_id: str, *, settle: bool = True) -> ConversationInfo:
    """A conversation with its turn count and its active thread's length, in one query.
    ``settle=False``: the caller holds the conversation's lock and has settled it already."""
    if settle:
        settle_interrupted(db, conversation_id)  # its active turn may move to a turn a killed process left
    count = (
        select(func.count()).select_from(TurnRow).where(TurnRow.conversation_id == ConversationRow.id).scalar_subquery()
    )
    thread = select(TurnRow.dialogue_count).where(TurnRow.id == ConversationRow.active_turn_id).scalar_subquery()
    with db.session(write=False) as s:
        found = s.execute(select(ConversationRow, count, thread).where(ConversationRow.id == conversation_id)).first()
        if found is None:
            raise NotFoundError(
                f"no conversation with id {conversation_id!r}; list them with `python -m core conversations`"
            )
        row, n, turns = found
        return _info(row, n or 0, turns if row.active_turn_id else 0)


def find_conversation(db: Database, conversation_id: str) -> ConversationInfo | None:
    try:
        return get_conversation(db, conversation_id)
    except StoreError:
        return None


def list_conversations(
    db: Database, *, user_id: str | None = None, source: str | None = None, flow_id: str | None = None
) -> list[ConversationInfo]:
    """Conversations, most recently updated first, with their turn counts."""
    with db.session(write=False) as s:
        counts = select(TurnRow.conversation_id, func.count().label("n")).group_by(TurnRow.conversation_id).subquery()
        active = aliased(TurnRow)
        q = (
            select(ConversationRow, func.coalesce(counts.c.n, 0), active.dialogue_count)
            .outerjoin(counts, counts.c.conversation_id == ConversationRow.id)
            .outerjoin(active, active.id == ConversationRow.active_turn_id)
        )
        if user_id is not None:
            q = q.where(ConversationRow.user_id == user_id)
        if source is not None:
            q = q.where(ConversationRow.source == source)
        if flow_id is not None:
            q = q.join(FlowVersionRow, FlowVersionRow.id == ConversationRow.flow_version_id).where(
                FlowVersionRow.flow_id == flow_id
            )
        rows = s.execute(q.order_by(ConversationRow.updated_at.desc(), ConversationRow.id)).all()
        return [_info(r, n, t) for r, n, t in rows]


def imported_sources(db: Database) -> set[tuple[object, object]]:
    """The (source format, id in the source) of every imported conversation, read from the
    conversations' own rows alone (no turn is counted)."""
    with db.session(write=False) as s:
        metas = s.scalars(select(ConversationRow.meta).where(ConversationRow.source == "import")).all()
    return {(m.get("source_format"), m.get("source_id")) for m in metas if isinstance(m, dict)}


def rename_conversation(db: Database, conversation_id: str, name: str) -> None:
    with db.session() as s:
        n = s.execute(
            update(ConversationRow).where(ConversationRow.id == conversation_id).values(name=name, updated_at=now())
        ).rowcount
        if not n:
            raise NotFoundError(f"no conversation with id {conversation_id!r}")


def set_conversation_fields(db: Database, conversation_id: str, **values) -> None:
    allowed = {"active_turn_id", "flow_version_id", "name", "meta", "inputs"}
    if set(values) - allowed:
        raise ValueError(f"cannot set {sorted(set(values) - allowed)}")
    with db.session() as s:
        s.execute(
            update(ConversationRow).where(ConversationRow.id == conversation_id).values(**values, updated_at=now())
        )


def delete_conversation(db: Database, conversation_id: str) -> None:
    """Delete a conversation and everything that belongs to it — turns, node runs, variables,
    their history — and nothing else."""
    with db.session() as s:
        row = s.get(ConversationRow, conversation_id)
        if row is None:
            raise NotFoundError(f"no conversation with id {conversation_id!r}")
        turn_ids = select(TurnRow.id).where(TurnRow.conversation_id == conversation_id)
        # Explicit deletes so the result never depends on the database enforcing cascades.
        s.execute(delete(NodeRunRow).where(NodeRunRow.turn_id.in_(turn_ids)))
        s.execute(delete(FeedbackRow).where(FeedbackRow.conversation_id == conversation_id))
        s.execute(delete(TurnRow).where(TurnRow.conversation_id == conversation_id))
        s.execute(delete(VariableChangeRow).where(VariableChangeRow.conversation_id == conversation_id))
        s.execute(delete(VariableRow).where(VariableRow.conversation_id == conversation_id))
        s.delete(row)


def load_conversation(db: Database, conversation_id: str, *, system_prompt: str = "") -> Conversation:
    """The stored conversation as a core Conversation (turns in creation order)."""
    info = get_conversation(db, conversation_id)
    turns = [turn_from_dict(d) for d in load_turn_rows(db, conversation_id)]
    remember_token_counts(turns)
    # An imported conversation keeps the format it was read from and the model its source names (what
    # memory fits it, and what it is counted for, depend on them).
    meta = {"active_turn_id": info.active_turn_id}
    if source_model(info.meta):
        meta[SOURCE_MODEL] = source_model(info.meta)
    return Conversation(
        id=info.id,
        turns=turns,
        system_prompt=system_prompt or info.meta.get("system_prompt", ""),
        source_format=str(info.meta.get("source_format") or "memlens"),
        name=info.name,
        meta=meta,
    )
