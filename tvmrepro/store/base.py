"""The store's database: its engine, write transactions and schema (the job store builds on it).

`Store` and the table families it is made of (jobs, results, workers, bisections...) all
read and write through one `StoreBase`: one engine, one way to open a write transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tvmrepro.settings import Settings
from tvmrepro.store import migrations
from tvmrepro.store import schema as t
from tvmrepro.store.artifacts import Artifacts
from tvmrepro.store.engine import make_engine

SCHEMA_ATTEMPTS = 5  # a first start may wait long for another's lock
# The database did not answer (down, or locked past its timeout): worth retrying later.
StoreAway = sa.exc.OperationalError
# The jobs a write transaction changed the view of (kept on its connection until it ends).
CHANGED_JOBS = "tvmrepro.changed_jobs"
# Told the jobs a committed write changed (tvmrepro/store/notices.py: a Redis message each).
ChangeNotices = Callable[[set[str]], None]


def changed(conn: Connection, job_ids: Iterable[str]) -> None:
    """Mark these jobs' views changed by the caller's write transaction: their revision moves
    on in it (what the API's long-polls watch), and they are announced once it commits. Called
    last in the transaction: on PostgreSQL it holds the jobs' rows' locks to its end."""
    found = sorted(set(job_ids))
    if found:
        conn.execute(t.jobs.update().where(t.jobs.c.id.in_(found))
                     .values(revision=t.jobs.c.revision + 1))
        conn.info.setdefault(CHANGED_JOBS, set()).update(found)


def store_exists(url: str) -> bool:
    """Whether the store at `url` may hold something (False: a SQLite file not made yet)."""
    parsed = sa.engine.make_url(url)
    return parsed.get_backend_name() != "sqlite" or Path(parsed.database or "").exists()


def default_artifacts() -> Path:
    """The artifact store's folder of a store opened without one: the settings' own."""
    return Settings.from_env().artifacts_dir


class StoreBase:
    """A database's engine, its write transactions and its schema, and the artifact store
    of its large values (`artifacts`: its folder; None: the settings', TVMREPRO_ARTIFACTS);
    thread-safe."""

    def __init__(self, url: str, pooled: bool = True, notices: ChangeNotices | None = None,
                 artifacts: Path | None = None) -> None:
        self.url, self.notices = url, notices
        self.engine = make_engine(url, pooled)
        self.artifacts = Artifacts(artifacts if artifacts is not None else default_artifacts())

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            conn.execution_options(write=True)
            try:
                with conn.begin():
                    yield conn
            finally:
                # The connection goes back to the pool: what it changed leaves it (and a
                # transaction rolled back announces nothing: the exception skips the notice).
                jobs: set[str] = conn.info.pop(CHANGED_JOBS, set())
        if jobs and self.notices is not None:
            self.notices(jobs)

    def revisions(self, job_ids: Iterable[str]) -> dict[str, int]:
        """Job id -> its revision (`changed`), for those that exist, in one query."""
        query = sa.select(t.jobs.c.id, t.jobs.c.revision).where(t.jobs.c.id.in_(set(job_ids)))
        with self.engine.connect() as conn:
            return {job_id: int(revision) for job_id, revision in conn.execute(query)}

    def write(self) -> AbstractContextManager[Connection]:
        """A write transaction on the store's tables (tests set rows up with it)."""
        return self._write()

    def create_schema(self) -> None:
        """Upgrade the schema to the newest revision (idempotent, safe at once in many places)."""
        for attempt in range(SCHEMA_ATTEMPTS):
            try:
                with self._write() as conn:
                    migrations.upgrade(conn)
                return
            except sa.exc.DBAPIError:
                # SQLite may refuse a writer that waited past its busy timeout.
                if attempt == SCHEMA_ATTEMPTS - 1:
                    raise
                time.sleep(0.2 * (attempt + 1))

    def drop_schema(self) -> None:
        """Drop every table of the store, the migrations' record included (tests clean up)."""
        t.metadata.drop_all(self.engine)
        with self._write() as conn:
            conn.execute(sa.text("DROP TABLE IF EXISTS alembic_version"))

    def ping(self) -> None:
        """Raise if the database does not answer."""
        with self.engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))

    def dispose(self) -> None:
        """Close pooled connections (after a fork, or at exit)."""
        self.engine.dispose()
