"""github_deliveries, github_issues, github_jobs, github_floods, github_actions: the GitHub
bot's webhook deliveries (replays refused), its state per issue, the jobs it watches, the
groups of a flood and the log of its actions.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-18
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

ID = sa.String(32)
REPO = sa.String(140)


def _tables() -> dict[str, list[sa.Column[object]]]:
    return {
        "github_deliveries": [
            sa.Column("delivery_id", sa.String(64), primary_key=True),
            sa.Column("event", sa.String(64), nullable=False),
            sa.Column("action", sa.String(64), nullable=True),
            sa.Column("received_at", sa.Float, nullable=False)],
        "github_issues": [
            sa.Column("repo", REPO, primary_key=True),
            sa.Column("number", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("inbox", sa.JSON, nullable=False),
            sa.Column("state", sa.JSON, nullable=False),
            sa.Column("lease", sa.String(32), nullable=True),
            sa.Column("lease_until", sa.Float, nullable=True),
            sa.Column("updated_at", sa.Float, nullable=False)],
        "github_jobs": [
            sa.Column("job_id", ID, primary_key=True),
            sa.Column("repo", REPO, primary_key=True),
            sa.Column("number", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("created_at", sa.Float, nullable=False)],
        "github_floods": [
            sa.Column("repo", REPO, primary_key=True),
            sa.Column("signature", sa.String(64), primary_key=True),
            sa.Column("leader", sa.Integer, nullable=False),
            sa.Column("started_at", sa.Float, nullable=False)],
        "github_actions": [
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("at", sa.Float, nullable=False),
            sa.Column("repo", REPO, nullable=True),
            sa.Column("number", sa.Integer, nullable=True),
            sa.Column("action", sa.String(32), nullable=False),
            sa.Column("detail", sa.Text, nullable=False),
            sa.Column("http_status", sa.Integer, nullable=True)],
    }


def upgrade() -> None:
    """Add the bot's tables, each unless a store made before migrations (by
    metadata.create_all of a later schema) has it already."""
    present = set(sa.inspect(op.get_bind()).get_table_names())
    for name, columns in _tables().items():
        if name not in present:
            op.create_table(name, *columns)
            if name == "github_actions":
                op.create_index("ix_github_actions_at", name, ["at"])


def downgrade() -> None:
    """Drop the bot's tables."""
    op.drop_index("ix_github_actions_at", "github_actions")
    for name in reversed(list(_tables())):
        op.drop_table(name)
