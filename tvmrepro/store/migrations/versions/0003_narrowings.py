"""narrowings: a reduce or extract job's options, progress and answer.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the narrowings table."""
    op.create_table(
        "narrowings",
        sa.Column("job_id", sa.String(32), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("options", sa.JSON, nullable=False),
        sa.Column("progress", sa.JSON, nullable=True),
        sa.Column("result", sa.JSON, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("updated_at", sa.Float, nullable=False))


def downgrade() -> None:
    """Drop the narrowings table."""
    op.drop_table("narrowings")
