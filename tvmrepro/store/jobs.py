"""The job store: jobs and runs in SQLite or PostgreSQL, and `Store`, made of every table family.

The store, not the broker, is the truth about a job: a run is stored before its
message is published, a worker claims it here before running it and stores its
result here with a conditional update, so a redelivered or republished message
can never give a run a second result (`finish` returns False for it).
"""

from __future__ import annotations

import copy
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tvmrepro.errors import ReproError
from tvmrepro.lifecycle import CACHED_STATUSES, UNCACHED_SIGNATURES, Action, Claim, RunState
from tvmrepro.results import Status
from tvmrepro.store import schema as t
from tvmrepro.store.base import ChangeNotices, changed
from tvmrepro.store.bisections import BisectionRows
from tvmrepro.store.blobs import BlobRows
from tvmrepro.store.budgets import past_budget, stamped
from tvmrepro.store.comparisons import Compared, ComparisonRows, insert_comparisons
from tvmrepro.store.github import GitHubRows
from tvmrepro.store.known_issues import KnownIssueRows
from tvmrepro.store.narrowings import NarrowingRows
from tvmrepro.store.releases import ReleaseRows
from tvmrepro.store.results import ResultRows, run_row, with_result
from tvmrepro.store.retention import RetentionRows
from tvmrepro.store.rows import JobRow, RunRow
from tvmrepro.store.triages import TriageReportRow, TriageRows, insert_triage_reports, run_jobs_of_triages
from tvmrepro.store.workers import WorkerRegistry
from tvmrepro.submitters import Admission


class QueueFull(ReproError):
    """Admitting the job would put more runs in an environment's queue than the cap allows
    (HTTP 429). The cap is per environment: runs waiting for an environment that no worker
    serves fill that environment's queue only."""

    def __init__(self, waiting: int, cap: int, environment: str) -> None:
        super().__init__(f"the queue of {environment} holds {waiting} waiting runs (cap {cap} "
                         "per environment); retry later")
        self.waiting, self.cap, self.environment = waiting, cap, environment


class BudgetSpent(QueueFull):
    """Admitting the job would take its submitter past its own budget (HTTP 429, as a full
    queue, and stored nothing as one): its waiting runs on an environment, or the bytes its
    jobs stored lately (tvmrepro.submitters)."""

    def __init__(self, submitter: str, message: str) -> None:
        ReproError.__init__(self, message)
        self.submitter = submitter


class CacheRemoved(QueueFull):
    """A result the cache served the job from was removed meanwhile by retention (HTTP 429,
    stored nothing): submitted again, the job runs what it lacks."""

    def __init__(self, result_ids: set[str]) -> None:
        ReproError.__init__(self, f"the cached results {', '.join(sorted(result_ids))} were "
                                  "removed as the job was submitted; submit it again")


def open_store(url: str, pooled: bool = True, notices: ChangeNotices | None = None,
               artifacts: Path | None = None) -> Store:
    """A store with its schema made (its writes announced to `notices`: tvmrepro.store.notices;
    its large values in the folder `artifacts`, None: the settings'); an unreachable or
    unwritable database is one ReproError."""
    store = Store(url, pooled, notices, artifacts)
    try:
        store.create_schema()
    except sa.exc.SQLAlchemyError as exc:
        where = sa.engine.make_url(url).render_as_string(hide_password=True)
        reason = getattr(exc, "orig", None) or exc
        raise ReproError(f"cannot open the job store {where}: {reason}") from exc
    return store


class Store(ResultRows, ComparisonRows, WorkerRegistry, BisectionRows, NarrowingRows,
            KnownIssueRows, TriageRows, BlobRows, GitHubRows, ReleaseRows, RetentionRows):
    """Every read and write of jobs and runs; safe to share between threads of one process.
    The other table families are its parents (results, comparisons, workers, bisections,
    narrowings, known_issues, triages, blobs, the GitHub bot's, retention); the engine,
    schema and artifact store are StoreBase's."""

    # Who submits what this store admits (None: no submitter, as a worker's own probes).
    admission: Admission | None = None

    # Submission ---------------------------------------------------------------

    def admitting(self, admission: Admission) -> Store:
        """This store (its engine shared) for one submission: the jobs it admits are the
        submitter's, counted against its budget (tvmrepro.submitters)."""
        found = copy.copy(self)
        found.admission = admission
        return found

    def submit(self, job: JobRow, new_runs: list[RunRow], cap: int) -> None:
        """Store a job and its runs in one transaction, or raise QueueFull storing nothing."""
        self.submit_jobs([(job, new_runs)], cap)

    def submit_jobs(self, jobs: list[tuple[JobRow, list[RunRow]]], cap: int,
                    triage_reports: Mapping[str, list[TriageReportRow]] | None = None,
                    settled: Mapping[str, Compared] | None = None) -> None:
        """Store jobs and their runs (and the reports of triage jobs among them, and the
        comparisons `settled` holds of jobs finished as they are stored: served whole from
        the cache) in one transaction, or raise QueueFull storing nothing: a triage's run
        jobs are admitted together."""
        admission = self.admission
        if admission is not None:
            jobs = stamped(jobs, admission, triage_reports)
        new_runs = [run for _, runs in jobs for run in runs]
        waiting_new = any(run.state == RunState.QUEUED for run in new_runs)
        counts = {job.id: len(runs) for job, runs in jobs}
        with self._write() as conn:
            # Locks the admission row: concurrent submissions count and insert one at a time.
            conn.execute(t.admission.update().where(t.admission.c.id == 1)
                         .values(tickets=t.admission.c.tickets + 1))
            # The submitter's own budget first: its load is refused to it before the queue
            # that everyone shares fills.
            if admission is not None and admission.budget is not None:
                spent = past_budget(conn, jobs, admission.submitter, admission.budget)
                if spent is not None:
                    raise BudgetSpent(admission.submitter, spent)
            if waiting_new:
                self._admit(conn, new_runs, cap)
            self._check_served(conn, new_runs)
            conn.execute(t.jobs.insert(), [job.columns() for job, _ in jobs])
            if new_runs:
                conn.execute(t.runs.insert(), [run.columns() for run in new_runs])
            for job_id, found in (settled or {}).items():
                insert_comparisons(conn, self.artifacts, job_id, found, counts[job_id])
            for job_id, rows in (triage_reports or {}).items():
                insert_triage_reports(conn, job_id, rows)

    @staticmethod
    def _admit(conn: Connection, new_runs: list[RunRow], cap: int) -> None:
        """QueueFull unless every environment's waiting runs, the new ones counted, stay
        within the cap."""
        new = Counter(run.environment for run in new_runs if run.state == RunState.QUEUED)
        query = (sa.select(t.runs.c.environment, sa.func.count())
                 .where(t.runs.c.state == RunState.QUEUED.value,
                        t.runs.c.environment.in_(sorted(new)))
                 .group_by(t.runs.c.environment))
        waiting = {env_id: int(n) for env_id, n in conn.execute(query)}
        for env_id, count in sorted(new.items()):
            if waiting.get(env_id, 0) + count > cap:
                raise QueueFull(waiting.get(env_id, 0), cap, env_id)

    @staticmethod
    def _check_served(conn: Connection, new_runs: list[RunRow]) -> None:
        """CacheRemoved unless every result the new runs are served from is still stored
        (retention removes jobs under the same lock: tvmrepro.store.retention)."""
        served = {run.result_id for run in new_runs if run.cached and run.result_id}
        if served:
            held = set(conn.execute(sa.select(t.results.c.run_id)
                                    .where(t.results.c.run_id.in_(served))).scalars())
            if served - held:
                raise CacheRemoved(served - held)

    @staticmethod
    def _count_waiting(conn: Connection) -> int:
        query = sa.select(sa.func.count()).where(t.runs.c.state == RunState.QUEUED.value)
        return int(conn.execute(query).scalar_one())

    def waiting_count(self) -> int:
        """How many runs wait for a worker."""
        with self.engine.connect() as conn:
            return self._count_waiting(conn)

    def waiting_by_environment(self) -> dict[str, int]:
        """Environment id -> how many of its runs wait for a worker."""
        query = (sa.select(t.runs.c.environment, sa.func.count())
                 .where(t.runs.c.state == RunState.QUEUED.value).group_by(t.runs.c.environment))
        with self.engine.connect() as conn:
            return {env_id: int(n) for env_id, n in conn.execute(query)}

    def cached_result(self, cache_key: str) -> str | None:
        """The result id of the first decisive finished run with this key (lifecycle's
        CACHED_STATUSES: never a timeout, a SIGKILL or an infra_error), or None."""
        return self.cached_results([cache_key]).get(cache_key)

    def cached_results(self, cache_keys: list[str],
                       statuses: tuple[Status, ...] = CACHED_STATUSES) -> dict[str, str]:
        """Cache key -> `cached_result` of it, for those that have one, in one query (those
        with one of `statuses`: a sweep takes a stored timeout too)."""
        # Only the runs that made a result themselves (its run_id is theirs): a cached run
        # points at the first of them, so they answer alone. Reached through the cache key's
        # index, not (as SQLite chose for `state`) through every finished run of the store.
        query = (sa.select(t.runs.c.cache_key, t.results.c.run_id)
                 .join(t.results, t.results.c.run_id == t.runs.c.id)
                 .where(t.runs.c.cache_key.in_(set(cache_keys)),
                        t.results.c.status.in_([s.value for s in statuses]),
                        t.results.c.signature.not_in(UNCACHED_SIGNATURES)
                        | t.results.c.signature.is_(None))
                 .order_by(t.runs.c.finished_at.desc(), t.runs.c.id))
        with self.engine.connect() as conn:
            # The first decisive result wins: a later one (a run beside a CPU hog) never
            # replaces it. Newest first, so the oldest is the one the dict keeps.
            return {key: result_id for key, result_id in conn.execute(query)}

    def mark_published(self, run_ids: list[str], at: float) -> None:
        """Record that these runs' messages were (re)published at `at`."""
        if run_ids:
            with self._write() as conn:
                conn.execute(t.runs.update().where(t.runs.c.id.in_(run_ids))
                             .values(published_at=at))

    def set_cancel_digest(self, job_id: str, digest: str) -> None:
        """Record the SHA-256 (hex) of the token that cancels the job (as it is submitted)."""
        with self._write() as conn:
            conn.execute(t.jobs.update().where(t.jobs.c.id == job_id)
                         .values(cancel_digest=digest))

    def cancel_digest(self, job_id: str) -> str | None:
        """The SHA-256 (hex) of the job's cancel token (None: no job, or one without)."""
        query = sa.select(t.jobs.c.cancel_digest).where(t.jobs.c.id == job_id)
        with self.engine.connect() as conn:
            found: str | None = conn.execute(query).scalar_one_or_none()
        return found

    def waiting_since(self, before: float) -> list[RunRow]:
        """Runs still waiting for a worker that were stored before `before` (to expire)."""
        query = (sa.select(t.runs).where(t.runs.c.state == RunState.QUEUED.value,
                                         t.runs.c.created_at < before)
                 .order_by(t.runs.c.created_at))
        with self.engine.connect() as conn:
            return [RunRow.model_validate(dict(r)) for r in conn.execute(query).mappings()]

    # Reading ------------------------------------------------------------------

    def job(self, job_id: str, results: bool = True) -> JobRow | None:
        """A job with its runs in order (each with its result's summary unless not `results`)
        and its comparisons."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(t.jobs).where(t.jobs.c.id == job_id)).mappings().first()
            if row is None:
                return None
            query = (sa.select(t.runs, *with_result()).outerjoin(
                t.results, t.results.c.run_id == t.runs.c.result_id)
                     if results else sa.select(t.runs))
            query = query.where(t.runs.c.job_id == job_id).order_by(t.runs.c.ordinal)
            runs = [run_row(self.artifacts, r) for r in conn.execute(query).mappings()]
            stored = conn.execute(sa.select(t.comparisons.c.data, t.comparisons.c.data_ref,
                                            t.comparisons.c.runs)
                                  .where(t.comparisons.c.job_id == job_id)).first()
        # Comparisons made from fewer runs than the job has now are stale: not shown.
        data = (self.artifacts.json(stored.data, stored.data_ref)
                if stored is not None and stored.runs == len(runs) else None)
        # {"comparisons", "symbols"}; a list: comparisons alone (stored by an older version).
        comparisons = data.get("comparisons") if isinstance(data, dict) else data
        symbols = data.get("symbols") if isinstance(data, dict) else None
        return JobRow.model_validate({**dict(row), "runs": runs, "comparisons": comparisons,
                                      "symbols": symbols})

    def job_page(self, limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
        """Jobs newest first (id, kind, title, created_at, runs, done), and how many there are.
        A triage's (or sweep's) run jobs are shown under it: not listed (their runs are counted
        as its own by the job layer: `triage_run_counts`)."""
        done = sa.func.sum(sa.case((t.runs.c.state == RunState.DONE.value, 1), else_=0))
        listed = ~t.jobs.c.id.in_(run_jobs_of_triages())
        query = (sa.select(t.jobs.c.id, t.jobs.c.kind, t.jobs.c.title, t.jobs.c.created_at,
                           sa.func.count(t.runs.c.id).label("runs"), done.label("done"))
                 .outerjoin(t.runs, t.runs.c.job_id == t.jobs.c.id).where(listed)
                 .group_by(t.jobs.c.id)
                 .order_by(t.jobs.c.created_at.desc(), t.jobs.c.id).limit(limit).offset(offset))
        with self.engine.connect() as conn:
            rows = [dict(r) for r in conn.execute(query).mappings()]
            total = int(conn.execute(sa.select(sa.func.count()).select_from(t.jobs)
                                     .where(listed)).scalar_one())
        return rows, total

    def jobs_of_kind(self, kind: str) -> list[JobRow]:
        """Every job of `kind`, oldest first, without its runs (a sweep reads their cases)."""
        query = sa.select(t.jobs).where(t.jobs.c.kind == kind).order_by(t.jobs.c.created_at,
                                                                         t.jobs.c.id)
        with self.engine.connect() as conn:
            return [JobRow.model_validate(dict(r)) for r in conn.execute(query).mappings()]

    def unfinished_of(self, job_id: str) -> list[RunRow]:
        """A job's runs that have no result yet, in order."""
        query = (sa.select(t.runs).where(t.runs.c.job_id == job_id,
                                         t.runs.c.state != RunState.DONE.value)
                 .order_by(t.runs.c.ordinal))
        with self.engine.connect() as conn:
            return [RunRow.model_validate(dict(r)) for r in conn.execute(query).mappings()]

    def run(self, job_id: str, run_id: str) -> RunRow | None:
        """One run of a job, or None."""
        query = sa.select(t.runs).where(t.runs.c.id == run_id, t.runs.c.job_id == job_id)
        with self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return RunRow.model_validate(dict(row)) if row else None

    # Workers ------------------------------------------------------------------

    def claim(self, run_id: str, worker: str, max_deliveries: int, grace_s: float,
              claimer_gone: Callable[[str], bool]) -> Claim:
        """Take a delivered run for `worker`, unless it is done or a live claimer holds it."""
        now = time.time()
        query = (sa.select(t.runs, t.jobs.c.case, t.jobs.c.kind)
                 .join(t.jobs, t.jobs.c.id == t.runs.c.job_id)
                 .where(t.runs.c.id == run_id).with_for_update(of=t.runs))
        with self._write() as conn:
            row = conn.execute(query).mappings().first()
            if row is None or row["state"] == RunState.DONE:
                return Claim(Action.SKIP, run_id)
            if row["state"] == RunState.RUNNING and not (
                    claimer_gone(row["claimed_by"] or "")
                    or row["claimed_at"] + row["timeout_s"] + grace_s < now):
                return Claim(Action.SKIP, run_id)
            action = Action.EXHAUSTED if row["deliveries"] >= max_deliveries else Action.RUN
            if action is Action.RUN:
                conn.execute(t.runs.update().where(t.runs.c.id == run_id).values(
                    state=RunState.RUNNING.value, deliveries=row["deliveries"] + 1,
                    claimed_by=worker, claimed_at=now))
                changed(conn, [row["job_id"]])
        return Claim(action, run_id, row["job_id"], kind=row["kind"], case=row["case"],
                     variant=row["variant"], environment=row["environment"],
                     deliveries=row["deliveries"] + (action is Action.RUN))

    def unfinished_count(self, job_id: str) -> int:
        """How many of a job's runs have no result yet (without reading them)."""
        query = (sa.select(sa.func.count()).select_from(t.runs)
                 .where(t.runs.c.job_id == job_id, t.runs.c.state != RunState.DONE.value))
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def unfinished(self, environments: list[str]) -> list[RunRow]:
        """Queued and running runs of these environments (the recovery sweep reads them)."""
        query = sa.select(t.runs).where(
            t.runs.c.state != RunState.DONE.value, t.runs.c.environment.in_(environments))
        with self.engine.connect() as conn:
            return [RunRow.model_validate(dict(r)) for r in conn.execute(query).mappings()]
