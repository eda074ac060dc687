"""A bisect job in the store: its runs (one per environment and repeat), and its steps.

The API starts a bisect job; after each run of it is stored, the worker that
stored it advances it: the bisect object is computed again and stored once,
and the binary strategy adds its next probes as new runs. Runs served from
the cache finish at once, so a step keeps going until a probe waits for a
worker or the bisection is finished. A worker that dies between storing a
result and the step leaves it to the recovery sweep (worker/recovery.py); a read never
takes a step. Both sides call this module, each with its own way to publish
the runs it adds (the API's, the worker's Celery app).
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from typing import Any

from tvmrepro.api.views import Bisection
from tvmrepro.cases import Case, parse_case
from tvmrepro.environments import Catalog, default_catalog
from tvmrepro.jobs.bisect.given import given_over
from tvmrepro.jobs.bisect.logic import Observation, Options, bisect_rounds, initial_probes
from tvmrepro.jobs.bisect.windows import annotate, configured_history
from tvmrepro.jobs.bounded import within
from tvmrepro.jobs.kind import Publish
from tvmrepro.jobs.oracles import parse_oracle
from tvmrepro.jobs.settling import settle, submit
from tvmrepro.lifecycle import RunState, cache_key
from tvmrepro.store import QueueFull, Store
from tvmrepro.store.bisections import BisectionStep, BisectionUpdate
from tvmrepro.store.rows import JobRow, RunRow

log = logging.getLogger(__name__)
STEP_BUDGET_S = 15.0  # the patterns of one step (windows.SUSPECTS_BUDGET_S of it for suspects)

def make_runs(store: Store, job_id: str, case: Case, options: Options, envs: list[str],
              catalog: Catalog, first_ordinal: int) -> list[RunRow]:
    """Run rows for these environments, `options.repeat` each; only a first repeat may be
    served from the cache (a repeat is there to run again)."""
    now = time.time()
    runs: list[RunRow] = []
    for env_id in envs:
        key = cache_key(case, options.variant, catalog.get(env_id))
        for repeat in range(options.repeat):
            hit = store.cached_result(key) if repeat == 0 and not options.bypass_cache else None
            runs.append(RunRow(
                id=uuid.uuid4().hex, job_id=job_id, ordinal=first_ordinal + len(runs),
                variant=options.variant, environment=env_id,
                state=RunState.DONE if hit else RunState.QUEUED, cache_key=key,
                cached=hit is not None, result_id=hit, timeout_s=case.timeout_s,
                created_at=now, published_at=None,  # held until released
                finished_at=now if hit else None))
    return runs


def _result(store: Store, run: RunRow, with_log: bool) -> dict[str, Any] | None:
    if not run.done or not run.result_id:
        return None
    result = run.result or store.result(run.result_id) or {}
    if with_log:
        log = store.log(run.result_id) or {}
        result = {**result, "log_text": f"{log.get('stdout', '')}\n{log.get('stderr', '')}"}
    return dict(result)


def observations(store: Store, runs: list[RunRow], options: Options) -> list[Observation]:
    """The bisection's view of stored runs (with their logs when the oracle reads them)."""
    with_log = parse_oracle(options.oracle).needs_log
    return [Observation(r.environment, r.id, _result(store, r, with_log)) for r in runs]


def with_suspects(store: Store, found: dict[str, Any], runs: list[RunRow],
                  case: dict[str, Any]) -> dict[str, Any]:
    """A finished bisection's transitions with their commit windows and suspects, when the
    service has a history (TVMREPRO_TVM_HISTORY): each side's first run, with its log."""
    history = configured_history()
    if history is None or not found["transitions"]:
        return found
    firsts: dict[str, RunRow] = {}
    for run in runs:
        firsts.setdefault(run.environment, run)

    def result_of(env_id: str) -> dict[str, Any] | None:
        run = firsts.get(env_id)
        return _result(store, run, with_log=True) if run is not None else None

    commits = {env_id: facts.get("commit") for env_id, facts in store.fingerprints().items()}
    return annotate(found, result_of, case, history, commits)


def stepper(store: Store, catalog: Catalog) -> BisectionStep:
    """The step that advance_bisection applies: judge, and add the next probes' runs (those
    the cache serves are judged at once, and the step goes on until a probe waits)."""

    def step(job: JobRow, row: dict[str, Any]) -> BisectionUpdate:
        options = Options(**row["options"])
        case = parse_case(job.case)
        runs: list[RunRow] = list(job.runs)
        added: list[RunRow] = []
        with_log = parse_oracle(options.oracle).needs_log

        def queue_round(envs: list[str]) -> list[Observation]:
            more = make_runs(store, job.id, case, options, envs, catalog, len(runs) + len(added))
            added.extend(more)
            return [Observation(r.environment, r.id, _result(store, r, with_log)) for r in more]

        found, _ = bisect_rounds(options, queue_round, observations(store, runs, options))
        if found["finished"]:
            found = with_suspects(store, found, runs + added, job.case)
        probed = {r.environment for r in runs + added}
        return BisectionUpdate(
            runs=added, environments=[e for e in options.environments if e in probed],
            result=found, seen=sum(r.done for r in runs + added))

    return step


def advance(store: Store, job_id: str, catalog: Catalog) -> list[RunRow]:
    """Advance a bisect job after a run of it finished; the new runs that wait for a worker."""
    if store.bisection(job_id) is None:
        return []  # no bisection stored yet (or any more): no write lock taken
    added = store.advance_bisection(job_id, stepper(store, catalog))
    return [r for r in added if r.state == RunState.QUEUED]


def after_run(store: Store, publish: Publish, job_id: str) -> None:
    """After a run of a bisect job is stored (or the recovery sweep finds one no step saw):
    advance its bisection and publish the runs it added. A failure is logged: the run's
    result is stored, and the recovery sweep takes the step (and publishes runs stored but
    not published)."""
    try:
        # Every pattern the step applies to runs' text (its oracle, its suspects; each of its
        # attempts), within one budget: tvmrepro.jobs.bounded.
        with within(STEP_BUDGET_S):
            waiting = advance(store, job_id, default_catalog())
        publish(waiting)
        if not waiting:
            # The step's probes (if any) all came from the cache: no finisher will settle the
            # job's comparisons for them, and it reads running until they are stored.
            settle(store, job_id)
    except Exception:
        log.exception("advancing the bisection of job %s failed", job_id)


def start(store: Store, job: JobRow, case: Case, options: Options, catalog: Catalog,
          cap: int) -> list[RunRow]:
    """Store a bisect job with its first probes' runs; the runs that wait for a worker.

    QueueFull (nothing stored) when the first probes would overfill the queue.
    """
    first = initial_probes(options)
    runs = make_runs(store, job.id, case, options, first, catalog, 0)
    store.save_bisection(job.id, dataclasses.asdict(options))
    ordered = [e for e in options.environments if e in first]
    try:
        submit(store, job.model_copy(update={"environments": ordered}), runs, cap)
    except QueueFull:
        store.forget_bisection(job.id)
        raise
    queued = [r for r in runs if r.state == RunState.QUEUED]
    return queued + advance(store, job.id, catalog)


def current(store: Store, job: JobRow) -> Bisection | None:
    """A bisect job's bisect object, as its last step stored it (None: no step stored one
    yet): read only. A finished run that no step saw (its worker died between storing the
    result and the step) is caught up by the recovery sweep, not by a read."""
    row = store.bisection(job.id)
    found = row["result"] if row is not None else None
    if found is None:
        return None
    # The submitter's own windows and suspects (`bisect --history`) over the step's.
    return Bisection.model_validate(given_over(found, (row or {}).get("windows")))
