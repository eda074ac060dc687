"""A reduce or extract job's one run, in the worker process that claimed it.

The reduction (worker/narrowing/reduction.py) or the extraction (worker/narrowing/extraction.py)
runs here, its candidates in sandboxes of this process's runtime (warm ones
where the pool has them), each with the case's limits. As it goes, its
progress and best case so far are written to the job's narrowings row; at the
end, its answer (or why there is none), and only then does the task store the
run's result: the original run (the reference the reduction kept, or the
script's run). A job cancelled meanwhile (its run done without us) stops the
reduction before its next sandbox, with the best case so far.
"""

from __future__ import annotations

import logging
import time

from tvmrepro.api.narrowed import Reduced, Size
from tvmrepro.cases import Case
from tvmrepro.environments import Environment
from tvmrepro.errors import BadInput
from tvmrepro.jobs.narrow.logic import NarrowOptions, ProgressEvent, StoredProgress
from tvmrepro.jobs.narrow.steps import save_answer, save_progress
from tvmrepro.results import Result
from tvmrepro.store import Store
from worker.narrowing.extraction import extract_recorded, record_script
from worker.narrowing.reduction import Cancelled, Options, OutOfBudget, Reducer, source_lines
from worker.runtimes.base import Runtime

log = logging.getLogger(__name__)
PROGRESS_EVERY_S = 2.0  # a "try" is written at most this often; every kept step is written


class Progress:
    """Writes a narrowing's progress to its row (throttled) and notices a cancelled job."""

    def __init__(self, store: Store, job_id: str, run_id: str) -> None:
        self.store, self.job_id, self.run_id = store, job_id, run_id
        self.started = time.monotonic()
        self.written = 0.0

    def __call__(self, event: ProgressEvent, best: Reduced | None = None) -> None:
        """Record `event` (phase, what, steps, runs, passes, lines) and the best case so far."""
        now = time.monotonic()
        if event.get("kind") == "try" and now - self.written < PROGRESS_EVERY_S:
            return
        self.written = now
        shown: StoredProgress = {**event, "seconds": round(now - self.started, 1)}
        shown.pop("kind", None)
        if best is not None:  # while it runs, a reduction's answer so far is its best case
            shown["best"] = best.model_dump(mode="json", exclude={"finished", "log"})
        save_progress(self.store, self.job_id, shown)
        if self.cancelled():
            raise Cancelled

    def cancelled(self) -> bool:
        """Whether the job was cancelled: its run has a result already, stored without us."""
        run = self.store.run(self.job_id, self.run_id)
        return run is not None and run.done


def reduce_job(store: Store, runtime: Runtime, run_id: str, job_id: str, case: Case,
               env: Environment, options: NarrowOptions) -> Result:
    """Reduce, recording progress; the answer stored; the reference run as the run's result."""
    progress = Progress(store, job_id, run_id)
    spec = case.variant(options.variant)
    assert spec is not None and case.source is not None  # the API checked: module mode
    before = Size(passes=len(spec.passes), lines=source_lines(case.source))
    reducer = Reducer(case, Options(env=env, variant=options.variant, oracle=options.oracle,
                                    budget_s=options.budget_s, job_id=job_id,
                                    cancelled=progress.cancelled),
                      runtime, lambda event: progress(event, best(event)))

    def best(event: ProgressEvent) -> Reduced | None:
        if event.get("kind") != "step":
            return None
        return reducer.report(before, False, time.monotonic() - progress.started)

    progress({"kind": "step", "phase": "baseline", "what": "running the case as it is",
              "passes": before.passes, "lines": before.lines})
    try:
        found = reducer.run()
    except BadInput as exc:  # the case does not show the bug: nothing to reduce
        save_answer(store, job_id, None, exc.problem)
        if reducer.reference is None:
            raise
        return reducer.reference
    save_answer(store, job_id, found.model_dump(mode="json"))
    assert reducer.reference is not None  # run() ran the baseline
    return reducer.reference


def extract_job(store: Store, runtime: Runtime, run_id: str, job_id: str, script: Case,
                env: Environment, options: NarrowOptions) -> Result:
    """Extract, recording progress; the answer stored; the script's run as the run's result."""
    progress = Progress(store, job_id, run_id)
    progress({"kind": "step", "phase": "script", "what": "running the script, recording its "
                                                         "steps"})
    recorded = record_script(script, runtime=runtime, env=env, job_id=job_id)
    progress({"kind": "step", "phase": "case", "what": "running the extracted case"})
    try:
        found = extract_recorded(script, env, runtime, recorded, options.at, job_id)
    except BadInput as exc:  # CannotExtract: the failure is at no step with a module
        save_answer(store, job_id, None, exc.problem)
    else:
        save_answer(store, job_id, found.model_dump(mode="json"))
    return recorded.result


def run_narrowing(store: Store, runtime: Runtime, run_id: str, job_id: str, case: Case,
                  env: Environment, options: NarrowOptions) -> Result:
    """Run a narrowing job's run; a fault of ours is also written to its row, then raised."""
    job = reduce_job if options.kind == "reduce" else extract_job
    try:
        return job(store, runtime, run_id, job_id, case, env, options)
    except OutOfBudget:  # cancelled before the reduction's first step: no case so far
        save_answer(store, job_id, None, "cancelled before its first step")
        raise
    except Exception as exc:
        save_answer(store, job_id, None, f"{type(exc).__name__}: {exc}")
        raise
