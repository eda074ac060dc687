"""Jobs: validate a submission, fan it out into runs (from the cache where it can), read it back."""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from celery import Celery
from pydantic import ValidationError

from service.bisection import (
    bisect_options,
    bisect_status,
    read_bisect,
    refuse_bisect_fields,
    start_bisect,
)
from service.matrix import build_matrix, job_status
from service.narrowing import (
    narrow_options,
    read_narrowing,
    refuse_other_kinds_fields,
    start_narrowing,
)
from service.triage import MakeRuns, parts_view, store_sweep, store_triage
from service.waiting import JobWaits
from tvmrepro.cases import Case, bad_input, parse_case
from tvmrepro.comparisons import compare, passes_of
from tvmrepro.environments import Catalog, Environment, default_catalog
from tvmrepro.errors import BadInput, Forbidden, NotServed
from tvmrepro.expiry import expire_waiting
from tvmrepro.fanout import PlannedRun, fan_out
from tvmrepro.lifecycle import JobKind, RunState, cache_key
from tvmrepro.models import (
    CANCEL_HEADER,
    Cancelled,
    CellRef,
    Comparison,
    EnvironmentList,
    EnvironmentView,
    Health,
    JobList,
    JobRequest,
    JobSummary,
    JobView,
    RunView,
)
from tvmrepro.queue import broker_ping, make_celery, publish_run
from tvmrepro.results import Result, Status
from tvmrepro.rows import JobRow, RunRow
from tvmrepro.settings import Settings
from tvmrepro.settling import finish_run, submit
from tvmrepro.store import Store, open_store
from tvmrepro.tracker.known import KnownIssue, likely_duplicates, result_bug_signature
from tvmrepro.tracker.sweep import previous_environment, stored_cases
from tvmrepro.tracker.triage_job import reports_of_request

log = logging.getLogger(__name__)
TOKEN_BYTES = 24  # 192 random bits


def token_digest(token: str) -> str:
    """What the store keeps of a cancel token: its SHA-256, hex."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def _run_view(run: RunRow) -> RunView:
    return RunView(id=run.id, variant=run.variant, environment=run.environment, state=run.state,
                   cached=run.cached, cached_from=run.result_id if run.cached else None,
                   deliveries=run.deliveries, result=run.result,
                   finished_at=_iso(run.finished_at) if run.finished_at else None)


def _prefixed(exc: BadInput, prefix: str) -> BadInput:
    # parse_case names the whole case "case" already; its parts get the prefix.
    if not exc.field or exc.field == prefix:
        return BadInput(prefix, exc.problem)
    return BadInput(f"{prefix}.{exc.field}", exc.problem)


class JobService:
    """The API's side of the service: the store, the broker and the catalog together."""

    def __init__(self, settings: Settings, store: Store, celery: Celery,
                 catalog: Catalog | None = None) -> None:
        self.settings, self.store, self.celery = settings, store, celery
        self.catalog = catalog or default_catalog()
        # Long-polls of a job's view (service/waiting.py).
        self.waits = JobWaits(self.job, store.job_stamp, settings.api_threads)

    @classmethod
    def open(cls, settings: Settings) -> JobService:
        """Connect to the store (creating its tables) and the broker of these settings."""
        store = open_store(settings.store_url)
        return cls(settings, store, make_celery(settings))

    # Submission ---------------------------------------------------------------

    def _request(self, body: Any) -> JobRequest:
        if not isinstance(body, dict):
            raise BadInput("body", f"must be a JSON object, got {type(body).__name__}")
        try:
            return JobRequest.model_validate(body)
        except ValidationError as exc:
            raise bad_input(exc, "body") from exc

    def _environments(self, chosen: list[str] | str) -> list[Environment]:
        if chosen == "all":
            served = self.store.live_environments(self.settings.worker_stale_s)
            envs = [env for env in self.catalog.environments if env.id in served]
            if not envs:
                raise BadInput("environments", "'all' means every environment a live worker "
                                               "serves, and no worker is live; name them")
            return envs
        if not chosen:
            raise BadInput("environments", "name at least one environment")
        return self.catalog.select(list(chosen))

    def _check_served(self, envs: list[Environment], request: JobRequest) -> None:
        """409 for environments no live worker serves, unless the job asked to wait for one."""
        if request.wait or request.environments == "all":  # "all" is the served ones already
            return
        served = self.store.live_environments(self.settings.worker_stale_s)
        unserved = [env.id for env in envs if env.id not in served]
        if unserved:
            index = list(request.environments).index(unserved[0])
            raise NotServed(unserved, f"environments[{index}]")

    def _case(self, request: JobRequest) -> Case:
        if request.case is None:
            raise BadInput("case", f"a {request.kind} job needs a case")
        try:
            return parse_case(request.case)
        except BadInput as exc:
            raise _prefixed(exc, "case") from exc

    def _make_runs(self, bypass_cache: bool) -> MakeRuns:
        """How a triage or sweep makes a part's runs: as a run job's, from the cache."""
        def make_runs(job_id: str, case: Case, envs: list[Environment],
                      now: float) -> list[RunRow]:
            planned = fan_out(case, envs, {}, case_field="case")
            return self._runs(job_id, case, planned, bypass_cache, now)
        return make_runs

    def _submit_triage(self, request: JobRequest) -> JobView:
        """A triage job: a run job per report with code, its runs on every environment
        (oldest first), all admitted at once (CONTRACT.md, "Tracker")."""
        reports = reports_of_request(request.reports)
        envs = sorted(self._environments(request.environments), key=lambda env: env.version)
        self._check_served(envs, request)
        job_id, runs = store_triage(self.store, reports, envs,
                                    self._make_runs(request.bypass_cache), request.bypass_cache,
                                    self.settings.max_queued_runs, time.time())
        return self._published(job_id, runs)

    def _submit_sweep(self, request: JobRequest) -> JobView:
        """A sweep job: every stored case's variant on `since` and `env`, the results the store
        holds read from the cache, the rest run (CONTRACT.md, "Tracker")."""
        if request.env is None:
            raise BadInput("env", "a sweep job needs the new environment")
        new = self.catalog.get(request.env, "env")
        old = (self.catalog.get(request.since, "since") if request.since
               else previous_environment(self.catalog, new, "since"))
        served = self.store.live_environments(self.settings.worker_stale_s)
        for field, env in (("since", old), ("env", new)):
            if not request.wait and env.id not in served:
                raise NotServed([env.id], field)
        cases = stored_cases(self.store.jobs_of_kind(JobKind.RUN.value))
        job_id, runs = store_sweep(self.store, cases, old, new, self._make_runs(False),
                                   self.settings.max_queued_runs, time.time())
        return self._published(job_id, runs)

    def _published(self, job_id: str, runs: list[RunRow]) -> JobView:
        """A triage's or sweep's view, once its queued runs are published."""
        self._publish([run for run in runs if run.state == RunState.QUEUED])
        view = self.job(job_id)
        assert view is not None  # stored just above
        return view

    def _runs(self, job_id: str, case: Case, planned: list[PlannedRun], bypass_cache: bool,
              now: float) -> list[RunRow]:
        keys = [cache_key(case, run.variant, run.env) for run in planned]
        hits = {} if bypass_cache else self.store.cached_results(keys)
        runs: list[RunRow] = []
        for run, key in zip(planned, keys, strict=True):
            hit = hits.get(key)
            runs.append(RunRow(
                id=uuid.uuid4().hex, job_id=job_id, ordinal=len(runs), variant=run.variant,
                environment=run.env.id, state=RunState.DONE if hit else RunState.QUEUED,
                cache_key=key, cached=hit is not None, result_id=hit, timeout_s=case.timeout_s,
                created_at=now, published_at=None if hit else now,
                finished_at=now if hit else None))
        return runs

    def submit(self, body: Any) -> JobView:
        """Validate, store and enqueue a job; BadInput names the wrong field, QueueFull is 429.
        The answer carries the job's cancel token, given this once (the store keeps its hash)."""
        request = self._request(body)
        refuse_other_kinds_fields(request)
        # Runs that waited too long leave the queue before it is counted (a worker's recovery
        # sweep ends them too; a read of a job never does: tvmrepro.expiry).
        expire_waiting(self.store, self.settings.wait_expiry_s)
        submitters: dict[JobKind, Callable[[JobRequest], JobView]] = {
            JobKind.RUN: self._submit_run, JobKind.BISECT: self._submit_bisect,
            JobKind.REDUCE: self._submit_narrowing, JobKind.EXTRACT: self._submit_narrowing,
            JobKind.TRIAGE: self._submit_triage, JobKind.SWEEP: self._submit_sweep}
        view = submitters[JobKind(request.kind)](request)
        token = secrets.token_urlsafe(TOKEN_BYTES)
        self.store.set_cancel_digest(view.id, token_digest(token))
        return view.model_copy(update={"cancel_token": token})

    def _submit_run(self, request: JobRequest) -> JobView:
        """A run job: one run per variant and environment, from the cache where it can."""
        refuse_bisect_fields(request)
        case = self._case(request)
        envs = self._environments(request.environments)
        planned = fan_out(case, envs, self.store.fingerprints(), request.variants, case_field="case")
        variants = list(dict.fromkeys(run.variant for run in planned))
        self._check_served(envs, request)
        if len(variants) > self.settings.max_queued_runs:  # the cap is per environment
            raise BadInput("variants", f"the job makes {len(variants)} runs on each "
                           f"environment; this service queues at most "
                           f"{self.settings.max_queued_runs} per environment")
        job_id, now = uuid.uuid4().hex, time.time()
        runs = self._runs(job_id, case, planned, request.bypass_cache, now)
        job = JobRow(id=job_id, kind=request.kind, title=case.title,
                     case=case.model_dump(mode="json", exclude_defaults=True),
                     environments=[env.id for env in envs], variants=variants,
                     bypass_cache=request.bypass_cache, created_at=now)
        submit(self.store, job, runs, self.settings.max_queued_runs)
        self._publish([run for run in runs if run.state == RunState.QUEUED])
        view = self.job(job_id)
        assert view is not None  # stored just above
        return view

    def _submit_bisect(self, request: JobRequest) -> JobView:
        """A bisect job: its first probes stored and published (CONTRACT.md, "Bisection")."""
        if request.variants is not None:
            raise BadInput("variants", "a bisect job takes one 'variant', not 'variants'")
        case = self._case(request)
        envs = self._environments(request.environments)
        options = bisect_options(request, case, envs, self.catalog)
        fan_out(case, envs, self.store.fingerprints(), [options.variant], "variant", "case")
        self._check_served(envs, request)
        job_id = start_bisect(self.store, self.catalog, self._publish, case, options,
                              self.settings.max_queued_runs, time.time())
        view = self.job(job_id)
        assert view is not None  # stored just above
        return view

    def _submit_narrowing(self, request: JobRequest) -> JobView:
        """A reduce or extract job: its one run stored and published (CONTRACT.md, "Reduction")."""
        case = self._case(request)
        envs = self._environments(request.environments)
        options = narrow_options(request, case, envs)
        fan_out(case, envs, self.store.fingerprints(), [options.variant], "variant", "case")
        self._check_served(envs, request)
        job_id = start_narrowing(self.store, self._publish, case, options,
                                 self.settings.max_queued_runs, time.time())
        view = self.job(job_id)
        assert view is not None  # stored just above
        return view

    def _publish(self, runs: list[RunRow]) -> None:
        # Stored before published: a publish that fails leaves the run waiting in the
        # store, and the workers' recovery sweep publishes it again.
        try:
            for run in runs:
                publish_run(self.celery, run.id, run.environment, run.timeout_s)
        except Exception:
            log.exception("publishing runs failed; the recovery sweep will publish them")

    # Reading ------------------------------------------------------------------

    def job(self, job_id: str) -> JobView | None:
        """A job with its runs and matrix, or None: read only (no GET writes to the store; what a
        dead worker left is settled by the recovery sweep, worker/recovery.py)."""
        job = self.store.job(job_id)
        if job is None:
            return None
        if job.kind in (JobKind.TRIAGE, JobKind.SWEEP):
            return parts_view(self.store, job, _iso(job.created_at))
        bisect = read_bisect(self.store, job) if job.kind == JobKind.BISECT else None
        # Stored by the job's last finisher (tvmrepro.settling); one that died leaves them to
        # the recovery sweep, and until then the job reads without them.
        comparisons, symbols = job.comparisons, job.symbols
        runs = [_run_view(run) for run in job.runs]
        status = bisect_status(job_status(job.runs, settled=comparisons is not None), bisect)
        reduce, extract = read_narrowing(self.store, job, status)
        return JobView(
            id=job.id, kind=job.kind, title=job.title, status=status, reduce=reduce,
            extract=extract,
            created_at=_iso(job.created_at), environments=job.environments,
            variants=job.variants, bypass_cache=job.bypass_cache,
            cached_runs=sum(run.cached for run in runs), runs=runs,
            matrix=build_matrix(job, comparisons), case=job.case, bisect=bisect,
            symbols=symbols or [],  # made once, when the job's last run was stored
            likely_duplicates=self._likely_duplicates(job))

    def _likely_duplicates(self, job: JobRow) -> list[KnownIssue]:
        """The issues that a triage saw fail with a signature of this job's failures."""
        signatures = [found for run in job.runs
                      if (found := result_bug_signature(run.result)) is not None]
        known = self.store.known_issues_failing_with(signatures)
        return likely_duplicates(signatures, known, job.title)

    def result_id(self, job_id: str, run_id: str) -> str | None:
        """The id under which a finished run's result is stored (None: unknown or unfinished)."""
        run = self.store.run(job_id, run_id)
        return run.result_id if run else None

    def compare(self, job_id: str, a: str, b: str) -> Comparison | None:
        """Compare two finished runs of a job (None if either is unknown or unfinished)."""
        first, second = (self.store.run(job_id, run_id) for run_id in (a, b))
        if first is None or second is None or not first.result_id or not second.result_id:
            return None
        return compare(CellRef(variant=first.variant, environment=first.environment),
                       passes_of(self.store.passes(first.result_id)),
                       CellRef(variant=second.variant, environment=second.environment),
                       passes_of(self.store.passes(second.result_id)))

    def environments(self) -> EnvironmentList:
        """Every catalog environment with its live workers and waiting runs."""
        served = self.store.live_environments(self.settings.worker_stale_s)
        building = self.store.building_environments(self.settings.worker_stale_s)
        fingerprints = self.store.fingerprints()
        waiting = self.store.waiting_by_environment()
        views = []
        for env in self.catalog.environments:
            fingerprint = fingerprints.get(env.id)
            shown = {k: v for k, v in (fingerprint or {}).items() if k != "passes"} or None
            views.append(EnvironmentView(
                id=env.id, tvm=env.release, device=env.device, image=env.image,
                packages=env.packages, workers=served.get(env.id, 0),
                state=("building" if env.id in building else "served" if env.id in served
                       else "unserved"),
                step=building.get(env.id), waiting=waiting.get(env.id, 0), fingerprint=shown))
        return EnvironmentList(environments=views)

    def jobs(self, limit: int, offset: int) -> JobList:
        """A page of jobs, newest first."""
        rows, total = self.store.job_page(limit, offset)
        jobs = [JobSummary(id=r["id"], kind=r["kind"], title=r["title"],
                           created_at=_iso(r["created_at"]), runs=r["runs"], done=r["done"] or 0)
                for r in rows]
        more = offset + len(jobs) < total
        return JobList(jobs=jobs, total=total, next_offset=offset + len(jobs) if more else None)

    def cancel(self, job_id: str, token: str | None) -> Cancelled | None:
        """End every run of the job that has no result as `infra_error` Cancelled (None: no
        job); Forbidden unless `token` is the job's cancel token (its submitter's)."""
        if self.store.job(job_id, results=False) is None:
            return None
        if not token:
            raise Forbidden(f"cancelling job {job_id} needs its cancel token (the "
                            f"'cancel_token' of the answer to its submission) in the "
                            f"{CANCEL_HEADER} header", CANCEL_HEADER)
        digest = self.store.cancel_digest(job_id)
        if digest is None or not hmac.compare_digest(digest, token_digest(token)):
            raise Forbidden(f"the {CANCEL_HEADER} given is not job {job_id}'s cancel token; "
                            "only whoever submitted the job can cancel it", CANCEL_HEADER)
        cancelled = 0
        run_jobs = [job_id, *self.store.triage_run_jobs(job_id)]  # a triage's runs are theirs
        for run in [run for one in run_jobs for run in self.store.unfinished_of(one)]:
            result = Result(environment=run.environment, variant=run.variant,
                            status=Status.INFRA_ERROR, error_type="Cancelled",
                            message="cancelled before it finished", signature="Cancelled")
            cancelled += finish_run(self.store, run.job_id, run.id, result)
        return Cancelled(id=job_id, cancelled_runs=cancelled)

    def health(self) -> Health:
        """Whether the store and the broker answer."""
        store = broker = "ok"
        waiting, unserved = None, []
        try:
            waiting = self.store.waiting_count()
            served = self.store.live_environments(self.settings.worker_stale_s)
            unserved = sorted(env for env in self.store.waiting_by_environment()
                              if env not in served)
        except Exception as exc:
            store = f"unavailable: {type(exc).__name__}"
        try:
            broker_ping(self.celery)
        except Exception as exc:
            broker = f"unavailable: {type(exc).__name__}"
        ok = store == broker == "ok"
        return Health(status="ok" if ok else "unavailable", store=store, broker=broker,
                      waiting_runs=waiting, unserved=unserved)
