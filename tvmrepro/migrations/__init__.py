"""The store's schema migrations (Alembic): every process that opens a store upgrades it first.

`upgrade(connection)` brings a database to the newest revision inside the caller's
write transaction, under a lock that serializes processes starting at once
(PostgreSQL: a transaction-scoped advisory lock; SQLite: the database's write
lock, which the store takes with BEGIN IMMEDIATE). DDL is transactional on
both, so a failed upgrade leaves nothing half made. A store made before
migrations existed (tables, no alembic_version) is upgraded like an empty one:
the first revision creates only the tables it lacks.

A schema change is a new revision in versions/ (`alembic revision` with
tvmrepro/migrations/alembic.ini, or by hand) and the same change in tvmrepro/schema.py;
tests/tvmrepro/test_migrations.py fails while the two disagree.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

MIGRATIONS_DIR = Path(__file__).resolve().parent
# Any fixed number: PostgreSQL advisory locks are named by integers.
ADVISORY_LOCK_KEY = 0x7476_6D72  # "tvmr"


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's configuration for the store's migrations (run on `connection`, when given)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def head() -> str:
    """The newest revision."""
    found = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert found is not None  # versions/ is never empty
    return found


def current(connection: Connection) -> str | None:
    """The revision a database is at (None: never migrated)."""
    return MigrationContext.configure(connection).get_current_revision()


def upgrade(connection: Connection) -> None:
    """Bring the database of `connection` (in a write transaction) to the newest revision."""
    if connection.dialect.name == "postgresql":
        connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"),
                           {"key": ADVISORY_LOCK_KEY})
    if current(connection) != head():  # read under the lock: another process may have done it
        command.upgrade(alembic_config(connection), "head")
