"""A change that appends to a list variable stores only the appended items.

A list that grows every turn (a log of topics, say) made every change row hold the whole list
twice (before and after), so each turn wrote more than the one before. A row with ``delta`` set
to ``append`` keeps ``old`` empty — it is the value the variable's previous change left — and
holds in ``new`` only the items appended; readers put the whole values back
(:func:`core.store.repo.variable_history`). ``chained`` on a variable says its current value is
the one its newest change row leaves, which is what lets the next change be stored that way.
Rows written before this revision keep their whole values.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("variable_changes") as batch:
        batch.add_column(sa.Column("delta", sa.String(16), nullable=True))
    with op.batch_alter_table("conversation_variables") as batch:
        batch.add_column(sa.Column("chained", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    # Rows stored as appends get their whole values back only through the readers; refuse to
    # drop the columns while such rows exist rather than leave histories that cannot be read.
    bind = op.get_bind()
    if bind.execute(sa.text("SELECT COUNT(*) FROM variable_changes WHERE delta IS NOT NULL")).scalar():
        raise RuntimeError("variable changes stored as appends exist; export the conversations first")
    with op.batch_alter_table("conversation_variables") as batch:
        batch.drop_column("chained")
    with op.batch_alter_table("variable_changes") as batch:
        batch.drop_column("delta")
