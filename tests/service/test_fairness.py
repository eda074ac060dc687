"""Fairness: a long or hostile run does not starve the others (README "Fairness").

A real worker (default concurrency, real local runtime, real TVM) holds a
`while True: pass` run with a long time limit; a normal job submitted after it
must be done while the busy run still runs. With one run at a time per worker
(TVMREPRO_WORKER_CONCURRENCY=1) the normal job waits for the busy one's whole time limit.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import NEW_ENV
from tests.service.stack import Stack, dump, founding_body
from tvmrepro.queue import SHORT_RUN_S, queue_name

pytestmark = [pytest.mark.timeout(600)]
BUSY_TIMEOUT_S = SHORT_RUN_S + 60  # in the long lane, and far longer than a normal run
ONE_SLOT_BUSY_S = 20  # with one slot the test waits all of it: short, yet far longer than a run


def busy_case(timeout_s: int) -> dict[str, Any]:
    """A script that spins forever (it ends by its time limit)."""
    return {"title": "busy loop", "script": "while True:\n    pass\n", "timeout_s": timeout_s}


def normal_case() -> dict[str, Any]:
    """A script that imports TVM and prints (about a second of work)."""
    return {"title": "normal", "script": "import tvm\nprint(tvm.__version__)\n"}


def busy_then_normal(stack: Stack, busy_s: int, wait_s: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Start the API and a worker, submit a busy loop, then (once it runs) a normal job; the
    busy job as submitted and the normal job once done (waited for up to `wait_s`)."""
    stack.start_api()
    stack.start_worker(NEW_ENV)
    busy = stack.submit(founding_body(busy_case(busy_s), [NEW_ENV]))
    stack.wait_running(busy["id"])
    normal = stack.submit(founding_body(normal_case(), [NEW_ENV]))
    return busy, stack.wait(normal["id"], timeout=wait_s)


@pytest.mark.parametrize("backend", ["redis+postgres"], indirect=True)
def test_a_normal_job_finishes_while_a_busy_loop_runs(stack: Stack) -> None:
    # Waited for up to the busy run's whole time limit: if the normal job stood behind the
    # busy one, it would finish only after the busy run timed out, and the check below fails.
    busy, done = busy_then_normal(stack, BUSY_TIMEOUT_S, BUSY_TIMEOUT_S + 60)
    busy_now = stack.store.job(busy["id"])
    assert busy_now is not None
    assert [run.state for run in busy_now.runs] == ["running"], dump(busy_now.model_dump())
    assert [run["result"]["status"] for run in done["runs"]] == ["ok"], dump(done)


@pytest.mark.parametrize("backend", ["redis+postgres"], indirect=True)
def test_with_one_run_at_a_time_a_normal_job_waits_for_the_busy_loop(stack: Stack) -> None:
    stack.configure(TVMREPRO_WORKER_CONCURRENCY="1")
    busy, done = busy_then_normal(stack, ONE_SLOT_BUSY_S, ONE_SLOT_BUSY_S + 120)
    assert [run["result"]["status"] for run in done["runs"]] == ["ok"], dump(done)
    stack.wait(busy["id"], timeout=ONE_SLOT_BUSY_S + 60)
    busy_now, normal_now = stack.store.job(busy["id"]), stack.store.job(done["id"])
    assert busy_now is not None and normal_now is not None
    (busy_run,), (normal_run,) = busy_now.runs, normal_now.runs
    assert busy_run.result is not None and busy_run.result["status"] == "timeout", dump(
        busy_now.model_dump())
    # The one slot was the busy run's until its time limit ended it: only then was the normal
    # run taken (the store's own times, not this test's clock).
    assert busy_run.finished_at is not None and normal_run.claimed_at is not None
    assert normal_run.claimed_at >= busy_run.finished_at, (busy_run, normal_run)


def test_lanes_follow_the_time_limit() -> None:
    assert queue_name(NEW_ENV, SHORT_RUN_S) == queue_name(NEW_ENV)
    assert queue_name(NEW_ENV, SHORT_RUN_S + 1) == f"{queue_name(NEW_ENV)}.long"
