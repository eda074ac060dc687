"""Schema migrations on real SQLite and PostgreSQL: what they make is schema.py, stores at an
older revision or made before migrations are upgraded with their rows kept, and many processes
may start at once."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from tvmrepro.store import Store, migrations, open_store
from tvmrepro.store import schema as t

# The tables of a store made before migrations existed by a schema.py that already had
# workers.building (metadata.create_all of today's tables): revision 0004 finds its column there.
PREVIOUS = [t.jobs, t.runs, t.results, t.logs, t.pass_ir, t.admission, t.workers,
            t.fingerprints, t.bisections]
# The revision before workers.building (0004).
BEFORE_BUILDING = "0003"
STALE_S = 3600.0  # a heartbeat of the test is live


@pytest.fixture(params=("sqlite", "postgres"))
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.sqlite'}"
    else:
        yield request.getfixturevalue("clean_postgres")


def revision(store: Store) -> list[str]:
    """Every row of alembic_version."""
    with store.engine.connect() as conn:
        return list(conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars())


def test_the_migrations_make_exactly_the_schema(url: str) -> None:
    store = open_store(url)
    with store.engine.connect() as conn:
        differences = compare_metadata(MigrationContext.configure(conn), t.metadata)
    store.dispose()
    assert differences == []
    assert revision(store) == [migrations.head()]


def migrate_to(url: str, target: str) -> None:
    """Bring an empty database to the older revision `target` with the store's own migrations."""
    store = Store(url)
    with store.engine.begin() as conn:
        command.upgrade(migrations.alembic_config(conn), target)
    store.dispose()


def worker_columns(store: Store) -> set[str]:
    return {c["name"] for c in sa.inspect(store.engine).get_columns("workers")}


def fill(store: Store) -> tuple[str, str, float]:
    """An old store's rows: a job with a queued run, and a live worker serving "e"
    (without the column `building` where the store's workers table lacks it)."""
    job_id, run_id, now = uuid.uuid4().hex, uuid.uuid4().hex, time.time()
    with store.engine.begin() as conn:
        conn.execute(t.jobs.insert().values(
            id=job_id, kind="run", title="old", case={"script": "pass"}, environments=["e"],
            variants=["script"], bypass_cache=False, created_at=now))
        conn.execute(t.runs.insert().values(
            id=run_id, job_id=job_id, ordinal=0, variant="script", environment="e",
            state="queued", cache_key="k", cached=False, timeout_s=60, deliveries=0,
            created_at=now))
        # Only the columns named: the insert fits a workers table without `building`.
        conn.execute(t.workers.insert().values(id="w-old", environments=["e"], started_at=now,
                                               heartbeat_at=now))
    return job_id, run_id, now


def assert_upgraded_with_its_rows(url: str, job_id: str, run_id: str, now: float) -> None:
    """open_store upgrades the store to the newest revision; the old rows are all there and
    the worker's new column `building` is empty until its next heartbeat."""
    store = open_store(url)
    try:
        assert revision(store) == [migrations.head()]
        assert {"comparisons", "narrowings"} <= set(sa.inspect(store.engine).get_table_names())
        job = store.job(job_id)
        assert job is not None and job.title == "old" and [r.id for r in job.runs] == [run_id]
        assert store.waiting_count() == 1
        with store.engine.connect() as conn:
            assert conn.execute(sa.select(t.workers)).all() == [("w-old", ["e"], now, now, None, None)]
        assert store.live_environments(STALE_S) == {"e": 1}
        assert store.building_environments(STALE_S) == {}
        store.heartbeat("w-old", ["e"], building={"e2": "compiling"})  # the column takes values
        assert store.building_environments(STALE_S) == {"e2": "compiling"}
    finally:
        store.dispose()


def test_a_store_at_the_revision_before_workers_building_is_upgraded_with_its_rows(
        url: str) -> None:
    migrate_to(url, BEFORE_BUILDING)
    old = Store(url)
    assert revision(old) == [BEFORE_BUILDING] and "building" not in worker_columns(old)
    job_id, run_id, now = fill(old)
    old.dispose()
    assert_upgraded_with_its_rows(url, job_id, run_id, now)


@pytest.mark.parametrize("with_building", (False, True), ids=("before-building", "with-building"))
def test_a_store_made_before_migrations_is_upgraded_with_its_jobs(url: str,
                                                                   with_building: bool) -> None:
    """A store that metadata.create_all made: with the tables as revision 0001 makes them (a
    schema.py older than workers.building), or with today's (0004 finds its column there)."""
    old = Store(url)
    if with_building:
        t.metadata.create_all(old.engine, tables=PREVIOUS)
        with old.engine.begin() as conn:
            conn.execute(t.admission.insert().values(id=1, tickets=0))
    else:
        migrate_to(url, "0001")
        with old.engine.begin() as conn:  # made before migrations: no record of a revision
            conn.execute(sa.text("DROP TABLE alembic_version"))
    assert "alembic_version" not in sa.inspect(old.engine).get_table_names()
    assert ("building" in worker_columns(old)) is with_building
    job_id, run_id, now = fill(old)
    old.dispose()
    assert_upgraded_with_its_rows(url, job_id, run_id, now)


def test_many_processes_may_open_a_new_store_at_once(url: str) -> None:
    def open_one(_: int) -> str:
        store = open_store(url)
        store.dispose()
        return "opened"

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(open_one, range(8))) == ["opened"] * 8
    store = Store(url)
    assert revision(store) == [migrations.head()]
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(t.admission)).all() == [(1, 0)]
    store.dispose()


def test_the_newest_revision_is_alembic_s_head() -> None:
    from alembic.script import ScriptDirectory

    expected = ScriptDirectory.from_config(migrations.alembic_config()).get_current_head()
    assert migrations.head() == expected


def test_opening_a_current_store_does_not_import_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    Store(url).create_schema()  # made (and migrated) here, then opened by a fresh process
    opened = subprocess.run(
        [sys.executable, "-c", "import sys; from tvmrepro.store import Store; "
         f"Store({url!r}).create_schema(); print('alembic' in sys.modules)"],
        capture_output=True, text=True, check=True)
    assert opened.stdout.strip() == "False"
