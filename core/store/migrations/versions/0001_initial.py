"""The initial schema: flows with versions, conversations as turn trees, node runs, variables.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "flows",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "flow_versions",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("flow_id", sa.String(36), sa.ForeignKey("flows.id", ondelete="CASCADE"), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("definition", JSON, nullable=False),
        sa.Column("structure", sa.String(64), nullable=False),
        sa.Column("note", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.UniqueConstraint("flow_id", "version"),
    )
    op.create_index("ix_flow_versions_flow_id", "flow_versions", ["flow_id"])
    op.create_table(
        "conversations",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column(
            "flow_version_id", sa.String(36), sa.ForeignKey("flow_versions.id", ondelete="RESTRICT"), nullable=True
        ),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("inputs", JSON, nullable=False),
        sa.Column("active_turn_id", sa.String(36), nullable=True),
        sa.Column("meta", JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_index("ix_conversations_flow_version_id", "conversations", ["flow_version_id"])
    op.create_index("ix_conversations_user_id", "conversations", ["user_id"])
    op.create_index("ix_conversations_updated_at", "conversations", ["updated_at"])
    op.create_table(
        "turns",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column(
            "conversation_id", sa.String(36), sa.ForeignKey("conversations.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("parent_id", sa.String(36), nullable=True),
        sa.Column("flow_version_id", sa.String(36), nullable=True),
        sa.Column("query", sa.Text, nullable=False),
        sa.Column("answer", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("inputs", JSON, nullable=False),
        sa.Column("dialogue_count", sa.Integer, nullable=False),
        sa.Column("answer_tokens", sa.Integer, nullable=False),
        sa.Column("messages", JSON, nullable=False),
        sa.Column("meta", JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_turns_conversation_seq", "turns", ["conversation_id", "seq"])
    op.create_table(
        "node_runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("turn_id", sa.String(36), sa.ForeignKey("turns.id", ondelete="CASCADE"), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("node_id", sa.String(255), nullable=False),
        sa.Column("node_type", sa.String(64), nullable=False),
        sa.Column("title", sa.String(255), nullable=False),
        sa.Column("emulated", sa.Boolean, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("ledger", JSON, nullable=True),
        sa.Column("prompt", JSON, nullable=True),
        sa.Column("reply", sa.Text, nullable=True),
        sa.Column("usage", JSON, nullable=True),
        sa.Column("latency_ms", sa.Float, nullable=True),
        sa.Column("data", JSON, nullable=False),
    )
    op.create_index("ix_node_runs_turn_id", "node_runs", ["turn_id"])
    op.create_table(
        "conversation_variables",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column(
            "conversation_id", sa.String(36), sa.ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("value_type", sa.String(32), nullable=False),
        sa.Column("value", JSON, nullable=True),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_table(
        "variable_changes",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "conversation_id", sa.String(36), sa.ForeignKey("conversations.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("turn_id", sa.String(36), nullable=True),
        sa.Column("turn_seq", sa.Integer, nullable=True),
        sa.Column("node_id", sa.String(255), nullable=False),
        sa.Column("operation", sa.String(32), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("old", JSON, nullable=True),
        sa.Column("new", JSON, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_variable_changes_conversation_id", "variable_changes", ["conversation_id"])
    op.create_table(
        "settings",
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("value", JSON, nullable=True),
    )


def downgrade() -> None:
    for table in (
        "settings",
        "variable_changes",
        "conversation_variables",
        "node_runs",
        "turns",
        "conversations",
        "flow_versions",
        "flows",
    ):
        op.drop_table(table)
