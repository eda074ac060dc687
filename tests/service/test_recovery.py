"""Jobs are never lost: kill -9 of workers, a Redis restart, an API restart, mid-job.

The kill -9 tests of a pool process and of a whole worker run real TVM in the
local runtime; the others, where TVM adds nothing to what they prove (delivery
counting, a broker or an API that restarts), run the same processes with the tests'
FakeRuntime (TVMREPRO_RUNTIME=fake, started by tests/fakes/cli.py), its runs
scripted to take as long as a test needs.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import NEW_ENV, OLD_ENV
from tests.fakes.runtime import DIRECTIVE, fake_sleep
from tests.service.stack import (
    Backend,
    OwnRedis,
    Stack,
    dump,
    founding_body,
    sleeping_script,
)

pytestmark = [pytest.mark.timeout(300)]
FAKE = {"TVMREPRO_RUNTIME": "fake"}  # Stack starts the tests' launcher for these


def fake_home(tmp_path: Path) -> Path:
    """A fresh TVMREPRO_HOME for a stack of fake runs (no environments needed)."""
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
def fake_stack(backend: Backend, tmp_path: Path) -> Iterator[Stack]:
    """A stack whose workers run cases with the FakeRuntime."""
    running = Stack(backend, fake_home(tmp_path), **FAKE)
    yield running
    running.close()


def claimer_pid(run: dict[str, Any]) -> int:
    """The pid of the process that claimed a run (its token: host:pid:create time)."""
    return int(run["claimed_by"].rsplit(":", 2)[1])


@pytest.mark.tvm
def test_kill_9_of_the_process_running_a_run(stack: Stack) -> None:
    stack.start_api()
    worker = stack.start_worker(NEW_ENV)
    job = stack.submit(founding_body(sleeping_script(3, "kill"), [NEW_ENV]))
    run = stack.wait_running(job["id"])
    pid = claimer_pid(run)
    assert pid != worker.pid  # the pool process that runs the case, not the worker's main
    assert run["published_at"] is not None
    os.kill(pid, signal.SIGKILL)
    done = stack.wait(job["id"])
    assert done["status"] == "done", dump(done)
    (only,) = done["runs"]
    assert only["deliveries"] == 2  # handed back by the dying worker, run again
    assert only["result"]["status"] == "ok", dump(only)
    assert len(stack.result_rows(job["id"])) == 1
    assert worker.poll() is None  # the worker itself lived on
    # Run again from the message Celery handed back: nobody published it a second time.
    again = stored(stack, job["id"], only["id"])
    assert again["published_at"] == run["published_at"]
    assert claimer_pid(again) != pid


def test_a_run_that_keeps_losing_its_worker_ends_as_infra_error(fake_stack: Stack) -> None:
    stack = fake_stack
    stack.configure(TVMREPRO_MAX_DELIVERIES="2")
    stack.start_api()
    stack.start_worker(NEW_ENV)
    job = stack.submit(founding_body(fake_sleep(5, "doomed"), [NEW_ENV]))
    for attempt in (1, 2):
        os.kill(claimer_pid(stack.wait_running(job["id"], deliveries=attempt)), signal.SIGKILL)
    done = stack.wait(job["id"])
    (only,) = done["runs"]
    assert only["result"]["status"] == "infra_error", dump(only)
    assert only["result"]["error_type"] == "WorkerLost"
    assert "started 2 times" in only["result"]["message"]
    assert done["status"] == "failed"  # every run of it is an infra_error
    assert len(stack.result_rows(job["id"])) == 1


@pytest.mark.tvm
def test_a_lost_worker_is_replaced_and_its_run_recovered(stack: Stack) -> None:
    stack.start_api()
    worker = stack.start_worker(NEW_ENV)
    job = stack.submit(founding_body(sleeping_script(3, "lost"), [NEW_ENV]))
    first = stack.wait_running(job["id"])
    stack.kill(worker)  # main process, pool and sandbox at once: nothing hands the run back
    stack.start_worker(NEW_ENV)  # its recovery sweep finds the run's claimer gone
    done = stack.wait(job["id"])
    (only,) = done["runs"]
    assert done["status"] == "done" and only["result"]["status"] == "ok", dump(done)
    assert only["deliveries"] == 2
    assert len(stack.result_rows(job["id"])) == 1
    # The new worker's sweep published it again after the first claim; its run is the second.
    again = stored(stack, job["id"], only["id"])
    assert again["published_at"] > first["claimed_at"]
    assert claimer_pid(again) != claimer_pid(first)


def many_variants(case: dict[str, Any], copies: int, run_s: float = 1.0) -> dict[str, Any]:
    """The founding case with each variant repeated under new names (more runs per job).

    Scripted for the FakeRuntime as it ends on TVM: the "once" variants fail at vm_init.
    """
    variants = [{**v, "name": f"{v['name']}-{n}"} for n in range(copies) for v in case["variants"]]
    lines = [{"variant": v["name"], "status": "error", "stage": "vm_init", "sleep": run_s}
             for v in variants if "once" in v["name"]] + [{"sleep": run_s}]
    directives = "".join(f"{DIRECTIVE} {json.dumps(line)}\n" for line in lines)
    return {**case, "source": directives + case["source"], "variants": variants}


def finished_results(stack: Stack, job_id: str) -> dict[str, Any]:
    """run id -> stored result summary, for the runs that are done."""
    job = stack.store.job(job_id)
    return {r.id: r.result for r in (job.runs if job else []) if r.done}


def wait_partly_done(stack: Stack, job_id: str) -> None:
    """Until a run of the job has a result and at least two still wait in the queue."""
    def partly() -> bool:
        job = stack.store.job(job_id)
        states = [r.state.value for r in (job.runs if job else [])]
        return states.count("done") >= 1 and states.count("queued") >= 2
    stack._until(partly, "the job to be part done")


def stored(stack: Stack, job_id: str, run_id: str) -> dict[str, Any]:
    """A run's row in the store (claimer, when it was claimed and last published)."""
    row = stack.store.run(job_id, run_id)
    assert row is not None and row.published_at is not None
    return row.model_dump()


def waiting_runs(stack: Stack, job_id: str) -> list[str]:
    """The ids of the job's runs that wait in the queue."""
    job = stack.store.job(job_id)
    return [r.id for r in (job.runs if job else []) if r.state == "queued"]


def check_recovered(stack: Stack, job_id: str, before: dict[str, Any]) -> None:
    """The job finished, each run has one result, and nothing stored before was changed."""
    done = stack.wait(job_id)
    assert done["status"] == "done", dump(done)
    assert all(r["result"]["status"] == ("error" if "once" in r["variant"] else "ok")
               for r in done["runs"]), dump(done["matrix"])
    assert len(stack.result_rows(job_id)) == len(done["runs"])
    after = finished_results(stack, job_id)
    assert {k: after[k] for k in before} == before


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    """A started OwnRedis, stopped after the test."""
    server = OwnRedis(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_stack(own_redis: OwnRedis, clean_postgres: str, tmp_path: Path) -> Iterator[Stack]:
    """A stack of fake runs on our own Redis and PostgreSQL (nothing started yet)."""
    stack = Stack(Backend("redis+postgres", own_redis.url, clean_postgres), fake_home(tmp_path),
                  **FAKE)
    yield stack
    stack.close()


def test_redis_and_api_restart_mid_job(redis_stack: Stack, own_redis: OwnRedis,
                                       founding_case: dict[str, Any]) -> None:
    stack = redis_stack
    stack.start_api()
    stack.start_worker(OLD_ENV)
    stack.start_worker(NEW_ENV)
    job = stack.submit(founding_body(many_variants(founding_case, 3), [OLD_ENV, NEW_ENV]))
    wait_partly_done(stack, job["id"])
    own_redis.stop()  # no persistence: the waiting messages are gone
    lost_at = time.time()
    stack.stop(stack.api, grace=5)
    before = finished_results(stack, job["id"])
    waiting = waiting_runs(stack, job["id"])
    assert waiting  # their messages went with Redis
    own_redis.start()
    stack.start_api()
    check_recovered(stack, job["id"], before)
    # Each run whose message Redis lost was published again after the loss.
    assert all(stored(stack, job["id"], run_id)["published_at"] > lost_at for run_id in waiting)
    again = stack.submit(founding_body(founding_case, [NEW_ENV], bypass_cache=True))
    assert stack.wait(again["id"])["status"] == "done"


def test_a_run_that_ends_while_redis_is_away_does_not_stall_its_worker(
        redis_stack: Stack, own_redis: OwnRedis, founding_case: dict[str, Any]) -> None:
    stack = redis_stack
    stack.start_api()
    stack.start_worker(NEW_ENV)
    job = stack.submit(founding_body(fake_sleep(3, "away"), [NEW_ENV]))
    stack.wait_running(job["id"])
    own_redis.stop()
    stack._until(lambda: finished_results(stack, job["id"]), "the run to end with Redis away")
    own_redis.start()
    assert stack.wait(job["id"])["status"] == "done"
    # Its acknowledgement failed; the worker must still take new work.
    after = stack.submit(founding_body(founding_case, [NEW_ENV], bypass_cache=True))
    assert stack.wait(after["id"], timeout=60)["status"] == "done"


def test_api_and_workers_restart_mid_job(fake_stack: Stack,
                                         founding_case: dict[str, Any]) -> None:
    stack = fake_stack
    # One run at a time per worker, so that runs still wait when the stop comes.
    stack.configure(TVMREPRO_WORKER_CONCURRENCY="1")
    stack.start_api()
    for env_id in (OLD_ENV, NEW_ENV):
        stack.start_worker(env_id)
    job = stack.submit(founding_body(many_variants(founding_case, 3), [OLD_ENV, NEW_ENV]))
    wait_partly_done(stack, job["id"])
    for proc in [stack.api, *stack.workers.values()]:
        assert proc is not None
        proc.terminate()  # a clean stop: runs in progress finish, waiting ones stay queued
    for proc in [stack.api, *stack.workers.values()]:
        stack.stop(proc)
    before = finished_results(stack, job["id"])
    assert len(before) < 12
    stack.start_api()
    for env_id in (OLD_ENV, NEW_ENV):
        stack.start_worker(env_id)
    check_recovered(stack, job["id"], before)
