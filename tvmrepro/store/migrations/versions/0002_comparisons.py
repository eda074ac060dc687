"""comparisons: a job's IR comparisons, computed once when its last run is stored.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the comparisons table (jobs finished before it get theirs on their next read)."""
    op.create_table(
        "comparisons",
        sa.Column("job_id", sa.String(32), sa.ForeignKey("jobs.id"), primary_key=True),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("runs", sa.Integer, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False))


def downgrade() -> None:
    """Drop the comparisons table."""
    op.drop_table("comparisons")
