"""Long-term memories in the database: one table of memories keyed by namespace and user id, one
of their history.

The history table has no foreign key to the memories: like Mem0's history store, a memory's
rows outlive its deletion, ending with a DELETE row. Both tables are created by migration 0003;
0006 adds the namespace. :func:`long_term_store` gives the :class:`~core.memory.long_term.LongTermMemory`
over a database; :meth:`~core.memory.long_term.LongTermMemory.in_namespace` scopes it to one app's (or a
shared) namespace.
"""

from __future__ import annotations

from typing import Sequence

from sqlalchemy import Float, Index, Integer, String, Text, delete, func, select
from sqlalchemy.orm import Mapped, mapped_column

from core.memory.long_term import (
    SHARED,
    FactExtractor,
    LongTermMemory,
    MemoryEvent,
    MemoryItem,
    Retriever,
    Source,
    UserSummary,
)

from .db import Database
from .models import Base, JSONType


class LongTermMemoryRow(Base):
    __tablename__ = "long_term_memories"
    __table_args__ = (Index("ix_long_term_memories_user_hash", "user_id", "hash"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(255), index=True)
    namespace: Mapped[str] = mapped_column(String(255), default="", server_default="")  # migration 0006
    memory: Mapped[str] = mapped_column(Text)
    hash: Mapped[str] = mapped_column(String(32))  # md5 of the normalised text
    key: Mapped[str | None] = mapped_column(String(255), nullable=True)  # the fact key (name, order, …)
    source: Mapped[dict] = mapped_column(JSONType, default=dict)  # the turn of the latest change
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class LongTermMemoryEventRow(Base):
    __tablename__ = "long_term_memory_history"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    memory_id: Mapped[str] = mapped_column(String(36), index=True)  # no foreign key: history outlives deletion
    user_id: Mapped[str] = mapped_column(String(255), index=True)
    namespace: Mapped[str] = mapped_column(String(255), default="", server_default="")
    event: Mapped[str] = mapped_column(String(16))  # ADD | UPDATE | DELETE
    old_memory: Mapped[str | None] = mapped_column(Text, nullable=True)
    new_memory: Mapped[str | None] = mapped_column(Text, nullable=True)
    actor: Mapped[str] = mapped_column(String(64))  # extractor:offline | extractor:llm | user
    source: Mapped[dict] = mapped_column(JSONType, default=dict)
    created_at: Mapped[float] = mapped_column(Float)


def _item(row: LongTermMemoryRow) -> MemoryItem:
    return MemoryItem(
        id=row.id,
        user_id=row.user_id,
        memory=row.memory,
        hash=row.hash,
        key=row.key,
        created_at=row.created_at,
        updated_at=row.updated_at,
        source=Source.from_dict(row.source),
        namespace=row.namespace or "",
    )


def _event(row: LongTermMemoryEventRow) -> MemoryEvent:
    return MemoryEvent(
        memory_id=row.memory_id,
        user_id=row.user_id,
        event=row.event,
        old_memory=row.old_memory,
        new_memory=row.new_memory,
        created_at=row.created_at,
        actor=row.actor,
        source=Source.from_dict(row.source),
        id=row.id,
        namespace=row.namespace or "",
    )


class SqlMemoryBackend:
    """:class:`~core.memory.long_term.MemoryBackend` over the store; each write is one transaction."""

    def __init__(self, db: Database):
        self.db = db

    def memories(self, user_id: str, namespace: str = SHARED) -> list[MemoryItem]:
        with self.db.session(write=False) as s:
            rows = s.scalars(
                select(LongTermMemoryRow).where(
                    LongTermMemoryRow.user_id == user_id, LongTermMemoryRow.namespace == namespace
                )
            ).all()
            return [_item(r) for r in rows]

    def get(self, memory_id: str) -> MemoryItem | None:
        with self.db.session(write=False) as s:
            row = s.get(LongTermMemoryRow, memory_id)
            return _item(row) if row is not None else None

    def write(self, upserts: Sequence[MemoryItem], deletes: Sequence[str], events: Sequence[MemoryEvent]) -> None:
        with self.db.session() as s:
            for m in upserts:
                row = s.get(LongTermMemoryRow, m.id)
                if row is None:
                    s.add(
                        LongTermMemoryRow(
                            id=m.id,
                            user_id=m.user_id,
                            namespace=m.namespace,
                            memory=m.memory,
                            hash=m.hash,
                            key=m.key,
                            source=m.source.to_dict(),
                            created_at=m.created_at,
                            updated_at=m.updated_at,
                        )
                    )
                else:
                    row.memory, row.hash, row.key = m.memory, m.hash, m.key
                    row.source, row.updated_at = m.source.to_dict(), m.updated_at
            if deletes:
                s.execute(delete(LongTermMemoryRow).where(LongTermMemoryRow.id.in_(list(deletes))))
            for e in events:
                s.add(
                    LongTermMemoryEventRow(
                        memory_id=e.memory_id,
                        user_id=e.user_id,
                        namespace=e.namespace,
                        event=e.event,
                        old_memory=e.old_memory,
                        new_memory=e.new_memory,
                        actor=e.actor,
                        source=e.source.to_dict(),
                        created_at=e.created_at,
                    )
                )

    def history(self, memory_id: str) -> list[MemoryEvent]:
        with self.db.session(write=False) as s:
            rows = s.scalars(
                select(LongTermMemoryEventRow)
                .where(LongTermMemoryEventRow.memory_id == memory_id)
                .order_by(LongTermMemoryEventRow.created_at, LongTermMemoryEventRow.id)
            ).all()
            return [_event(r) for r in rows]

    def user_history(self, user_id: str, namespace: str = SHARED) -> list[MemoryEvent]:
        with self.db.session(write=False) as s:
            rows = s.scalars(
                select(LongTermMemoryEventRow)
                .where(LongTermMemoryEventRow.user_id == user_id, LongTermMemoryEventRow.namespace == namespace)
                .order_by(LongTermMemoryEventRow.created_at, LongTermMemoryEventRow.id)
            ).all()
            return [_event(r) for r in rows]

    def users(self) -> list[UserSummary]:
        with self.db.session(write=False) as s:
            rows = s.execute(
                select(
                    LongTermMemoryRow.namespace,
                    LongTermMemoryRow.user_id,
                    func.count(),
                    func.max(LongTermMemoryRow.updated_at),
                )
                .group_by(LongTermMemoryRow.namespace, LongTermMemoryRow.user_id)
                .order_by(LongTermMemoryRow.namespace, LongTermMemoryRow.user_id)
            ).all()
            return [UserSummary(u, int(n), float(t), ns or "") for ns, u, n, t in rows]


def long_term_store(
    db: Database, *, extractor: FactExtractor | None = None, retriever: Retriever | None = None
) -> LongTermMemory:
    """The long-term memory kept in ``db`` (offline extractor and BM25 retrieval unless given)."""
    return LongTermMemory(SqlMemoryBackend(db), extractor=extractor, retriever=retriever)


__all__ = ["LongTermMemoryRow", "LongTermMemoryEventRow", "SqlMemoryBackend", "long_term_store"]
