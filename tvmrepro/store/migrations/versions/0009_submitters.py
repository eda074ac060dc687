"""jobs.submitter and jobs.stored_bytes: who submitted a job and what it stored (a submitter's
budget of waiting runs and stored bytes counts them).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-16
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the two columns and their index (jobs stored before them have neither: no
    submitter's budget counts them), unless a store made before migrations (by
    metadata.create_all of a later schema) has them already."""
    inspector = sa.inspect(op.get_bind())
    if "submitter" in {c["name"] for c in inspector.get_columns("jobs")}:
        return
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("submitter", sa.String(64), nullable=True))
        batch.add_column(sa.Column("stored_bytes", sa.BigInteger, nullable=True))
    op.create_index("jobs_submitter_created", "jobs", ["submitter", "created_at"])


def downgrade() -> None:
    """Drop the index and the two columns."""
    op.drop_index("jobs_submitter_created", "jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("stored_bytes")
        batch.drop_column("submitter")
