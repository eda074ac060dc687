"""Artifact references: a value of ARTIFACT_MIN_BYTES or more leaves its row for the artifact
store (tvmrepro.store.artifacts), the row keeping its SHA-256 in a `*_ref` column and an empty
value in its place.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

# table -> its columns that name an artifact (null: the value is in the row itself).
REFS = {
    "pass_ir": ("ir_ref",),
    "logs": ("stdout_ref", "stderr_ref"),
    "blobs": ("content_ref",),
    "results": ("data_ref",),
    "comparisons": ("data_ref",),
}


def upgrade() -> None:
    """Add the columns, unless a store made before migrations (by metadata.create_all of a
    later schema) has them already."""
    inspector = sa.inspect(op.get_bind())
    for table, columns in REFS.items():
        held = {c["name"] for c in inspector.get_columns(table)}
        missing = [name for name in columns if name not in held]
        if missing:
            with op.batch_alter_table(table) as batch:
                for name in missing:
                    batch.add_column(sa.Column(name, sa.String(64), nullable=True))


def downgrade() -> None:
    """Drop the columns."""
    for table, columns in REFS.items():
        with op.batch_alter_table(table) as batch:
            for name in columns:
                batch.drop_column(name)
