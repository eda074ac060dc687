"""jobs.revision: moves on in every transaction that changes a job's view, so that the API's
long-polls watch one integer per job rather than every run of it (service/waiting.py).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-20
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the column (every stored job starts at 0), unless a store made before migrations
    (by metadata.create_all of a later schema) has it already."""
    inspector = sa.inspect(op.get_bind())
    if "revision" not in {c["name"] for c in inspector.get_columns("jobs")}:
        with op.batch_alter_table("jobs") as batch:
            batch.add_column(sa.Column("revision", sa.Integer, nullable=False,
                                       server_default="0"))


def downgrade() -> None:
    """Drop the column."""
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("revision")
