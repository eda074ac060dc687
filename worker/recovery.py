"""The recovery sweep, in each worker's main process: nothing the broker loses stays lost.

Every `reconcile_interval_s` the sweep records a heartbeat for the worker and
looks, in the job store, at the unfinished runs of the environments it serves:
- a waiting run whose queue is empty on the broker in two sweeps running (a
  Redis restarted without persistence; one sweep could fall between a message's
  delivery and its claim), or that has waited `requeue_after_s` since it was
  published;
- a running run whose claimer is provably dead (a process of this host that is
  gone; after HANDBACK_S, since Celery hands back the message of a pool process
  that died by itself), of another host that has no live worker any more (none
  of its workers heartbeat within `worker_stale_s`: the lease), or silent past its
  own time limit plus `claim_grace_s`, unless it was published again since it was
  claimed.
Those are published again; a held run (stored, not yet released: tvmrepro.jobs.release) is
never lost, and each sweep releases what its environments' lanes have room for. A duplicate
message is harmless: the task claims the run in the store first and drops it when it is done
or held by a live process.
Every sweep also ends the runs of any environment that have waited longer than
`wait_expiry_s` (tvmrepro.expiry; their messages dropped from their queues), and has what a
finisher that died left undone settled: the comparisons of a job whose last run it stored
(tvmrepro.jobs.settling), the step of a bisection that has finished runs it never saw
(tvmrepro.jobs.bisect.steps). The sweep runs in the worker's main process, on the thread that
heartbeats: it only publishes those (queue.SETTLE_TASK, once per job and REASK_S) for a pool
process to take, and never takes a step or diffs IR itself. A read of a job never does these.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import Celery, bootsteps

from tvmrepro.expiry import expire_waiting
from tvmrepro.jobs.release import release
from tvmrepro.lifecycle import RunState
from tvmrepro.liveness import claimer_gone, host_lost, process_token
from tvmrepro.queue import (
    WORKER_LOST_WAIT_S,
    drop_finished_unacked,
    drop_waiting_messages,
    publish_run,
    publish_settle,
    queue_length,
    queue_names,
)
from tvmrepro.settings import Settings
from tvmrepro.store import Store
from tvmrepro.store.notices import notices_for
from tvmrepro.store.rows import RunRow

log = logging.getLogger(__name__)
SETTLE_S = 2.0  # a message this young may be on its way to a worker: not yet missing
# A run whose pool process died is handed back by Celery itself within WORKER_LOST_WAIT_S;
# the sweep steps in only when that did not happen (the whole worker died).
HANDBACK_S = WORKER_LOST_WAIT_S + 8.0
REASK_S = 600.0  # a job's settling published and not done since: published again
# A run stored this recently may have its finisher still settling its job: not yet left undone.
# Far past what a finisher's step may take (its patterns and diffs are time-bounded: the
# bisection's SUSPECTS_BUDGET_S, comparisons.JOB_BUDGET_S), so a slow step is never taken twice.
FINISHER_GRACE_S = 120.0


def record_heartbeat(app: Celery, store: Store, environments: list[str]) -> None:
    """This worker is alive and serves `environments` (and builds what its builds say)."""
    builds = app.conf.get("tvmrepro_builds")  # worker.environments.building: images being made
    store.heartbeat(process_token(), environments, builds.steps() if builds is not None else None,
                    app.conf.get("tvmrepro_concurrency"))  # its slots size the release window


class Sweeper:
    """Heartbeat and republishing of lost runs for one worker."""

    def __init__(self, app: Celery, settings: Settings, environments: list[str]) -> None:
        # `environments` is the worker's own list: it grows when the worker serves an
        # environment provisioned after it started (worker.environments.following).
        self.app, self.settings, self.environments = app, settings, environments
        self.worker_id = process_token()
        self.gone_since: dict[str, float] = {}  # "run/claimer" -> when it was first seen dead
        self.unqueued: set[str] = set()  # waiting runs the last sweep found no message for
        self.settled_until = 0.0  # jobs finished before it were settled by an earlier sweep
        self.asked: dict[str, float] = {}  # job -> when its settling was last published
        # No pool: the main process forks pool processes, which must inherit no connection.
        self.store = Store(settings.store_url, pooled=False, artifacts=settings.artifacts_dir,
                           notices=notices_for(settings.redis_url, settings.redis_prefix))

    def _waiting_lost(self, row: RunRow, empty: set[str], now: float,
                      unqueued: set[str]) -> bool:
        if row.published_at is None:
            return False  # held: it has no message yet, and is released, not republished
        published = row.published_at
        if published > now - SETTLE_S:
            return False
        if row.environment in empty:
            unqueued.add(row.id)
            if row.id in self.unqueued:
                return True
        return published < now - self.settings.requeue_after_s

    def _running_lost(self, row: RunRow, now: float, live_hosts: set[str]) -> bool:
        published, claimed = row.published_at or 0.0, row.claimed_at or 0.0
        if published > claimed and published > now - self.settings.requeue_after_s:
            return False  # already published again since it was claimed
        if claimed + row.timeout_s + self.settings.claim_grace_s < now:
            return True  # silent past its own time limit: its host is lost
        if host_lost(row.claimed_by or "", live_hosts):
            return True  # no worker of its host heartbeats: the host is dead or cut off
        if not claimer_gone(row.claimed_by or ""):
            return False
        first_seen = self.gone_since.setdefault(f"{row.id}/{row.claimed_by}", now)
        return first_seen < now - HANDBACK_S

    def lost_runs(self) -> list[RunRow]:
        """Every run to publish again."""
        now = time.time()
        rows = self.store.unfinished(self.environments)
        claims = {f"{r.id}/{r.claimed_by}" for r in rows if r.state == RunState.RUNNING}
        self.gone_since = {k: v for k, v in self.gone_since.items() if k in claims}
        waiting_envs = {r.environment for r in rows if r.state == RunState.QUEUED}
        empty = {env for env in waiting_envs if queue_length(self.app, env) == 0}
        # Read once per sweep, and only when some run is held (then it is needed).
        live_hosts = self.store.live_hosts(self.settings.worker_stale_s) if claims else set()
        lost: list[RunRow] = []
        unqueued: set[str] = set()
        for row in rows:
            waiting, running = row.state == RunState.QUEUED, row.state == RunState.RUNNING
            if ((waiting and self._waiting_lost(row, empty, now, unqueued))
                    or (running and self._running_lost(row, now, live_hosts))):
                lost.append(row)
        self.unqueued = unqueued - {row.id for row in lost}
        return lost

    def ask_settle(self, job_ids: list[str]) -> None:
        """Publish the settling of these jobs for a pool process (worker.tasks.settle), each
        at most once per REASK_S (a lost message is asked again then)."""
        now = time.time()
        self.asked = {job: at for job, at in self.asked.items() if at > now - REASK_S}
        for job_id in dict.fromkeys(job_ids):
            if job_id not in self.asked:
                publish_settle(self.app, job_id)
                self.asked[job_id] = now

    def settle_left(self) -> None:
        """Have what finishers that died left settled: comparisons of jobs finished since the
        last sweep, and bisection steps never taken (their next probes published)."""
        until = time.time() - FINISHER_GRACE_S
        unsettled = self.store.unsettled_jobs(self.settled_until, until)
        self.ask_settle(unsettled + self.store.stalled_bisections(until))
        self.settled_until = until

    def expire(self) -> None:
        """End the runs that waited too long, drop their messages and have their jobs settled
        (by a pool process: this thread heartbeats)."""
        ended = expire_waiting(self.store, self.settings.wait_expiry_s, settle_jobs=False)
        if ended:
            drop_waiting_messages(self.app, ended)
            self.ask_settle([run.job_id for run in ended])

    def tick(self) -> None:
        """One sweep; a failure is logged and the next tick tries again."""
        try:
            record_heartbeat(self.app, self.store, self.environments)
            self.expire()  # never published again
            lost = self.lost_runs()
            for row in lost:  # in the lane of its time limit, as when it was submitted
                publish_run(self.app, row.id, row.environment, row.timeout_s)
            self.store.mark_published([row.id for row in lost], time.time())
            if lost:
                log.warning("published %d lost runs again: %s", len(lost),
                            ", ".join(row.id for row in lost))
            # Messages a dead worker (or a lost acknowledgement) left unacknowledged.
            drop_finished_unacked(self.app, {q for e in self.environments for q in queue_names(e)},
                                  lambda: {r.id for r in self.store.unfinished(self.environments)})
            self.settle_left()
            # Held runs into the slots free in its lanes (a releaser that died left them held).
            release(self.store, self.app, self.environments, self.settings)
            # Old jobs and their artifacts go (at most hourly: tvmrepro.store.retention).
            self.store.prune_when_due(self.settings.retention_days)
        except Exception:
            log.exception("recovery sweep failed; trying again in %.0f s",
                          self.settings.reconcile_interval_s)

    def stop(self) -> None:
        """The worker stops cleanly: it no longer serves anything."""
        try:
            self.store.forget_worker(self.worker_id)
        except Exception:
            log.exception("could not deregister worker %s", self.worker_id)


class Recovery(bootsteps.StartStopStep):
    """Runs the Sweeper on the worker's timer."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.sweeper: Sweeper | None = None
        self.tref: Any = None

    def start(self, parent: Any) -> None:
        """Sweep now, then every reconcile interval."""
        conf = parent.app.conf
        self.sweeper = Sweeper(parent.app, conf.tvmrepro_settings, conf.tvmrepro_environments)
        self.sweeper.tick()
        self.tref = parent.timer.call_repeatedly(conf.tvmrepro_settings.reconcile_interval_s,
                                                 self.sweeper.tick)

    def stop(self, parent: Any) -> None:
        """Stop sweeping and deregister."""
        if self.tref is not None:
            self.tref.cancel()
        if self.sweeper is not None:
            self.sweeper.stop()
