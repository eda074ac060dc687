"""What long-polls cost while nothing changes: one watcher per API process reads the waited jobs'
revisions (one query for all of them, at its tick; with Redis notices, once a second), and no
waiting request reads the store, however many wait; a change wakes every waiter, on the
embedded path (the revision's tick) and on the Redis path (a notice; the slow check when the
notice is lost).

In process: the API's JobService on a real SQLite store (its statements counted by a SQLAlchemy
event listener on its engine), a job of many runs stored as a worker leaves it, the writes
made by a second store as a worker's, and a real Redis (a channel under a prefix of the test's
own) for the notices."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa

from service.jobs import JobService
from service.waiting import NOTICED_CHECK_S, WAIT_TICK_S, JobWatcher, Shown
from tests.conftest import NEW_ENV
from tests.fixtures.databases import REDIS_URL
from tvmrepro.lifecycle import RunState
from tvmrepro.queue import make_celery
from tvmrepro.results import Result, Status
from tvmrepro.settings import Settings
from tvmrepro.store import Store, open_store
from tvmrepro.store.notices import notices_for
from tvmrepro.store.rows import JobRow, RunRow

pytestmark = [pytest.mark.timeout(120)]
RUNS = 500
WAITERS = 12
QUIET_S = 1.5  # how long nothing changes while the statements are counted
WAIT_S = 30  # each long-poll's wait: one that missed the change answers only at its end


def service_of(home: Path, **given: str) -> JobService:
    """The API's side of the service on a fresh home: threads enough for every waiter."""
    settings = Settings.from_env({"TVMREPRO_HOME": str(home),
                                  "TVMREPRO_API_THREADS": str(2 * WAITERS + 2), **given})
    return JobService(settings, open_store(settings.store_url), make_celery(settings))


def stored_job(store: Store, runs: int = RUNS) -> tuple[str, list[str]]:
    """A run job of `runs` runs, all but one running (none has ended); its id and its runs'."""
    job_id, now = uuid.uuid4().hex, time.time()
    variants = [f"v{n}" for n in range(runs)]
    job = JobRow(id=job_id, kind="run", title="many runs", case={"source": "print(1)\n"},
                 environments=[NEW_ENV], variants=variants, created_at=now)
    rows = [RunRow(id=uuid.uuid4().hex, job_id=job_id, ordinal=n, variant=variant,
                   environment=NEW_ENV, state=RunState.RUNNING if n else RunState.QUEUED,
                   cache_key=uuid.uuid4().hex, timeout_s=120, deliveries=1 if n else 0,
                   claimed_by="host:1:1.00" if n else None, claimed_at=now if n else None,
                   created_at=now)
            for n, variant in enumerate(variants)]
    store.submit(job, rows, cap=10 * runs)
    return job_id, [row.id for row in rows]


@contextmanager
def statements(engine: sa.engine.Engine) -> Iterator[list[str]]:
    """Every query run on `engine` meanwhile."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement != "BEGIN":  # SQLite's transactions, begun by the store (engine.py)
            seen.append(" ".join(statement.split()))

    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)


def waiting(service: JobService, job_id: str, count: int) -> tuple[str, list[Future[Shown | None]]]:
    """`count` long-polls of the job from its current ETag, once every one of them waits."""
    seen = service.waits.view_after(job_id, None, 0)
    assert seen is not None and not seen.view.status.finished
    pool = ThreadPoolExecutor(max_workers=count)
    polls = [pool.submit(service.waits.view_after, job_id, seen.etag, WAIT_S)
             for _ in range(count)]
    pool.shutdown(wait=False)
    watcher, free = service.waits.watcher, service.settings.api_threads // 2 - count
    deadline = time.monotonic() + 60
    # Each holds its watch and its slot: past its first view, into the wait.
    while len(watcher.watches.get(job_id, ())) < count or service.waits.slots._value > free:
        assert time.monotonic() < deadline, "the long-polls never all waited"
        assert not any(poll.done() for poll in polls), "a long-poll was answered at once"
        time.sleep(0.01)
    return seen.etag, polls


def quiet_reads(service: JobService) -> tuple[list[str], float]:
    """The statements the API runs in QUIET_S while nothing changes, and how long that was."""
    with statements(service.store.engine) as seen:
        started = time.monotonic()
        time.sleep(QUIET_S)
        took = time.monotonic() - started
    return list(seen), took


def assert_revisions_only(seen: list[str], took: float, every_s: float) -> None:
    """Only the watcher's reads of the revisions, at most one per `every_s` (and one more)."""
    assert seen, "the watcher read nothing: it does not watch the store"
    assert all(s.startswith("SELECT jobs.id, jobs.revision FROM jobs") for s in seen), seen[:5]
    assert len(seen) <= took / every_s + 2, (len(seen), took)


def finish_one(writer: Store, run_id: str) -> None:
    """A worker stores one run's result."""
    assert writer.finish(run_id, Result(environment=NEW_ENV, variant="v1", status=Status.OK))


def assert_all_woken(polls: list[Future[Shown | None]], etag: str, run_id: str) -> None:
    """Every long-poll answered the change, before its wait's end (a missed change answers the
    old view, at its end)."""
    for poll in polls:
        answer = poll.result(timeout=WAIT_S - 5)
        assert answer is not None and answer.etag != etag
        assert {r.id: r.state for r in answer.view.runs}[run_id] == "done"


@pytest.mark.parametrize("count", [1, WAITERS])
def test_waiting_reads_one_query_a_tick_however_many_wait(tmp_path: Path, count: int) -> None:
    service = service_of(tmp_path / "home")
    job_id, runs = stored_job(service.store)
    etag, polls = waiting(service, job_id, count)
    seen, took = quiet_reads(service)
    # No view is built and no run is read while nothing changes (before, each waiter read every
    # run of the job 50 times a second): the same few reads for one waiter and for twelve.
    assert_revisions_only(seen, took, WAIT_TICK_S)
    writer = Store(service.settings.store_url)
    finish_one(writer, runs[1])
    assert_all_woken(polls, etag, runs[1])
    writer.dispose()
    service.store.dispose()


@pytest.fixture
def redis_service(tmp_path: Path, redis_prefix: str) -> Iterator[JobService]:
    """A JobService whose broker is the test's Redis, its watcher subscribed to the notices."""
    service = service_of(tmp_path / "home", REDIS_URL=REDIS_URL, TVMREPRO_REDIS_PREFIX=redis_prefix)
    yield service
    service.store.dispose()


def subscribed(watcher: JobWatcher) -> None:
    """Once the watcher's listener hears the channel (a notice before that is lost)."""
    assert watcher.notices is not None
    client = redis.Redis.from_url(REDIS_URL)
    deadline = time.monotonic() + 30
    while not dict(client.pubsub_numsub(watcher.notices.channel)).get(
            watcher.notices.channel.encode()):
        assert time.monotonic() < deadline, "the watcher never subscribed"
        time.sleep(0.02)
    client.close()


def test_with_redis_a_notice_wakes_the_waiters_and_nothing_else_is_read(
        redis_service: JobService) -> None:
    service, watcher = redis_service, redis_service.waits.watcher
    job_id, runs = stored_job(service.store)
    etag, polls = waiting(service, job_id, WAITERS)
    subscribed(watcher)
    seen, took = quiet_reads(service)
    assert_revisions_only(seen, took, NOTICED_CHECK_S)
    # Only a notice can wake them now: past the slow check to come, the next would come after
    # their wait's end.
    watcher.check_s = 3600.0
    with statements(service.store.engine) as seen:
        deadline = time.monotonic() + 30
        while not seen:
            assert time.monotonic() < deadline, "the slow check never came"
            time.sleep(0.01)
    settings = service.settings
    writer = Store(settings.store_url, notices=notices_for(settings.redis_url, settings.redis_prefix))
    finish_one(writer, runs[1])
    assert_all_woken(polls, etag, runs[1])
    writer.dispose()


def test_with_redis_a_lost_notice_is_seen_by_the_slow_check(redis_service: JobService) -> None:
    service = redis_service
    job_id, runs = stored_job(service.store, runs=20)
    etag, polls = waiting(service, job_id, 2)
    subscribed(service.waits.watcher)
    # A writer that announces nothing (a publisher that died between its commit and its notice).
    writer = Store(service.settings.store_url)
    finish_one(writer, runs[1])
    assert_all_woken(polls, etag, runs[1])
    writer.dispose()
