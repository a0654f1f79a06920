"""Turns are written when they start (status ``running``): an index finds the ones still running.

Readers look for running turns of a conversation on every load, to show a turn whose process
was killed as interrupted; the partial index keeps that look-up to the few running rows.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

RUNNING = sa.text("status = 'running'")


def upgrade() -> None:
    op.create_index("ix_turns_running", "turns", ["conversation_id"], sqlite_where=RUNNING, postgresql_where=RUNNING)


def downgrade() -> None:
    op.drop_index("ix_turns_running", table_name="turns")
