"""known_issues: the signature of each triaged issue's bug, so that a job failing with it names
the issue a likely duplicate.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the known_issues table, unless a store made before migrations (by
    metadata.create_all of a later schema) has it already."""
    if "known_issues" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "known_issues",
        sa.Column("number", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("url", sa.Text, nullable=True),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=True),
        sa.Column("signature", sa.Text, nullable=False),
        sa.Column("recorded_at", sa.Float, nullable=False))


def downgrade() -> None:
    """Drop the known_issues table."""
    op.drop_table("known_issues")
