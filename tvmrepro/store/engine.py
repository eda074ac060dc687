"""Engines for the store's databases: SQLite (WAL, writers lock up front) and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool

from tvmrepro.errors import ReproError

SQLITE_BUSY_S = 30.0  # how long a SQLite writer waits for another's lock


def _sqlite_engine(url: str, pooled: bool) -> Engine:
    database = sa.engine.make_url(url).database
    if database and database != ":memory:":
        # SQLite creates the file but not its directory: a fresh home has none yet.
        try:
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ReproError(f"cannot create the store's directory for {database}: {exc.strerror}") from exc
    extra: dict[str, Any] = {} if pooled else {"poolclass": NullPool}
    engine = sa.create_engine(url, connect_args={"timeout": SQLITE_BUSY_S,
                                                 "check_same_thread": False}, **extra)

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # SQLAlchemy, not the driver, begins transactions
        cursor = dbapi_conn.cursor()
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        # A writer takes the lock up front: upgrading a read lock later fails at once
        # ("database is locked") instead of waiting.
        immediate = conn.get_execution_options().get("write")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def make_engine(url: str, pooled: bool = True) -> Engine:
    """An engine for a store URL (sqlite:///..., postgresql+psycopg://...)."""
    if url.startswith("sqlite"):
        return _sqlite_engine(url, pooled)
    if url.startswith("postgresql://"):  # the common spelling; psycopg 3 is the driver we ship
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    if not pooled:
        return sa.create_engine(url, poolclass=NullPool)
    return sa.create_engine(url, pool_pre_ping=True)
