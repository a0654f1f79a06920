"""Long-term memory: memories keyed by user id, and the history of every change to them.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "long_term_memories",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("memory", sa.Text, nullable=False),
        sa.Column("hash", sa.String(32), nullable=False),
        sa.Column("key", sa.String(255), nullable=True),
        sa.Column("source", JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_index("ix_long_term_memories_user_id", "long_term_memories", ["user_id"])
    op.create_index("ix_long_term_memories_user_hash", "long_term_memories", ["user_id", "hash"])
    # No foreign key to long_term_memories: a memory's history outlives its deletion.
    op.create_table(
        "long_term_memory_history",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("memory_id", sa.String(36), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("event", sa.String(16), nullable=False),
        sa.Column("old_memory", sa.Text, nullable=True),
        sa.Column("new_memory", sa.Text, nullable=True),
        sa.Column("actor", sa.String(64), nullable=False),
        sa.Column("source", JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_long_term_memory_history_memory_id", "long_term_memory_history", ["memory_id"])
    op.create_index("ix_long_term_memory_history_user_id", "long_term_memory_history", ["user_id"])


def downgrade() -> None:
    op.drop_index("ix_long_term_memory_history_user_id", table_name="long_term_memory_history")
    op.drop_index("ix_long_term_memory_history_memory_id", table_name="long_term_memory_history")
    op.drop_table("long_term_memory_history")
    op.drop_index("ix_long_term_memories_user_hash", table_name="long_term_memories")
    op.drop_index("ix_long_term_memories_user_id", table_name="long_term_memories")
    op.drop_table("long_term_memories")
