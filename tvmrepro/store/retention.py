"""Retention: finished jobs older than TVMREPRO_RETENTION_DAYS leave the store, every row of
them with them, then the files no job names any more and the artifacts no row names.

A job stays while a kept job's runs show its results (`runs.result_id`: the result cache);
a triage's (or sweep's) run jobs go with it, never alone. Every worker's recovery sweep
prunes at most once an hour (`prune_when_due`), each time at most PRUNE_BATCH jobs; two hosts
pruning at once remove nothing twice and nothing kept: each removal re-checks, under the
admission lock that every submission takes, that no kept job's run shows its results.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tvmrepro.lifecycle import RunState
from tvmrepro.store import schema as t
from tvmrepro.store.artifacts import GRACE_S
from tvmrepro.store.base import StoreBase

log = logging.getLogger(__name__)
DAY_S = 86400.0
PRUNE_EVERY_S = 3600.0
PRUNE_BATCH = 200  # jobs one prune removes: a sweep's thread also heartbeats
_CHUNK = 500  # ids in one IN (...)
_PATTERNS = 50  # files looked for in one scan of the kept jobs' cases
_SHA256 = re.compile(r"[0-9a-f]{64}")
# Every table a job's rows are in, by the column that names the job.
_BY_JOB = (t.comparisons.c.job_id, t.bisections.c.job_id, t.narrowings.c.job_id,
           t.triage_reports.c.job_id, t.github_jobs.c.job_id)
_BY_RUN = (t.pass_ir.c.run_id, t.logs.c.run_id, t.results.c.run_id)
# Every column that names an artifact.
_REFS = (t.pass_ir.c.ir_ref, t.logs.c.stdout_ref, t.logs.c.stderr_ref, t.blobs.c.content_ref,
         t.results.c.data_ref, t.comparisons.c.data_ref)


class Pruned(NamedTuple):
    """What one prune removed, and whether expired jobs are left for the next."""

    jobs: int
    blobs: int
    artifacts: int
    more: bool


def chunks(items: Iterable[str], size: int = _CHUNK) -> Iterator[list[str]]:
    """`items` in lists of at most `size`."""
    found = list(items)
    for start in range(0, len(found), size):
        yield found[start:start + size]


def named_files(value: Any) -> set[str]:
    """The SHA-256 digests a stored case (or report) names its files by, wherever they sit."""
    if isinstance(value, dict):
        found = {value["sha256"]} if _SHA256.fullmatch(str(value.get("sha256", ""))) else set()
        return found.union(*(named_files(item) for item in value.values()))
    if isinstance(value, list):
        return set().union(*(named_files(item) for item in value))
    return set()


def _shown_elsewhere(conn: Connection, job_ids: set[str]) -> set[str]:
    """Those of `job_ids` whose results a run of a job not among them shows (the cache)."""
    source, shown = t.runs.alias("source"), t.runs.alias("shown")
    found: set[str] = set()
    for chunk in chunks(job_ids):
        query = (sa.select(source.c.job_id, shown.c.job_id)
                 .join(shown, shown.c.result_id == source.c.id)
                 .where(source.c.job_id.in_(chunk), shown.c.job_id != source.c.job_id))
        found |= {src for src, dep in conn.execute(query) if dep not in job_ids}
    return found


def _units(conn: Connection, job_ids: set[str]) -> list[tuple[str, str]]:
    """(triage, run job) for every triage or run job among `job_ids`."""
    found: list[tuple[str, str]] = []
    for chunk in chunks(job_ids):
        query = (sa.select(t.triage_reports.c.job_id, t.triage_reports.c.run_job)
                 .where(t.triage_reports.c.run_job.is_not(None),
                        t.triage_reports.c.job_id.in_(chunk) | t.triage_reports.c.run_job.in_(chunk)))
        found += [(triage, run_job) for triage, run_job in conn.execute(query)]
    return found


def removable(conn: Connection, job_ids: set[str]) -> set[str]:
    """The largest part of `job_ids` that can go: no job outside it shows its results, and
    no triage goes without its run jobs nor a run job without its triage."""
    found = set(job_ids)
    units = _units(conn, found)
    while True:
        kept = _shown_elsewhere(conn, found)
        kept |= {triage for triage, run_job in units if run_job not in found}
        kept |= {run_job for triage, run_job in units if triage not in found}
        if not kept & found:
            return found
        found -= kept


def _remove_rows(conn: Connection, job_ids: list[str]) -> None:
    """Delete every row of these jobs (inside the caller's transaction)."""
    run_ids = list(conn.execute(sa.select(t.runs.c.id).where(t.runs.c.job_id.in_(job_ids)))
                   .scalars())
    for chunk in chunks(run_ids):
        for column in _BY_RUN:
            conn.execute(column.table.delete().where(column.in_(chunk)))
    conn.execute(t.runs.delete().where(t.runs.c.job_id.in_(job_ids)))
    for column in _BY_JOB:
        conn.execute(column.table.delete().where(column.in_(job_ids)))
    conn.execute(t.jobs.delete().where(t.jobs.c.id.in_(job_ids)))


def _files_of(conn: Connection, job_ids: list[str]) -> set[str]:
    """The files these jobs' cases and reports name."""
    cases = conn.execute(sa.select(t.jobs.c.case).where(t.jobs.c.id.in_(job_ids))).scalars()
    reports = conn.execute(sa.select(t.triage_reports.c.report)
                           .where(t.triage_reports.c.job_id.in_(job_ids))).scalars()
    return named_files([*cases, *reports])


def _still_named(conn: Connection, digests: list[str]) -> set[str]:
    """Those of `digests` that a stored case or report names (one scan for them all)."""
    found: set[str] = set()
    for column in (t.jobs.c.case, t.triage_reports.c.report):
        text = sa.cast(column, sa.Text)
        query = sa.select(text).where(sa.or_(*(text.contains(d) for d in digests)))
        for (value,) in conn.execute(query):
            found |= {digest for digest in digests if digest in value}
    return found


class RetentionRows(StoreBase):
    """Removing jobs, and the files and artifacts they alone named (part of `Store`)."""

    _pruned_at = 0.0  # when this store's last prune ran (prune_when_due)

    def expired_jobs(self, retention_s: float, now: float | None = None) -> list[str]:
        """Finished jobs created and last finished more than `retention_s` ago that can go
        (`removable`), newest first: a job showing another's results goes before it."""
        cutoff = (time.time() if now is None else now) - retention_s
        done = sa.func.sum(sa.case((t.runs.c.state == RunState.DONE.value, 1), else_=0))
        last = sa.func.coalesce(sa.func.max(t.runs.c.finished_at), 0.0)
        query = (sa.select(t.jobs.c.id).outerjoin(t.runs, t.runs.c.job_id == t.jobs.c.id)
                 .where(t.jobs.c.created_at < cutoff).group_by(t.jobs.c.id, t.jobs.c.created_at)
                 .having(sa.func.count(t.runs.c.id) == done, last < cutoff)
                 .order_by(t.jobs.c.created_at.desc(), t.jobs.c.id))
        with self.engine.connect() as conn:
            ordered = list(conn.execute(query).scalars())
            found = removable(conn, set(ordered))
        return [job_id for job_id in ordered if job_id in found]

    def remove_jobs(self, job_ids: Iterable[str]) -> tuple[list[str], set[str]]:
        """Remove these jobs and every row of them, less those a kept job's runs show the
        results of (and their triage's or run jobs); the jobs removed, and the files their
        cases named."""
        wanted = set(job_ids)
        with self._write() as conn:
            # Submissions take this lock too: none stores a run showing a result meanwhile.
            conn.execute(t.admission.update().where(t.admission.c.id == 1)
                         .values(tickets=t.admission.c.tickets + 1))
            gone = sorted(removable(conn, wanted))
            files: set[str] = set()
            for chunk in chunks(gone):
                files |= _files_of(conn, chunk)
                _remove_rows(conn, chunk)
        return gone, files

    def remove_unnamed_blobs(self, digests: Iterable[str], now: float | None = None) -> int:
        """Remove the blobs of these digests that no stored case names and that no
        submission stored or renewed within GRACE_S; how many."""
        before = (time.time() if now is None else now) - GRACE_S
        removed = 0
        for chunk in chunks(sorted(set(digests)), _PATTERNS):
            with self.engine.connect() as conn:  # a scan: no write lock held through it
                unnamed = sorted(set(chunk) - _still_named(conn, chunk))
            if unnamed:
                with self._write() as conn:
                    removed += conn.execute(t.blobs.delete().where(
                        t.blobs.c.sha256.in_(unnamed), t.blobs.c.created_at < before)).rowcount
        return removed

    def referenced(self, digests: Iterable[str]) -> set[str]:
        """Those of `digests` that a row names in one of its `*_ref` columns."""
        found: set[str] = set()
        with self.engine.connect() as conn:
            for chunk in chunks(digests):
                for column in _REFS:
                    found |= set(conn.execute(sa.select(column).distinct()
                                              .where(column.in_(chunk))).scalars())
        return found

    def remove_orphaned_artifacts(self, now: float | None = None) -> int:
        """Delete the artifact files no row names that are older than GRACE_S (a younger one
        may be a write whose row is not committed yet), and dead writes' temporary files."""
        before = (time.time() if now is None else now) - GRACE_S
        self.artifacts.remove_stale_temps(before)
        old = [found.digest for found in self.artifacts.listing() if found.mtime < before]
        named = self.referenced(old)
        return sum(self.artifacts.remove_if_older(digest, before)
                   for digest in old if digest not in named)

    def prune(self, retention_s: float, limit: int = PRUNE_BATCH,
              now: float | None = None) -> Pruned:
        """Remove up to `limit` expired jobs, then the files and artifacts nothing names."""
        expired = self.expired_jobs(retention_s, now)
        gone, files = self.remove_jobs(expired[:limit]) if expired else ([], set())
        blobs = self.remove_unnamed_blobs(files, now)
        return Pruned(len(gone), blobs, self.remove_orphaned_artifacts(now),
                      len(expired) > limit)

    def prune_when_due(self, retention_days: float) -> Pruned | None:
        """`prune` if retention is on and this store's last prune is an hour old (sooner
        when it left expired jobs); None when not due. Each host's recovery sweep calls it."""
        now = time.time()
        if retention_days <= 0 or now < self._pruned_at + PRUNE_EVERY_S:
            return None
        self._pruned_at = now  # a prune that fails is tried again in an hour, not each sweep
        found = self.prune(retention_days * DAY_S)
        if found.more:
            self._pruned_at = now - PRUNE_EVERY_S
        if found.jobs or found.blobs or found.artifacts:
            log.info("retention removed %d jobs, %d files and %d artifacts",
                     found.jobs, found.blobs, found.artifacts)
        return found
