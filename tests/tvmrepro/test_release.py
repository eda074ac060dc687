"""Fair release between submitters (tvmrepro.jobs.release): the order, the window under
concurrent releasers, the recovery sweep's part, and a real stack where one submitter's 200
runs do not hold up another's single run."""

from __future__ import annotations

import json
import statistics
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from service.jobs import JobService
from tests.conftest import NEW_ENV, case_path
from tests.fakes.runtime import DIRECTIVE, FakeRuntime
from tests.fixtures.databases import REDIS_URL
from tests.service.stack import Backend, Stack
from tvmrepro.environments import default_catalog
from tvmrepro.jobs.release import MIN_WINDOW, release_order, window
from tvmrepro.lifecycle import RunState
from tvmrepro.queue import SHORT_RUN_S, queue_length, queue_name
from tvmrepro.settings import Settings
from tvmrepro.store import Store, schema
from tvmrepro.store.releases import Submitter
from tvmrepro.store.rows import JobRow, RunRow
from worker.recovery import SETTLE_S, Sweeper

# The order ---------------------------------------------------------------------------------

HELD: list[tuple[Submitter, str]] = [("A", "a1"), ("A", "a2"), ("A", "a3"), ("B", "b1"),
                                     (None, "n1"), ("B", "b2")]  # oldest first


def test_free_slots_go_round_robin_each_submitters_oldest_first() -> None:
    assert release_order(HELD, {}, 5) == ["a1", "b1", "n1", "a2", "b2"]
    assert release_order(HELD, {}, 10) == ["a1", "b1", "n1", "a2", "b2", "a3"]
    assert release_order(HELD, {}, 0) == [] and release_order([], {"A": 1}, 3) == []


def test_a_submitter_with_runs_in_flight_waits_its_turn() -> None:
    # One slot free and A holding the lane: the next submitter goes, not A's oldest run.
    assert release_order(HELD, {"A": 4}, 1) == ["b1"]
    assert release_order(HELD, {"A": 4}, 3) == ["b1", "n1", "b2"]
    assert release_order(HELD, {"A": 1, "B": 1}, 3) == ["n1", "a1", "b1"]


def test_the_window_is_twice_the_live_slots_unless_set() -> None:
    settings = Settings()
    assert [window(settings, slots) for slots in (0, 1, 2, 3, 8)] == [MIN_WINDOW] * 3 + [6, 16]
    assert window(Settings(release_window=7), 100) == 7


# The window under concurrent releasers -----------------------------------------------------

def stored_job(store: Store, submitter: str, runs: int, timeout_s: int = 60) -> list[str]:
    """A job of `submitter` with `runs` held runs in environment "e"; their ids."""
    job_id, now = uuid.uuid4().hex, time.time()
    job = JobRow(id=job_id, kind="run", case={"script": "pass"}, environments=["e"],
                 variants=["script"], created_at=now, submitter=submitter)
    rows = [RunRow(id=uuid.uuid4().hex, job_id=job_id, ordinal=n, variant="script",
                   environment="e", state=RunState.QUEUED, cache_key="k", timeout_s=timeout_s,
                   created_at=now) for n in range(runs)]
    store.submit_jobs([(job, rows)], cap=1000)
    return [row.id for row in rows]


def slow_pick(held: Sequence[tuple[Submitter, str]], in_flight: Mapping[Submitter, int],
              free: int) -> list[str]:
    """release_order, after a pause: a releaser that is not serialized would count the same
    free slots as another one meanwhile."""
    time.sleep(0.05)
    return release_order(held, in_flight, free)


def in_flight(store: Store, ids: list[str]) -> int:
    """How many of these runs are published or running."""
    query = sa.select(sa.func.count()).where(schema.runs.c.id.in_(ids),
                                             schema.runs.c.published_at.is_not(None))
    with store.engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def test_concurrent_releasers_never_exceed_a_lane_or_publish_a_run_twice(store: Store) -> None:
    a, b, c = (stored_job(store, name, 10) for name in "ABC")
    long = stored_job(store, "A", 3, timeout_s=SHORT_RUN_S + 1)  # the long lane: a window too
    with store.write() as conn:  # two of A's runs run already
        conn.execute(schema.runs.update().where(schema.runs.c.id.in_(a[:2])).values(
            state=RunState.RUNNING.value, published_at=time.time(), claimed_at=time.time()))
    barrier, found = threading.Barrier(8), []

    def releaser() -> None:
        barrier.wait()
        found.append(store.release_held({"e": 6}, SHORT_RUN_S, slow_pick, time.time()))

    threads = [threading.Thread(target=releaser) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    released = [run.id for runs in found for run in runs]
    assert len(released) == len(set(released)) == 4 + 3, found
    assert in_flight(store, a + b + c) == 6 and in_flight(store, long) == 3
    # The two free slots of the short lane went to B and C, A having two in flight already.
    short = [run_id for run_id in released if run_id not in long]
    assert sorted(short) == sorted([b[0], c[0], b[1], c[1]]), (short, a, b, c)
    assert store.release_held({"e": 6}, SHORT_RUN_S, release_order, time.time()) == []


# The recovery sweep's part -----------------------------------------------------------------

@pytest.fixture
def service(tmp_path: Path) -> Iterator[JobService]:
    """A job service on a fresh home (embedded broker, SQLite) whose lanes release one run."""
    settings = Settings.from_env({"TVMREPRO_HOME": str(tmp_path),
                                  "TVMREPRO_RELEASE_WINDOW": "1"})
    opened = JobService.open(settings)
    opened.store.save_fingerprint(NEW_ENV, FakeRuntime(settings).fingerprint(
        default_catalog().get(NEW_ENV)))
    yield opened
    opened.store.dispose()


@pytest.fixture
def sweeper(service: JobService) -> Iterator[Sweeper]:
    """The sweeper of a worker serving NEW_ENV."""
    made = Sweeper(service.celery, service.settings, [NEW_ENV])
    yield made
    made.store.dispose()


def submit_runs(service: JobService, runs: int) -> list[RunRow]:
    """A job of `runs` runs on NEW_ENV, stored and released; its runs as stored now."""
    job = service.submit({"case": {"source": "x = 1\n", "variants": [
        {"name": f"v{n}", "passes": ["FuseTIR"]} for n in range(runs)]},
        "environments": [NEW_ENV], "wait": True})
    found = service.store.job(job.id, results=False)
    assert found is not None
    return found.runs


def lose_messages(service: JobService) -> None:
    """The broker forgets the queue's messages (a Redis restarted without persistence)."""
    with service.celery.connection_for_write() as conn:
        conn.default_channel.queue_purge(queue_name(NEW_ENV))


def backdate(service: JobService, run_id: str) -> None:
    """The run published long enough ago that its message is not on its way any more."""
    with service.store.write() as conn:
        conn.execute(schema.runs.update().where(schema.runs.c.id == run_id)
                     .values(published_at=time.time() - SETTLE_S - 1))


def test_a_held_run_is_never_lost_and_the_sweep_releases_it(
        service: JobService, sweeper: Sweeper) -> None:
    first, second = submit_runs(service, 2)
    assert first.published_at is not None and second.published_at is None  # a window of one
    assert queue_length(service.celery, NEW_ENV) == 1
    lose_messages(service)
    backdate(service, first.id)
    assert [row.id for row in sweeper.lost_runs()] == []  # the first empty look
    # Its queue empty twice: the published run is lost, the held one is not.
    assert [row.id for row in sweeper.lost_runs()] == [first.id]
    with service.store.write() as conn:  # the first run ends: its slot frees
        conn.execute(schema.runs.update().where(schema.runs.c.id == first.id)
                     .values(state=RunState.DONE.value))
    sweeper.tick()
    row = service.store.run(second.job_id, second.id)
    assert row is not None and row.published_at is not None, row
    assert queue_length(service.celery, NEW_ENV) == 1  # its message, and only it


def test_a_run_marked_published_whose_message_was_never_sent_is_published_again(
        service: JobService, sweeper: Sweeper) -> None:
    first, second = submit_runs(service, 2)
    lose_messages(service)
    with service.store.write() as conn:  # the first is done: a slot for the second
        conn.execute(schema.runs.update().where(schema.runs.c.id == first.id)
                     .values(state=RunState.DONE.value))
    # A releaser that died between its commit and its message.
    (marked,) = service.store.release_held({NEW_ENV: 1}, SHORT_RUN_S, release_order, time.time())
    assert marked.id == second.id and queue_length(service.celery, NEW_ENV) == 0
    backdate(service, second.id)
    sweeper.tick()  # its queue empty once
    assert queue_length(service.celery, NEW_ENV) == 0
    sweeper.tick()  # and twice: published again
    assert queue_length(service.celery, NEW_ENV) == 1


def test_cancelling_a_job_ends_its_held_runs_and_releases_the_next(
        service: JobService) -> None:
    job = service.submit({"case": {"source": "x = 1\n", "variants": [
        {"name": f"v{n}", "passes": ["FuseTIR"]} for n in range(3)]},
        "environments": [NEW_ENV], "wait": True})
    other = submit_runs(service, 1)[0]
    assert other.published_at is None  # held behind the first job's one run in flight
    assert job.cancel_token is not None
    cancelled = service.cancel(job.id, job.cancel_token)
    assert cancelled is not None and cancelled.cancelled_runs == 3
    row = service.store.run(other.job_id, other.id)
    assert row is not None and row.published_at is not None  # its slot came free


# A real stack ------------------------------------------------------------------------------

RUNS_A, RUN_S = 200, 0.2
A, B = "203.0.113.1", "203.0.113.2"


def many_runs(count: int, tag: str) -> dict[str, Any]:
    """The founding case's module with `count` variants, each a fake run of RUN_S."""
    case = json.loads(case_path("tvm-17357/case.json").read_text())
    passes = case["variants"][0]["passes"]
    directive = f"{DIRECTIVE} {json.dumps({'sleep': RUN_S})}\n# {tag}\n"
    return {"title": f"{count} runs {tag}", "source": directive + case["source"],
            "variants": [{"name": f"v{n}", "passes": passes} for n in range(count)]}


@pytest.fixture
def fair_stack(clean_postgres: str, redis_prefix: str, tmp_path: Path) -> Iterator[Stack]:
    """A stack of fake runs on Redis and PostgreSQL, each client known by X-Client."""
    home = tmp_path / "home"
    home.mkdir()
    running = Stack(Backend("redis+postgres", REDIS_URL, clean_postgres, redis_prefix), home,
                    TVMREPRO_RUNTIME="fake", TVMREPRO_CLIENT_HEADER="X-Client",
                    TVMREPRO_WORKER_CONCURRENCY="4")
    yield running
    running.close()


def submit_as(stack: Stack, client: str, case: dict[str, Any]) -> str:
    """POST a run job on NEW_ENV as the client at `client`; its id."""
    response = stack.http.post("/api/v1/jobs", headers={"X-Client": client}, json={
        "kind": "run", "case": case, "environments": [NEW_ENV], "bypass_cache": True})
    assert response.status_code == 202, response.text
    job_id: str = response.json()["id"]
    return job_id


def runs_of(stack: Stack, job_id: str) -> list[RunRow]:
    """A job's runs as stored."""
    job = stack.store.job(job_id, results=False)
    assert job is not None
    return job.runs


@pytest.mark.timeout(240)
def test_one_run_is_not_held_up_by_another_submitters_two_hundred(fair_stack: Stack) -> None:
    stack = fair_stack
    stack.start_api()
    stack.start_worker(NEW_ENV)
    bulk = submit_as(stack, A, many_runs(RUNS_A, "bulk"))
    stack._until(lambda: sum(r.done for r in runs_of(stack, bulk)) >= 4, "A's first runs")
    single = submit_as(stack, B, many_runs(1, "single"))
    assert stack.wait(single, timeout=60)["status"] == "done"
    (one,) = runs_of(stack, single)
    done_by_then = sum(r.done for r in runs_of(stack, bulk))
    finished = stack.wait(bulk, timeout=180)
    assert finished["status"] == "done" and len(finished["runs"]) == RUNS_A
    runs = runs_of(stack, bulk)
    run_s = statistics.median((r.finished_at or 0) - (r.claimed_at or 0) for r in runs)
    latency = (one.finished_at or 0) - one.created_at
    total = max(r.finished_at or 0 for r in runs) - min(r.created_at for r in runs)
    print(f"\nB's one run: {latency:.2f} s from submission to result; A's {RUNS_A} runs: "
          f"{total:.1f} s in all; one run {run_s:.2f} s (median, claim to result); A's runs "
          f"done when B's was: {done_by_then}")
    assert {r.submitter for r in (stack.store.job(bulk, False), stack.store.job(single, False))
            if r is not None} == {f"ip:{A}", f"ip:{B}"}
    # B went ahead of most of A's backlog (FIFO: after all 200), within a few runs' time.
    assert done_by_then < RUNS_A // 2, done_by_then
    assert latency < 10 * run_s + 3.0, (latency, run_s)
    assert all(r.deliveries == 1 for r in runs), [r.deliveries for r in runs]
