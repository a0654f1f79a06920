"""Service API keys: each serves one flow, is stored as a hash, and can be revoked.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "app_keys",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("flow_id", sa.String(36), sa.ForeignKey("flows.id", ondelete="CASCADE"), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("hint", sa.String(32), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("revoked_at", sa.Float, nullable=True),
    )
    op.create_index("ix_app_keys_flow_id", "app_keys", ["flow_id"])
    op.create_index("ix_app_keys_key_hash", "app_keys", ["key_hash"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_app_keys_key_hash", table_name="app_keys")
    op.drop_index("ix_app_keys_flow_id", table_name="app_keys")
    op.drop_table("app_keys")
