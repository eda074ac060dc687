"""runs_finished_at and results_status: indexes for GET /metrics, so that the runs finished
within a recent window (its durations and queue waits) are read without a scan of every run,
and the results are counted by status from the index alone, not from their rows.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

INDEXES = {"runs_finished_at": ("runs", ["finished_at"]),
           "results_status": ("results", ["status"])}


def upgrade() -> None:
    """Add each index, unless a store made before migrations (by metadata.create_all of a later
    schema) has it already."""
    inspector = sa.inspect(op.get_bind())
    for name, (table, columns) in INDEXES.items():
        if name not in {index["name"] for index in inspector.get_indexes(table)}:
            op.create_index(name, table, columns)


def downgrade() -> None:
    """Drop the indexes."""
    for name, (table, _) in INDEXES.items():
        op.drop_index(name, table)
