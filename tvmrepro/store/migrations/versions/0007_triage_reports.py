"""triage_reports: a triage job's reports in order, each with the run job of its script.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the triage_reports table, unless a store made before migrations (by
    metadata.create_all of a later schema) has it already."""
    if "triage_reports" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "triage_reports",
        sa.Column("job_id", sa.String(32), sa.ForeignKey("jobs.id"), primary_key=True),
        sa.Column("ordinal", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("report", sa.JSON, nullable=False),
        sa.Column("run_job", sa.String(32), nullable=True))
    op.create_index("ix_triage_reports_run_job", "triage_reports", ["run_job"])


def downgrade() -> None:
    """Drop the triage_reports table."""
    op.drop_index("ix_triage_reports_run_job", "triage_reports")
    op.drop_table("triage_reports")
