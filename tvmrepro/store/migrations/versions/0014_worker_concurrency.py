"""workers.concurrency: how many runs a live worker takes at once, so that the release of
waiting runs (tvmrepro.jobs.release) keeps each lane's window to what the workers can take.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the column (null: a worker of an earlier version, counted as one slot), unless a
    store made before migrations (by metadata.create_all of a later schema) has it already."""
    inspector = sa.inspect(op.get_bind())
    if "concurrency" not in {c["name"] for c in inspector.get_columns("workers")}:
        with op.batch_alter_table("workers") as batch:
            batch.add_column(sa.Column("concurrency", sa.Integer, nullable=True))


def downgrade() -> None:
    """Drop the column."""
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("concurrency")
