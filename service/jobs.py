"""Jobs: validate a submission and hand it to its kind (tvmrepro.jobs.kinds), read it back,
compare its runs, cancel it; the environments and the service's health."""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from typing import Any

from celery import Celery

from service.waiting import JobWaits, JobWatcher
from tvmrepro.api.pages import PageAsked
from tvmrepro.api.requests import CANCEL_HEADER, JobRequest, parse_request
from tvmrepro.api.views import (
    Cancelled,
    Comparison,
    EnvironmentList,
    EnvironmentView,
    Health,
    JobList,
    JobSummary,
    JobView,
)
from tvmrepro.choice import DEFAULT_WHY, default_environments
from tvmrepro.environments import Catalog, default_catalog
from tvmrepro.errors import BadInput, Forbidden
from tvmrepro.expiry import expire_waiting
from tvmrepro.jobs.bisect import BISECT
from tvmrepro.jobs.bisect.given import checked
from tvmrepro.jobs.comparisons import run_comparison
from tvmrepro.jobs.kinds import KINDS
from tvmrepro.jobs.release import release_quietly
from tvmrepro.jobs.settling import finish_run
from tvmrepro.jobs.submission import Submission
from tvmrepro.jobs.views import iso
from tvmrepro.queue import broker_ping, drop_waiting_messages, make_celery
from tvmrepro.results import Result, Status
from tvmrepro.settings import Settings
from tvmrepro.store import Store, open_store
from tvmrepro.store.notices import notices_for
from tvmrepro.store.rows import RunRow
from tvmrepro.submitters import Admission

log = logging.getLogger(__name__)
TOKEN_BYTES = 24  # 192 random bits


def token_digest(token: str) -> str:
    """What the store keeps of a cancel token: its SHA-256, hex."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class JobService:
    """The API's side of the service: the store, the broker and the catalog together."""

    def __init__(self, settings: Settings, store: Store, celery: Celery,
                 catalog: Catalog | None = None) -> None:
        self.settings, self.store, self.celery = settings, store, celery
        self.catalog = catalog or default_catalog()
        # Long-polls of a job's view (service/waiting.py): one watcher of the jobs they wait on.
        watcher = JobWatcher(store.revisions, notices_for(settings.redis_url, settings.redis_prefix))
        self.waits = JobWaits(self.job, self._runs_ended, watcher, settings.api_threads)

    @classmethod
    def open(cls, settings: Settings) -> JobService:
        """Connect to the store (creating its tables; its writes announced where the broker is
        Redis: tvmrepro.store.notices) and the broker of these settings."""
        store = open_store(settings.store_url,
                           notices=notices_for(settings.redis_url, settings.redis_prefix),
                           artifacts=settings.artifacts_dir)
        return cls(settings, store, make_celery(settings))

    def _runs_ended(self, job_id: str) -> bool:
        return self.store.unfinished_count(job_id) == 0

    # Submission ---------------------------------------------------------------

    def submit(self, body: Any, admission: Admission | None = None) -> JobView:
        """Validate, store and enqueue a job; BadInput names the wrong field, QueueFull (its
        submitter's BudgetSpent too) is 429. The answer carries the job's cancel token, given
        this once (the store keeps its hash)."""
        return self.start(parse_request(body), admission)

    def start(self, request: JobRequest, admission: Admission | None = None) -> JobView:
        """Store and enqueue a validated request through its kind's `start` (`submit`), as
        `admission`'s submitter's (None: nobody's, no budget: the service's own callers)."""
        # Runs that waited too long leave the queue before it is counted (a worker's recovery
        # sweep ends them too; a read of a job never does: tvmrepro.expiry).
        self._drop_messages(expire_waiting(self.store, self.settings.wait_expiry_s))
        store = self.store.admitting(admission) if admission is not None else self.store
        submission = Submission(self.settings, store, self.catalog, self._publish, time.time())
        job_id = KINDS[request.kind].start(submission, request)
        view = self.job(job_id)
        assert view is not None  # stored just above
        token = secrets.token_urlsafe(TOKEN_BYTES)
        self.store.set_cancel_digest(view.id, token_digest(token))
        return view.model_copy(update={"cancel_token": token})

    def _drop_messages(self, runs: list[RunRow]) -> None:
        # Runs that ended without a worker (cancelled, expired) leave their queue: one that no
        # worker serves would keep their messages in Redis for good. A held run has none.
        try:
            drop_waiting_messages(self.celery, [run for run in runs if run.published_at])
        except Exception:
            log.exception("dropping the messages of %d ended runs failed", len(runs))

    def _publish(self, runs: list[RunRow]) -> None:
        # Stored held, then released as their lanes have room (tvmrepro.jobs.release): what
        # this release leaves held, a worker's next release or recovery sweep publishes.
        release_quietly(self.store, self.celery, {run.environment for run in runs},
                        self.settings)

    # Reading ------------------------------------------------------------------

    def job(self, job_id: str, page: PageAsked | None = None) -> JobView | None:
        """A job with its runs and matrix (and its kind's answer), or None: read only (no GET
        writes to the store; what a dead worker left is settled by the recovery sweep,
        worker/recovery.py). A triage's reports and a sweep's cases: `page` of them (None:
        the first)."""
        job = self.store.job(job_id)
        if job is None:
            return None
        kind = KINDS[job.kind]
        if kind.read_page is not None:
            return kind.read_page(self.store, job, page or PageAsked())
        return kind.read(self.store, job)

    def run(self, job_id: str, name: str) -> RunRow | None:
        """The run of a job that `name` names: its id, or VARIANT@ENVIRONMENT as the command line
        names runs (None: no such run)."""
        variant, at, environment = name.partition("@")
        if not at:
            return self.store.run(job_id, name)
        runs = self.store.runs_of_jobs([job_id], results=False)[job_id]
        return next((r for r in runs if (r.variant, r.environment) == (variant, environment)),
                    None)

    def result_id(self, job_id: str, run_id: str) -> str | None:
        """The id under which a finished run's result is stored (None: unknown or unfinished);
        `run_id` may be VARIANT@ENVIRONMENT."""
        run = self.run(job_id, run_id)
        return run.result_id if run else None

    def compare(self, job_id: str, a: str, b: str) -> Comparison | None:
        """Compare two finished runs of a job, each named by id or VARIANT@ENVIRONMENT (None if
        either is unknown or unfinished): the comparison stored with the job where it has one,
        else one bounded in time (tvmrepro.jobs.comparisons.run_comparison)."""
        first, second = (self.run(job_id, name) for name in (a, b))
        job = self.store.job(job_id, results=False) if first and second else None
        if first is None or second is None or job is None:
            return None
        return run_comparison(job, first.id, second.id, self.store.passes)

    def environments(self) -> EnvironmentList:
        """Every catalog environment with its live workers and waiting runs."""
        served = self.store.live_environments(self.settings.worker_stale_s)
        building = self.store.building_environments(self.settings.worker_stale_s)
        fingerprints = self.store.fingerprints()
        waiting = self.store.waiting_by_environment()
        default = {env.id for env in default_environments(self.catalog)}
        views = []
        for env in self.catalog.environments:
            fingerprint = fingerprints.get(env.id)
            shown = {k: v for k, v in (fingerprint or {}).items() if k != "passes"} or None
            views.append(EnvironmentView(
                id=env.id, tvm=env.release, device=env.device, image=env.image,
                packages=env.packages, workers=served.get(env.id, 0),
                state=("building" if env.id in building else "served" if env.id in served
                       else "unserved"),
                step=building.get(env.id), waiting=waiting.get(env.id, 0), fingerprint=shown,
                default=env.id in default))
        return EnvironmentList(environments=views, default_why=DEFAULT_WHY)

    def jobs(self, limit: int, offset: int) -> JobList:
        """A page of jobs, newest first (a job made of run jobs counts their runs as its own)."""
        rows, total = self.store.job_page(limit, offset)
        for row in rows:
            if KINDS[row["kind"]].parts:
                row.update(self.store.triage_run_counts(row["id"]))
        jobs = [JobSummary(id=r["id"], kind=r["kind"], title=r["title"],
                           created_at=iso(r["created_at"]), runs=r["runs"], done=r["done"] or 0)
                for r in rows]
        more = offset + len(jobs) < total
        return JobList(jobs=jobs, total=total, next_offset=offset + len(jobs) if more else None)

    def give_windows(self, job_id: str, body: Any, token: str | None) -> JobView | None:
        """Keep the commit windows and suspects that a bisect job's submitter computed from a
        history of its own (tvmrepro.jobs.bisect.given); the job as it now reads (None: no
        job). Forbidden unless `token` is the job's cancel token."""
        job = self.store.job(job_id)
        if job is None:
            return None
        digest = self.store.cancel_digest(job_id)
        if not token or digest is None or not hmac.compare_digest(digest, token_digest(token)):
            raise Forbidden(f"only whoever submitted job {job_id} gives it windows: its cancel "
                            f"token in the {CANCEL_HEADER} header", CANCEL_HEADER)
        if job.kind != BISECT:
            raise BadInput("job", f"job {job_id} is a {job.kind} job, not a bisection")
        self.store.save_windows(job_id, checked(body, KINDS[job.kind].read(self.store, job).bisect))
        return self.job(job_id)

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
        cancelled = []
        run_jobs = [job_id, *self.store.triage_run_jobs(job_id)]  # a triage's runs are theirs
        for run in [run for one in run_jobs for run in self.store.unfinished_of(one)]:
            result = Result(environment=run.environment, variant=run.variant,
                            status=Status.INFRA_ERROR, error_type="Cancelled",
                            message="cancelled before it finished", signature="Cancelled")
            if finish_run(self.store, run.job_id, run.id, result):
                cancelled.append(run)
        self._drop_messages(cancelled)
        # Their slots in flight are free: other runs of their lanes take them now.
        release_quietly(self.store, self.celery, {run.environment for run in cancelled},
                        self.settings)
        return Cancelled(id=job_id, cancelled_runs=len(cancelled))

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
