"""The store's tables (SQLAlchemy 2). Schema changes go through migrations in ``migrations/``.

Conversations are message trees: a turn row is one Dify message record (query, answer, status,
error) with its parent id. Like Dify's, it is written when the turn starts (status ``running``,
empty answer, ``answer_tokens`` 0) and completed in one transaction with every node run it made
(``succeeded`` or ``failed``); a turn whose process was killed is marked ``interrupted``.
Conversation variables keep their current value per conversation plus a change history that
says which node and operation (or a user edit) changed what, at which turn.
"""

from __future__ import annotations

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

JSONType = JSON().with_variant(JSONB(), "postgresql")


class Base(DeclarativeBase):
    pass


class FlowRow(Base):
    __tablename__ = "flows"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[float] = mapped_column(Float)
    versions: Mapped[list["FlowVersionRow"]] = relationship(
        back_populates="flow", cascade="all, delete-orphan", order_by="FlowVersionRow.version"
    )


class FlowVersionRow(Base):
    __tablename__ = "flow_versions"
    __table_args__ = (UniqueConstraint("flow_id", "version"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    flow_id: Mapped[str] = mapped_column(ForeignKey("flows.id", ondelete="CASCADE"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    definition: Mapped[dict] = mapped_column(JSONType)
    structure: Mapped[str] = mapped_column(String(64))  # hash of node ids, types, order and edges
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Float)
    flow: Mapped[FlowRow] = relationship(back_populates="versions")


class ConversationRow(Base):
    __tablename__ = "conversations"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    flow_version_id: Mapped[str | None] = mapped_column(
        ForeignKey("flow_versions.id", ondelete="RESTRICT"), index=True, nullable=True
    )
    user_id: Mapped[str] = mapped_column(String(255), index=True)
    name: Mapped[str] = mapped_column(String(255), default="")
    source: Mapped[str] = mapped_column(String(32), default="ui")  # ui | api | import | cli
    inputs: Mapped[dict] = mapped_column(JSONType, default=dict)
    active_turn_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    meta: Mapped[dict] = mapped_column(JSONType, default=dict)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float, index=True)


class TurnRow(Base):
    __tablename__ = "turns"
    __table_args__ = (
        Index("ix_turns_conversation_seq", "conversation_id", "seq"),
        Index(
            "ix_turns_running",
            "conversation_id",
            sqlite_where=text("status = 'running'"),
            postgresql_where=text("status = 'running'"),
        ),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)  # creation order within the conversation
    parent_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    flow_version_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    query: Mapped[str] = mapped_column(Text)
    answer: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16), default="succeeded")  # one of repo.TURN_STATUSES
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    inputs: Mapped[dict] = mapped_column(JSONType, default=dict)
    dialogue_count: Mapped[int] = mapped_column(Integer, default=1)
    answer_tokens: Mapped[int] = mapped_column(Integer, default=0)
    messages: Mapped[list] = mapped_column(JSONType, default=list)  # intermediate messages (tool calls, …)
    meta: Mapped[dict] = mapped_column(JSONType, default=dict)
    created_at: Mapped[float] = mapped_column(Float)
    node_runs: Mapped[list["NodeRunRow"]] = relationship(
        back_populates="turn", cascade="all, delete-orphan", order_by="NodeRunRow.seq", passive_deletes=True
    )


class NodeRunRow(Base):
    __tablename__ = "node_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    turn_id: Mapped[str] = mapped_column(ForeignKey("turns.id", ondelete="CASCADE"), index=True)
    seq: Mapped[int] = mapped_column(Integer)
    node_id: Mapped[str] = mapped_column(String(255))
    node_type: Mapped[str] = mapped_column(String(64))
    title: Mapped[str] = mapped_column(String(255), default="")
    emulated: Mapped[bool] = mapped_column(Boolean, default=True)
    status: Mapped[str] = mapped_column(String(16), default="succeeded")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    ledger: Mapped[dict | None] = mapped_column(JSONType, nullable=True)
    prompt: Mapped[list | None] = mapped_column(JSONType, nullable=True)
    reply: Mapped[str | None] = mapped_column(Text, nullable=True)
    usage: Mapped[dict | None] = mapped_column(JSONType, nullable=True)
    latency_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    data: Mapped[dict] = mapped_column(JSONType, default=dict)  # outputs, memory config and the rest
    turn: Mapped[TurnRow] = relationship(back_populates="node_runs")


class VariableRow(Base):
    __tablename__ = "conversation_variables"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    value_type: Mapped[str] = mapped_column(String(32))
    value: Mapped[object] = mapped_column(JSONType, nullable=True)
    description: Mapped[str] = mapped_column(Text, default="")
    # True when ``value`` is what the variable's newest change row leaves (see VariableChangeRow.delta).
    chained: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class VariableChangeRow(Base):
    __tablename__ = "variable_changes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"), index=True)
    # Points at a turn row written before the turn ran (Dify persists assigner writes at node
    # completion, so a change outlives its turn's failure or its process's death). No foreign key:
    # imported histories may name turns their file does not hold.
    turn_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    turn_seq: Mapped[int | None] = mapped_column(Integer, nullable=True)
    node_id: Mapped[str] = mapped_column(String(255))  # "user" for a live edit
    operation: Mapped[str] = mapped_column(String(32))
    name: Mapped[str] = mapped_column(String(255))
    old: Mapped[object] = mapped_column(JSONType, nullable=True)
    new: Mapped[object] = mapped_column(JSONType, nullable=True)
    # None: ``old`` and ``new`` are whole values. "append": ``old`` is empty (it is the value the
    # variable's previous change row leaves) and ``new`` holds only the items appended to it.
    delta: Mapped[str | None] = mapped_column(String(16), nullable=True)
    created_at: Mapped[float] = mapped_column(Float)


class SettingRow(Base):
    __tablename__ = "settings"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    value: Mapped[object] = mapped_column(JSONType, nullable=True)


class AppKeyRow(Base):
    """A Service API key: serves one flow (the app), stored only as a hash, revocable."""

    __tablename__ = "app_keys"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    flow_id: Mapped[str] = mapped_column(ForeignKey("flows.id", ondelete="CASCADE"), index=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True, index=True)  # sha256 of the key, hex
    hint: Mapped[str] = mapped_column(String(32))  # "app-AbCd…wxyz": recognisable in a list, useless as a key
    name: Mapped[str] = mapped_column(String(255), default="")
    created_at: Mapped[float] = mapped_column(Float)
    revoked_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class FeedbackRow(Base):
    """A rating of one answer (Dify's ``message_feedbacks``): ``like`` or ``dislike`` and a comment,
    one per message and user; revoking a rating deletes the row."""

    __tablename__ = "message_feedbacks"
    __table_args__ = (UniqueConstraint("message_id", "user_id", name="uq_message_feedbacks_message_user"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    message_id: Mapped[str] = mapped_column(ForeignKey("turns.id", ondelete="CASCADE"), index=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[str] = mapped_column(String(255))
    rating: Mapped[str] = mapped_column(String(16))  # like | dislike
    content: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
