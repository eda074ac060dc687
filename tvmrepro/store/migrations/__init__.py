"""The store's schema migrations (Alembic): every process that opens a store upgrades it first.

`upgrade(connection)` brings a database to the newest revision inside the caller's
write transaction, under a lock that serializes processes starting at once
(PostgreSQL: a transaction-scoped advisory lock; SQLite: the database's write
lock, which the store takes with BEGIN IMMEDIATE). DDL is transactional on
both, so a failed upgrade leaves nothing half made. A store made before
migrations existed (tables, no alembic_version) is upgraded like an empty one:
the first revision creates only the tables it lacks.

A schema change is a new revision in versions/ (`alembic revision` with
tvmrepro/store/migrations/alembic.ini, or by hand) and the same change in
tvmrepro/store/schema.py; tests/tvmrepro/test_migrations.py fails while the two disagree.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parent
# Any fixed number: PostgreSQL advisory locks are named by integers.
ADVISORY_LOCK_KEY = 0x7476_6D72  # "tvmr"


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's configuration for the store's migrations (run on `connection`, when given)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


# Every process that opens a store checks its revision, and nearly always finds it current:
# that check reads versions/ and the alembic_version table itself. Alembic (half a second of
# imports in each API, worker and command process) is imported only to upgrade.
@functools.cache
def head() -> str:
    """The newest revision: the one that no revision in versions/ names as its parent."""
    revisions: set[str] = set()
    parents: set[str | None] = set()
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        if path.name == "__init__.py":
            continue
        names = {target.id: node.value for node in ast.parse(path.read_text()).body
                 if isinstance(node, ast.Assign) for target in node.targets
                 if isinstance(target, ast.Name)}
        revisions.add(ast.literal_eval(names["revision"]))
        parents.add(ast.literal_eval(names["down_revision"]))
    (newest,) = revisions - parents  # the revisions form one line
    return newest


def current(connection: Connection) -> str | None:
    """The revision a database is at (None: never migrated)."""
    if not sa.inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()


def upgrade(connection: Connection) -> None:
    """Bring the database of `connection` (in a write transaction) to the newest revision."""
    if connection.dialect.name == "postgresql":
        connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"),
                           {"key": ADVISORY_LOCK_KEY})
    if current(connection) != head():  # read under the lock: another process may have done it
        from alembic import command

        command.upgrade(alembic_config(connection), "head")
