"""Schema migrations on real SQLite and PostgreSQL: what they make is schema.py, stores made
before migrations are upgraded with their jobs kept, and many processes may start at once."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from tvmrepro import migrations
from tvmrepro import schema as t
from tvmrepro.store import Store, open_store

# The tables the store had before migrations existed (made by metadata.create_all).
PREVIOUS = [t.jobs, t.runs, t.results, t.logs, t.pass_ir, t.admission, t.workers,
            t.fingerprints, t.bisections]


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


def test_a_store_made_before_migrations_is_upgraded_with_its_jobs(url: str) -> None:
    old = Store(url)
    t.metadata.create_all(old.engine, tables=PREVIOUS)
    job_id, run_id, now = uuid.uuid4().hex, uuid.uuid4().hex, time.time()
    with old.engine.begin() as conn:
        conn.execute(t.admission.insert().values(id=1, tickets=1))
        conn.execute(t.jobs.insert().values(
            id=job_id, kind="run", title="old", case={"script": "pass"}, environments=["e"],
            variants=["script"], bypass_cache=False, created_at=now))
        conn.execute(t.runs.insert().values(
            id=run_id, job_id=job_id, ordinal=0, variant="script", environment="e",
            state="queued", cache_key="k", cached=False, timeout_s=60, deliveries=0,
            created_at=now))
    old.dispose()
    assert "alembic_version" not in sa.inspect(old.engine).get_table_names()
    store = open_store(url)
    assert revision(store) == [migrations.head()]
    assert "comparisons" in sa.inspect(store.engine).get_table_names()
    job = store.job(job_id)
    assert job is not None and job.title == "old" and [r.id for r in job.runs] == [run_id]
    assert store.waiting_count() == 1
    store.dispose()


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
