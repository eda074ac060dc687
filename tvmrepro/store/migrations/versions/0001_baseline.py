"""The schema the store had before migrations: jobs, runs, results, logs, pass IR, admission,
workers, fingerprints and bisections.

A store made before migrations existed has some or all of these tables already (made by
metadata.create_all) and no alembic_version: only the missing tables are created, so
such a store, of any earlier version, is upgraded in place with its jobs kept.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ID = sa.String(32)


def _jobs() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", ID, primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("case", sa.JSON, nullable=False),
        sa.Column("environments", sa.JSON, nullable=False),
        sa.Column("variants", sa.JSON, nullable=False),
        sa.Column("bypass_cache", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False))


def _runs() -> None:
    op.create_table(
        "runs",
        sa.Column("id", ID, primary_key=True),
        sa.Column("job_id", ID, sa.ForeignKey("jobs.id"), nullable=False),
        sa.Column("ordinal", sa.Integer, nullable=False),
        sa.Column("variant", sa.String(64), nullable=False),
        sa.Column("environment", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("cache_key", sa.String(64), nullable=False),
        sa.Column("cached", sa.Boolean, nullable=False),
        sa.Column("result_id", ID, nullable=True),
        sa.Column("timeout_s", sa.Integer, nullable=False),
        sa.Column("deliveries", sa.Integer, nullable=False),
        sa.Column("claimed_by", sa.String(128), nullable=True),
        sa.Column("claimed_at", sa.Float, nullable=True),
        sa.Column("published_at", sa.Float, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("finished_at", sa.Float, nullable=True))
    op.create_index("ix_runs_job_id", "runs", ["job_id"])
    op.create_index("ix_runs_cache_key", "runs", ["cache_key"])
    op.create_index("runs_state_environment", "runs", ["state", "environment"])


def _results() -> None:
    op.create_table(
        "results",
        sa.Column("run_id", ID, sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("stage", sa.String(128), nullable=True),
        sa.Column("signature", sa.Text, nullable=True),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False))


def _logs() -> None:
    op.create_table(
        "logs",
        sa.Column("run_id", ID, sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("stdout", sa.Text, nullable=False),
        sa.Column("stderr", sa.Text, nullable=False),
        sa.Column("truncated", sa.Boolean, nullable=False))


def _pass_ir() -> None:
    op.create_table(
        "pass_ir",
        sa.Column("run_id", ID, sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("idx", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("seconds", sa.Float, nullable=False),
        sa.Column("functions", sa.JSON, nullable=False),
        sa.Column("ir", sa.Text, nullable=False))


def _admission() -> None:
    op.create_table(
        "admission",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("tickets", sa.Integer, nullable=False))


def _workers() -> None:
    op.create_table(
        "workers",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("environments", sa.JSON, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("heartbeat_at", sa.Float, nullable=False))


def _fingerprints() -> None:
    op.create_table(
        "fingerprints",
        sa.Column("environment", sa.String(64), primary_key=True),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False))


def _bisections() -> None:
    op.create_table(
        "bisections",
        sa.Column("job_id", ID, primary_key=True),
        sa.Column("options", sa.JSON, nullable=False),
        sa.Column("result", sa.JSON, nullable=True),
        sa.Column("seen", sa.Integer, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False))


# In dependency order: a table comes after those its foreign keys name.
TABLES: dict[str, Callable[[], None]] = {
    "jobs": _jobs, "runs": _runs, "results": _results, "logs": _logs, "pass_ir": _pass_ir,
    "admission": _admission, "workers": _workers, "fingerprints": _fingerprints,
    "bisections": _bisections}


def upgrade() -> None:
    """Create the tables this store lacks, and the admission row that submissions lock."""
    existing = set(sa.inspect(op.get_bind()).get_table_names())
    for name, create in TABLES.items():
        if name not in existing:
            create()
    admission = sa.table("admission", sa.column("id", sa.Integer), sa.column("tickets", sa.Integer))
    if op.get_bind().execute(sa.select(admission.c.id)).first() is None:
        op.bulk_insert(admission, [{"id": 1, "tickets": 0}])


def downgrade() -> None:
    """Drop every table."""
    for name in reversed(TABLES):
        op.drop_table(name)
