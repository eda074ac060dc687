"""The job store on real SQLite and real PostgreSQL: admission under concurrency, one result a run."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa

from tests.tvmrepro.job_rows import CAP, never_gone, new_job, result, two_variant_job
from tvmrepro.jobs.settling import finish_run, submit
from tvmrepro.lifecycle import Action, RunState
from tvmrepro.results import Result, Status
from tvmrepro.store import QueueFull, Store
from tvmrepro.store import schema as t


def test_the_cap_holds_when_many_submit_at_once(store: Store) -> None:
    def submit(_: int) -> bool:
        try:
            store.submit(*new_job(3), cap=CAP)
            return True
        except QueueFull:
            return False

    with ThreadPoolExecutor(16) as pool:
        admitted = list(pool.map(submit, range(20)))
    assert admitted.count(True) == CAP // 3
    assert store.waiting_count() == CAP // 3 * 3


def test_a_refused_job_stores_nothing(store: Store) -> None:
    store.submit(*new_job(CAP), cap=CAP)
    job, runs = new_job(1)
    with pytest.raises(QueueFull) as refused:
        store.submit(job, runs, cap=CAP)
    assert refused.value.waiting == CAP
    assert store.job(job.id) is None and store.waiting_count() == CAP


def test_a_run_gets_one_result_however_often_it_is_finished(store: Store) -> None:
    job, (run,) = new_job(1)
    store.submit(job, [run], cap=CAP)
    claim = store.claim(run.id, "host:1", 3, 5.0, never_gone)
    assert claim.action is Action.RUN and claim.deliveries == 1 and claim.case == job.case
    assert store.finish(run.id, result()) is True
    assert store.finish(run.id, result(Status.ERROR)) is False
    assert store.claim(run.id, "host:2", 3, 5.0, never_gone).action is Action.SKIP
    stored = store.job(job.id)
    assert stored is not None and stored.runs[0].status == "ok" and stored.finished
    full = store.result(run.id)
    assert full is not None and full["passes"][0]["ir"] == "# ir"
    assert full["log"] == {"stdout": "out", "stderr": "err", "truncated": False}


def test_a_live_claimer_keeps_its_run_and_a_dead_one_loses_it(store: Store) -> None:
    job, (run,) = new_job(1)
    store.submit(job, [run], cap=CAP)
    store.claim(run.id, "host:1", 3, 5.0, never_gone)
    assert store.claim(run.id, "host:2", 3, 5.0, never_gone).action is Action.SKIP
    taken = store.claim(run.id, "host:2", 3, 5.0, lambda claimer: claimer == "host:1")
    assert taken.action is Action.RUN and taken.deliveries == 2
    assert store.claim(run.id, "host:3", 2, 5.0, lambda c: True).action is Action.EXHAUSTED


def test_the_cache_offers_finished_results_but_not_infra_errors(store: Store) -> None:
    failed_job, (failed,) = new_job(1, key="same")
    store.submit(failed_job, [failed], cap=CAP)
    store.claim(failed.id, "h:1", 3, 5.0, never_gone)
    store.finish(failed.id, result(Status.INFRA_ERROR))
    assert store.cached_result("same") is None
    good_job, (good,) = new_job(1, key="same")
    store.submit(good_job, [good], cap=CAP)
    store.claim(good.id, "h:1", 3, 5.0, never_gone)
    store.finish(good.id, result(Status.ERROR))
    assert store.cached_result("same") == good.id


def test_heartbeats_and_fingerprints(store: Store) -> None:
    store.heartbeat("h:1", ["a", "b"])
    store.heartbeat("h:2", ["b"])
    assert store.live_environments(stale_s=30) == {"a": 1, "b": 2}
    store.forget_worker("h:1")
    assert store.live_environments(stale_s=30) == {"b": 1}
    store.save_fingerprint("b", {"passes": ["FuseTIR"]})
    store.save_fingerprint("b", {"passes": ["FuseTIR", "LambdaLift"]})
    assert store.fingerprints() == {"b": {"passes": ["FuseTIR", "LambdaLift"]}}


def test_a_worker_building_an_image_serves_it_and_says_which_step(store: Store) -> None:
    store.heartbeat("h:1", ["a", "b"], {"b": "Step 2/9 : RUN pip install"})
    assert store.live_environments(stale_s=30) == {"a": 1, "b": 1}  # jobs for b are accepted
    assert store.building_environments(stale_s=30) == {"b": "Step 2/9 : RUN pip install"}
    store.heartbeat("h:1", ["a", "b"])  # built
    assert store.building_environments(stale_s=30) == {}
    store.heartbeat("h:2", ["c"], {"c": "queued"})
    assert store.building_environments(stale_s=0.0) == {}  # a stale worker builds nothing


def with_passes(variant: str, *irs: str) -> Result:
    """A result of `variant` whose passes leave these IRs."""
    return Result.model_validate({
        "environment": "e", "variant": variant, "status": "ok", "stage": "run",
        "passes": [{"index": n, "name": f"P{n}", "seconds": 0.0, "functions": [], "ir": ir}
                   for n, ir in enumerate(irs)]})


def test_comparisons_are_stored_when_the_last_run_is(store: Store) -> None:
    job, (once, twice) = two_variant_job()
    store.submit(job, [once, twice], cap=CAP)
    for run in (once, twice):
        store.claim(run.id, "h:1", 3, 5.0, never_gone)
    finish_run(store, job.id, once.id, with_passes("once", "a", "b\nold\n"))
    half = store.job(job.id)
    assert half is not None and half.comparisons is None
    finish_run(store, job.id, twice.id, with_passes("twice", "a", "b\nnew\n", "c"))
    done = store.job(job.id)
    assert done is not None and done.comparisons is not None
    (found,) = done.comparisons
    assert (found.a.variant, found.b.variant) == ("once", "twice")
    assert found.first_differing_pass is not None and found.first_differing_pass.index == 1
    assert "-old\n+new\n" in found.diff
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(t.comparisons)).scalar() == 1


def test_a_job_served_from_the_cache_is_compared_at_once(store: Store) -> None:
    job, runs = two_variant_job()
    store.submit(job, runs, cap=CAP)
    for run, irs in zip(runs, [("x",), ("y",)], strict=True):
        store.claim(run.id, "h:1", 3, 5.0, never_gone)
        finish_run(store, job.id, run.id, with_passes(run.variant, *irs))
    again, _ = two_variant_job()
    cached = [run.model_copy(update={"id": uuid.uuid4().hex, "job_id": again.id,
                                     "state": RunState.DONE, "cached": True, "result_id": run.id})
              for run in runs]
    submit(store, again, cached, cap=CAP)
    stored = store.job(again.id)
    assert stored is not None and stored.comparisons is not None
    assert stored.comparisons[0].first_differing_pass is not None
