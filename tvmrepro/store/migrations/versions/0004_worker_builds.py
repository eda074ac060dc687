"""workers.building: the environments whose images a worker is still building, and the step.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add workers.building (environment id -> the build's current step), unless a store made
    before migrations (by metadata.create_all of a later schema) has it already."""
    columns = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("workers")}
    if "building" in columns:
        return
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("building", sa.JSON, nullable=True))


def downgrade() -> None:
    """Drop workers.building."""
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("building")
