"""Held runs released to the broker: a run is stored waiting and unpublished (`published_at`
null, "held"), and leaves the store for its queue only when its lane has room
(tvmrepro.jobs.release decides the window and the order; the store counts, reads and marks).

One release is one write transaction that takes the admission row's lock first (as
`Store.submit_jobs` does): on PostgreSQL two releasers, or a releaser and a submission, count
and mark one at a time, so a lane never holds more than its window and no run is marked twice;
SQLite serializes every writer anyway. The messages are the caller's to send after the commit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tvmrepro.lifecycle import RunState
from tvmrepro.store import schema as t
from tvmrepro.store.base import StoreBase
from tvmrepro.store.rows import RunRow

Submitter = str | None  # a job's submitter (None: a job stored without one)
Lane = tuple[str, bool]  # (environment id, whether the long lane)
# The order of release: (held runs as (submitter, run id), each submitter's oldest first and
# the submitters by their oldest; runs in flight per submitter; free slots) -> run ids.
Pick = Callable[[Sequence[tuple[Submitter, str]], Mapping[Submitter, int], int], list[str]]


def _long(short_s: int) -> sa.ColumnElement[bool]:
    """Whether a run takes its environment's long lane (the queue's rule: its time limit)."""
    return t.runs.c.timeout_s > short_s


def _in_flight(conn: Connection, envs: list[str],
               short_s: int) -> dict[Lane, dict[Submitter, int]]:
    """Lane -> submitter -> its runs of the lane published and not done (queued or running)."""
    flying = sa.or_(t.runs.c.state == RunState.RUNNING.value,
                    sa.and_(t.runs.c.state == RunState.QUEUED.value,
                            t.runs.c.published_at.is_not(None)))
    long = _long(short_s).label("long")
    query = (sa.select(t.runs.c.environment, long, t.jobs.c.submitter, sa.func.count())
             .join(t.jobs, t.jobs.c.id == t.runs.c.job_id)
             .where(t.runs.c.environment.in_(envs), flying)
             .group_by(t.runs.c.environment, long, t.jobs.c.submitter))
    found: dict[Lane, dict[Submitter, int]] = {}
    for env_id, is_long, submitter, count in conn.execute(query):
        found.setdefault((env_id, bool(is_long)), {})[submitter] = int(count)
    return found


def _held(conn: Connection, envs: list[str], short_s: int,
          most: int) -> dict[Lane, list[tuple[Submitter, str]]]:
    """Lane -> each submitter's `most` oldest held runs of it, oldest first: no more go to one
    submitter in one release, so the rest are never read."""
    oldest_first = (t.runs.c.created_at, t.runs.c.ordinal, t.runs.c.id)
    long = _long(short_s)
    rank = sa.func.row_number().over(
        partition_by=(t.runs.c.environment, long, t.jobs.c.submitter), order_by=oldest_first)
    inner = (sa.select(t.runs.c.environment, long.label("long"), t.jobs.c.submitter,
                       t.runs.c.id, t.runs.c.created_at, t.runs.c.ordinal, rank.label("rank"))
             .join(t.jobs, t.jobs.c.id == t.runs.c.job_id)
             .where(t.runs.c.environment.in_(envs), t.runs.c.state == RunState.QUEUED.value,
                    t.runs.c.published_at.is_(None))).subquery()
    query = (sa.select(inner.c.environment, inner.c.long, inner.c.submitter, inner.c.id)
             .where(inner.c.rank <= most)
             .order_by(inner.c.created_at, inner.c.ordinal, inner.c.id))
    found: dict[Lane, list[tuple[Submitter, str]]] = {}
    for env_id, is_long, submitter, run_id in conn.execute(query):
        found.setdefault((env_id, bool(is_long)), []).append((submitter, run_id))
    return found


class ReleaseRows(StoreBase):
    """The release of held runs (part of `Store`)."""

    def release_held(self, windows: Mapping[str, int], short_s: int, pick: Pick,
                     now: float) -> list[RunRow]:
        """For each lane of these environments (id -> its window: runs in flight at most), the
        held runs `pick` chooses for its free slots, marked published at `now`, in one write
        transaction under the admission lock; those runs, in the order picked (their messages
        are the caller's to send)."""
        envs = sorted(windows)
        if not envs or not self._any_held(envs):
            return []  # no write (the common case, where every run is published at once)
        with self._write() as conn:
            conn.execute(t.admission.update().where(t.admission.c.id == 1)
                         .values(tickets=t.admission.c.tickets + 1))
            flying = _in_flight(conn, envs, short_s)
            free = {(env_id, long): windows[env_id] - sum(flying.get((env_id, long), {}).values())
                    for env_id in envs for long in (False, True)}
            if max(free.values()) <= 0:
                return []
            held = _held(conn, envs, short_s, max(free.values()))
            chosen = [run_id for lane, runs in sorted(held.items()) if free[lane] > 0
                      for run_id in pick(runs, flying.get(lane, {}), free[lane])]
            if not chosen:
                return []
            conn.execute(t.runs.update().where(t.runs.c.id.in_(chosen),
                                               t.runs.c.published_at.is_(None))
                         .values(published_at=now))
            rows = conn.execute(sa.select(t.runs).where(t.runs.c.id.in_(chosen))).mappings()
            found = {row["id"]: RunRow.model_validate(dict(row)) for row in rows}
        return [found[run_id] for run_id in chosen]  # in the order picked: the queue's order

    def _any_held(self, envs: list[str]) -> bool:
        """Whether any run of these environments is held (read outside the write: a run held
        after it is released by its own submission, after that commits)."""
        query = sa.select(t.runs.c.id).where(
            t.runs.c.environment.in_(envs), t.runs.c.state == RunState.QUEUED.value,
            t.runs.c.published_at.is_(None)).limit(1)
        with self.engine.connect() as conn:
            return conn.execute(query).first() is not None

    def published_late(self, run_ids: list[str], marked: float, sent: float) -> None:
        """Move the publication of these runs from `marked` (their release) to `sent`, when
        their messages left, for those still unclaimed (a claimed run keeps a publication
        before its claim: the recovery sweep reads a later one as a republication)."""
        with self._write() as conn:
            conn.execute(t.runs.update().where(
                t.runs.c.id.in_(run_ids), t.runs.c.state == RunState.QUEUED.value,
                t.runs.c.published_at == marked).values(published_at=sent))
