"""jobs.cancel_digest: the SHA-256 of the token that cancels a job (given once, at submission).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add jobs.cancel_digest (jobs stored before it have none: no token cancels them), unless
    a store made before migrations (by metadata.create_all of a later schema) has it already."""
    columns = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("jobs")}
    if "cancel_digest" in columns:
        return
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("cancel_digest", sa.String(64), nullable=True))


def downgrade() -> None:
    """Drop jobs.cancel_digest."""
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("cancel_digest")
