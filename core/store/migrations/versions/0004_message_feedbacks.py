"""Answer ratings sent through the Service API (``POST /v1/messages/{id}/feedbacks``).

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "message_feedbacks",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("message_id", sa.String(36), sa.ForeignKey("turns.id", ondelete="CASCADE"), nullable=False),
        sa.Column(
            "conversation_id", sa.String(36), sa.ForeignKey("conversations.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("rating", sa.String(16), nullable=False),
        sa.Column("content", sa.Text, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.UniqueConstraint("message_id", "user_id", name="uq_message_feedbacks_message_user"),
    )
    op.create_index("ix_message_feedbacks_message_id", "message_feedbacks", ["message_id"])
    op.create_index("ix_message_feedbacks_conversation_id", "message_feedbacks", ["conversation_id"])


def downgrade() -> None:
    op.drop_index("ix_message_feedbacks_conversation_id", table_name="message_feedbacks")
    op.drop_index("ix_message_feedbacks_message_id", table_name="message_feedbacks")
    op.drop_table("message_feedbacks")
