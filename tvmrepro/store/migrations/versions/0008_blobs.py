"""blobs: the content of each file a case carries, once by its SHA-256.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-09
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the blobs table, unless a store made before migrations (by metadata.create_all of a
    later schema) has it already."""
    if "blobs" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "blobs",
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("content", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False))


def downgrade() -> None:
    """Drop the blobs table."""
    op.drop_table("blobs")
