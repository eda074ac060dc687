"""A job's runs store at most the job's cap of IR in all (real SQLite and PostgreSQL): past it a
run's result is stored whole but for its IR, each pass's replaced by a marker saying why."""

from __future__ import annotations

import os
from typing import Any, cast

from tests.tvmrepro.job_rows import CAP, never_gone, new_job
from tvmrepro.jobs.stored_ir import JOB_IR_NOT_KEPT, within_job_ir_cap
from tvmrepro.results import Result, Status
from tvmrepro.settings import JOB_IR_CAP, Settings
from tvmrepro.store import Store
from worker import tasks

JOB_CAP = 1000


def with_ir(*irs: str) -> Result:
    """An error result whose passes printed `irs`."""
    return Result.model_validate({
        "environment": "e", "variant": "script", "status": Status.ERROR, "stage": "pass:1:P1",
        "error_type": "TVMError", "message": "boom",
        "passes": [{"index": n, "name": f"P{n}", "seconds": 0.0, "functions": [], "ir": ir}
                   for n, ir in enumerate(irs)]})


def finish(store: Store, job_id: str, run_id: str, result: Result) -> None:
    """Store a run's result as the worker does: its IR within the job's cap."""
    store.claim(run_id, "h:1", 3, 5.0, never_gone)
    assert store.finish(run_id, within_job_ir_cap(store, job_id, result, JOB_CAP))


def test_past_the_jobs_cap_a_runs_ir_is_not_stored(store: Store) -> None:
    job, runs = new_job(4)
    other_job, (other,) = new_job(1, key="other")
    store.submit(job, runs, cap=CAP)
    store.submit(other_job, [other], cap=CAP)
    finish(store, other_job.id, other.id, with_ir("o" * 900))  # another job's: not counted
    finish(store, job.id, runs[0].id, with_ir("a" * 300, "b" * 300))
    finish(store, job.id, runs[1].id, with_ir("c" * 400))  # 1000: at the cap, kept
    finish(store, job.id, runs[2].id, with_ir("d", "e"))  # past it: not kept
    finish(store, job.id, runs[3].id, with_ir())  # no IR: nothing to drop
    assert [p["ir"] for p in store.passes(runs[0].id)] == ["a" * 300, "b" * 300]
    assert [p["ir"] for p in store.passes(runs[1].id)] == ["c" * 400]
    marker = JOB_IR_NOT_KEPT.format(cap=JOB_CAP)
    assert [p["ir"] for p in store.passes(runs[2].id)] == [marker, marker]
    assert "TVMREPRO_JOB_IR_CAP" in marker
    dropped = store.result(runs[2].id)
    assert dropped is not None
    assert (dropped["status"], dropped["stage"], dropped["message"]) == ("error", "pass:1:P1",
                                                                         "boom")
    assert [p["name"] for p in dropped["passes"]] == ["P0", "P1"]
    assert store.job_ir_chars(job.id) == 1000 + 2 * len(marker)
    assert store.job_ir_chars(other_job.id) == 900


def test_the_worker_stores_a_runs_ir_within_its_jobs_cap(store: Store) -> None:
    assert Settings().job_ir_cap == JOB_IR_CAP == 256 << 20
    ctx = tasks.WorkerContext(Settings(job_ir_cap=JOB_CAP), store, cast(Any, None), os.getpid())
    job, runs = new_job(2)
    store.submit(job, runs, cap=CAP)
    for run, ir in zip(runs, ("f" * 800, "g" * 800), strict=True):
        claim = store.claim(run.id, "h:1", 3, 5.0, never_gone)
        assert tasks.finish(ctx, claim, with_ir(ir)) is True
    assert [p["ir"] for p in store.passes(runs[0].id)] == ["f" * 800]
    assert [p["ir"] for p in store.passes(runs[1].id)] == [JOB_IR_NOT_KEPT.format(cap=JOB_CAP)]
