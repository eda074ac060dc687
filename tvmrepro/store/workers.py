"""The worker registry of the job store: heartbeats, the environments live workers serve or
build, and the fingerprints of served environments' TVM."""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from tvmrepro.store import schema as t
from tvmrepro.store.base import StoreBase


class WorkerRegistry(StoreBase):
    """The workers table and the fingerprints table (part of `Store`)."""

    def heartbeat(self, worker: str, environments: list[str],
                  building: dict[str, str] | None = None, concurrency: int | None = None) -> None:
        """Record that `worker` is alive and serves `environments`; `building`: those of them
        whose images it is still building, each with the build's current step; `concurrency`:
        how many runs it takes at once (None: unknown, counted as one)."""
        now = time.time()
        values = {"environments": environments, "heartbeat_at": now, "building": building or None,
                  "concurrency": concurrency}
        with self._write() as conn:
            done = conn.execute(t.workers.update().where(t.workers.c.id == worker).values(values))
            if done.rowcount == 0:
                conn.execute(t.workers.insert().values(id=worker, started_at=now, **values))

    def forget_worker(self, worker: str) -> None:
        """Remove a worker that stopped cleanly."""
        with self._write() as conn:
            conn.execute(t.workers.delete().where(t.workers.c.id == worker))

    def live_environments(self, stale_s: float) -> dict[str, int]:
        """Environment id -> how many live workers serve it."""
        since = time.time() - stale_s
        query = sa.select(t.workers.c.environments).where(t.workers.c.heartbeat_at >= since)
        counts: dict[str, int] = {}
        with self.engine.connect() as conn:
            for served in conn.execute(query).scalars():
                for env_id in served:
                    counts[env_id] = counts.get(env_id, 0) + 1
        return counts

    def live_hosts(self, stale_s: float) -> set[str]:
        """The hosts with a worker that heartbeat within `stale_s` (a worker's id is its main
        process's token, "<host>:<pid>:<create time>"): a run claimed on any other host is
        free to take over."""
        since = time.time() - stale_s
        query = sa.select(t.workers.c.id).where(t.workers.c.heartbeat_at >= since)
        with self.engine.connect() as conn:
            return {worker.partition(":")[0] for worker in conn.execute(query).scalars()}

    def live_slots(self, stale_s: float) -> dict[str, int]:
        """Environment id -> how many runs its live workers take at once, in all (a worker
        that recorded no concurrency counts as one)."""
        since = time.time() - stale_s
        query = sa.select(t.workers.c.environments, t.workers.c.concurrency).where(
            t.workers.c.heartbeat_at >= since)
        slots: dict[str, int] = {}
        with self.engine.connect() as conn:
            for served, concurrency in conn.execute(query):
                for env_id in served:
                    slots[env_id] = slots.get(env_id, 0) + (concurrency or 1)
        return slots

    def building_environments(self, stale_s: float) -> dict[str, str]:
        """Environment id -> the current step of its image's build, by a live worker."""
        since = time.time() - stale_s
        query = sa.select(t.workers.c.building).where(t.workers.c.heartbeat_at >= since,
                                                      t.workers.c.building.is_not(None))
        steps: dict[str, str] = {}
        with self.engine.connect() as conn:
            for building in conn.execute(query).scalars():
                steps.update(building or {})
        return steps

    def save_fingerprint(self, environment: str, data: dict[str, Any]) -> None:
        """Record what a served environment's TVM has."""
        with self._write() as conn:
            conn.execute(t.fingerprints.delete().where(t.fingerprints.c.environment == environment))
            conn.execute(t.fingerprints.insert().values(environment=environment, data=data,
                                                        updated_at=time.time()))

    def fingerprints(self) -> dict[str, dict[str, Any]]:
        """Environment id -> fingerprint, for every environment a worker has served."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(t.fingerprints.c.environment, t.fingerprints.c.data))
            return {env_id: data for env_id, data in rows}
