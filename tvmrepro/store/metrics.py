"""What the store says of the service as a whole, for GET /metrics: aggregate reads only.

Each read is one aggregate query whose cost is bounded by something other than the store's age
where it can be: the unfinished runs (at most the queue's cap per environment, through the
runs' state index), the runs finished within a recent window (through the finished_at index),
the workers' rows. The totals by status count every result (from the status index alone), the
files' sizes are summed over their rows, and the store's size asks the database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tvmrepro.lifecycle import RunState
from tvmrepro.store import schema as t
from tvmrepro.store.base import StoreBase

SHORT, LONG = "short", "long"  # the two lanes of an environment's queue (tvmrepro.queue)


@dataclass(frozen=True)
class Timings:
    """Runs of one environment that a worker ran and that finished within the window: how many
    took at most each bound (cumulative, as a histogram's buckets), their count and sum."""

    buckets: tuple[int, ...]
    count: int
    total_s: float


@dataclass(frozen=True)
class RecentTimings:
    """Environment id -> Timings, for the queue wait and for the run's own duration."""

    wait: dict[str, Timings] = field(default_factory=dict)
    duration: dict[str, Timings] = field(default_factory=dict)


def unfinished_counts(store: StoreBase, short_run_s: int) -> dict[tuple[str, str, str], int]:
    """(environment, lane, state) -> how many runs are queued or running there; a run's lane is
    the long one when its time limit passes `short_run_s`, as the queue chooses it."""
    runs = t.runs.c
    lane = sa.case((runs.timeout_s > short_run_s, LONG), else_=SHORT).label("lane")
    query = (sa.select(runs.environment, lane, runs.state, sa.func.count())
             .where(runs.state.in_([RunState.QUEUED.value, RunState.RUNNING.value]))
             .group_by(runs.environment, lane, runs.state))
    with store.engine.connect() as conn:
        return {(env, str(lane_of), state): int(n) for env, lane_of, state, n in conn.execute(query)}


def status_totals(store: StoreBase) -> dict[str, int]:
    """Result status -> how many runs ended with a result of their own (ran, or were ended by
    the service: cancelled, expired); runs served from the cache are not counted again.
    Counted from the results' status index."""
    query = sa.select(t.results.c.status, sa.func.count()).group_by(t.results.c.status)
    with store.engine.connect() as conn:
        return {status: int(n) for status, n in conn.execute(query)}


def _timings(conn: Connection, seconds: sa.ColumnElement[float], since: float,
             bounds: Sequence[float]) -> dict[str, Timings]:
    """Timings of `seconds` per environment, over the runs a worker ran (claimed, its own
    result) that finished since `since`."""
    runs = t.runs.c
    counts = [sa.func.sum(sa.case((seconds <= bound, 1), else_=0)) for bound in bounds]
    # finished_at is set only with the result: no condition on the state, whose index would
    # lead the database through every finished run instead of the window's.
    query = (sa.select(runs.environment, sa.func.count(), sa.func.sum(seconds), *counts)
             .where(runs.finished_at >= since, runs.claimed_at.is_not(None),
                    runs.result_id == runs.id)
             .group_by(runs.environment))
    return {env: Timings(tuple(int(n or 0) for n in below), int(count), float(total or 0.0))
            for env, count, total, *below in conn.execute(query)}


def recent_timings(store: StoreBase, since: float, wait_bounds: Sequence[float],
                   duration_bounds: Sequence[float]) -> RecentTimings:
    """The queue wait (created to last claimed) and duration (last claimed to finished) of the
    runs a worker ran that finished since `since`, per environment."""
    runs = t.runs.c
    with store.engine.connect() as conn:
        return RecentTimings(
            wait=_timings(conn, runs.claimed_at - runs.created_at, since, wait_bounds),
            duration=_timings(conn, runs.finished_at - runs.claimed_at, since, duration_bounds))


def live_workers(store: StoreBase, since: float) -> tuple[int, dict[str, int]]:
    """How many workers heartbeat since `since`, and environment id -> how many serve it."""
    query = sa.select(t.workers.c.environments).where(t.workers.c.heartbeat_at >= since)
    with store.engine.connect() as conn:
        served = list(conn.execute(query).scalars())
    by_env: dict[str, int] = {}
    for environments in served:
        for env_id in environments:
            by_env[env_id] = by_env.get(env_id, 0) + 1
    return len(served), by_env


def database_bytes(store: StoreBase) -> int:
    """What the store's database takes on disk, as the database counts it (PostgreSQL: the
    whole database's size; SQLite: its pages, the write-ahead log not counted)."""
    with store.engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            return int(conn.execute(sa.text("SELECT pg_database_size(current_database())"))
                       .scalar_one())
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar_one()
        size = conn.exec_driver_sql("PRAGMA page_size").scalar_one()
        return int(pages) * int(size)


def blob_bytes(store: StoreBase) -> tuple[int, int]:
    """How many distinct files cases carried are stored, and their bytes."""
    query = sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(t.blobs.c.size), 0))
    with store.engine.connect() as conn:
        count, total = conn.execute(query).one()
    return int(count), int(total)
