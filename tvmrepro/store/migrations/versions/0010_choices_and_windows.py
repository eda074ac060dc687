"""jobs.environments_why and bisections.windows: why a job's environments are those (the
default set, named, every served one), and the commit windows and suspects that a bisect job's
submitter computed from a history of its own.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-17
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the two columns (rows stored before them have neither: their views say nothing of
    why, their bisections carry the step's windows only), unless a store made before
    migrations (by metadata.create_all of a later schema) has them already."""
    inspector = sa.inspect(op.get_bind())
    if "environments_why" not in {c["name"] for c in inspector.get_columns("jobs")}:
        with op.batch_alter_table("jobs") as batch:
            batch.add_column(sa.Column("environments_why", sa.Text, nullable=True))
    if "windows" not in {c["name"] for c in inspector.get_columns("bisections")}:
        with op.batch_alter_table("bisections") as batch:
            batch.add_column(sa.Column("windows", sa.JSON, nullable=True))


def downgrade() -> None:
    """Drop the two columns."""
    with op.batch_alter_table("bisections") as batch:
        batch.drop_column("windows")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("environments_why")
