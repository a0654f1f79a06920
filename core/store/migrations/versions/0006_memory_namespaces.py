"""Long-term memory namespaces: a flow's memories are its own unless it names a shared namespace.

Memories written before this revision keep the shared namespace ("").

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("long_term_memories") as batch:
        batch.add_column(sa.Column("namespace", sa.String(255), nullable=False, server_default=""))
    with op.batch_alter_table("long_term_memory_history") as batch:
        batch.add_column(sa.Column("namespace", sa.String(255), nullable=False, server_default=""))
    op.create_index("ix_long_term_memories_namespace_user", "long_term_memories", ["namespace", "user_id"])
    op.create_index("ix_long_term_memory_history_namespace_user", "long_term_memory_history", ["namespace", "user_id"])


def downgrade() -> None:
    op.drop_index("ix_long_term_memory_history_namespace_user", table_name="long_term_memory_history")
    op.drop_index("ix_long_term_memories_namespace_user", table_name="long_term_memories")
    with op.batch_alter_table("long_term_memory_history") as batch:
        batch.drop_column("namespace")
    with op.batch_alter_table("long_term_memories") as batch:
        batch.drop_column("namespace")
