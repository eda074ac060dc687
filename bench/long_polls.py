"""What twelve long-polling clients cost the API while nothing changes: CPU seconds a minute.

A fresh store (SQLite in a temporary home) holds a run job of --runs runs, all running (none
ends: its view never changes). In one process, the API's side of the service (JobService) is
followed by --clients clients at once, each asking `GET /api/v1/jobs/<id>?wait=30` from the
job's ETag again as soon as it is answered (as `tvmrepro wait` and the job page do), for
--seconds; the process's CPU time over that window is the API's (the clients only wait). Three
ways, in turn, in one run:

  watcher   the API's own: one watcher reads the waited job's revision every 20 ms (the embedded
            broker: no notices), whatever the number of clients
  redis     the same with Redis notices (--redis): the revision is read once a second
  stamp     before: each waiting request read the job's stamp (every run of the job, and its
            comparisons', bisection's and narrowing's rows) every 20 ms, simulated here by a
            JobWaits whose wait does that

    .venv/bin/python bench/long_polls.py [--runs 500] [--clients 12] [--seconds 30]
    .venv/bin/python bench/long_polls.py --redis redis://127.0.0.1:6379/14
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from service.jobs import JobService  # noqa: E402
from service.waiting import STOPPING, WAIT_TICK_S, JobWaits, Shown, Watch  # noqa: E402
from tvmrepro.lifecycle import RunState  # noqa: E402
from tvmrepro.queue import make_celery  # noqa: E402
from tvmrepro.settings import Settings  # noqa: E402
from tvmrepro.store import Store, open_store  # noqa: E402
from tvmrepro.store import schema as t  # noqa: E402
from tvmrepro.store.rows import JobRow, RunRow  # noqa: E402

ENV = "tvm-0.27.0.post1-cpu"
WAIT_S = 30


def stored_job(store: Store, runs: int) -> str:
    """A run job of `runs` running runs; its id."""
    job_id, now = uuid.uuid4().hex, time.time()
    variants = [f"v{n}" for n in range(runs)]
    store.submit(JobRow(id=job_id, kind="run", title="bench", case={"source": "print(1)\n"},
                        environments=[ENV], variants=variants, created_at=now),
                 [RunRow(id=uuid.uuid4().hex, job_id=job_id, ordinal=n, variant=variant,
                         environment=ENV, state=RunState.RUNNING, cache_key=uuid.uuid4().hex,
                         timeout_s=120, deliveries=1, claimed_by="bench:1:1.00",
                         claimed_at=now, created_at=now)
                  for n, variant in enumerate(variants)], cap=10 * runs)
    return job_id


def stamp(store: Store, job_id: str) -> tuple[Any, ...]:
    """What each waiting request read every 20 ms before: every run's state and times, and the
    job's comparisons', bisection's and narrowing's rows."""
    runs = t.runs.c
    with store.engine.connect() as conn:
        found: list[Any] = [tuple(tuple(r) for r in conn.execute(
            sa.select(runs.state, runs.deliveries, runs.claimed_at, runs.finished_at,
                      runs.result_id).where(runs.job_id == job_id).order_by(runs.ordinal)))]
        for columns in ((t.comparisons.c.runs, t.comparisons.c.created_at),
                        (t.bisections.c.seen, t.bisections.c.updated_at),
                        (t.narrowings.c.updated_at,)):
            found.append(conn.execute(sa.select(*columns).where(
                columns[0].table.c.job_id == job_id)).first())
    return tuple(found)


class StampLoopWaits(JobWaits):
    """The wait as it was: a loop per waiting request, reading the job's stamp every tick."""

    store: Store

    def _waited(self, job_id: str, seen: str, watch: Watch, now: Shown, wait_s: float,
                every_s: float) -> Shown | None:
        first, deadline = stamp(self.store, job_id), time.monotonic() + wait_s
        while not STOPPING.wait(WAIT_TICK_S) and time.monotonic() < deadline:
            if stamp(self.store, job_id) != first:
                return self._shown(job_id)
        return now


def follow(service: JobService, job_id: str, until: float) -> None:
    """One client: long-polls from the job's ETag, again and again, until `until`."""
    etag = service.waits.view_after(job_id, None, 0).etag  # type: ignore[union-attr]
    while time.monotonic() < until:
        service.waits.view_after(job_id, etag, min(WAIT_S, max(0.0, until - time.monotonic())))


def cpu_per_minute(service: JobService, job_id: str, clients: int, seconds: float) -> float:
    """The process's CPU seconds a minute while `clients` follow the unchanging job."""
    until = time.monotonic() + seconds
    threads = [threading.Thread(target=follow, args=(service, job_id, until))
               for _ in range(clients)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # every client in its wait
    started_cpu, started = time.process_time(), time.monotonic()
    for thread in threads:
        thread.join()
    return (time.process_time() - started_cpu) / (time.monotonic() - started) * 60


def service_of(args: argparse.Namespace, redis: bool, before: bool) -> JobService:
    given = {"TVMREPRO_HOME": tempfile.mkdtemp(prefix="tvmrepro-bench-polls-"),
             "TVMREPRO_API_THREADS": str(2 * args.clients + 2)}
    given.update({"REDIS_URL": args.redis, "TVMREPRO_REDIS_PREFIX": f"bench-{uuid.uuid4().hex[:8]}:"}
                 if redis else {})
    settings = Settings.from_env(given)
    service = JobService(settings, open_store(settings.store_url), make_celery(settings))
    if before:
        waits = StampLoopWaits(service.job, service.waits.ended_of, service.waits.watcher,
                               settings.api_threads)
        waits.store, service.waits = service.store, waits
    return service


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--redis", help="a Redis URL: also measure the path with notices")
    args = parser.parse_args()
    ways = [("watcher", False, False)] + ([("redis", True, False)] if args.redis else [])
    found: dict[str, float] = {}
    for name, redis, before in [*ways, ("stamp", False, True)]:
        service = service_of(args, redis, before)
        found[name] = cpu_per_minute(service, stored_job(service.store, args.runs), args.clients,
                                     args.seconds)
        service.store.dispose()
        print(f"{name}: {found[name]:.2f} CPU s a minute", flush=True)
    print(f"{args.clients} clients long-polling a job of {args.runs} runs, {args.seconds:g} s "
          "each: " + ", ".join(f"{name} {cpu:.2f} CPU s/min ({cpu / found['stamp']:.3f}x stamp)"
                               for name, cpu in found.items()))


if __name__ == "__main__":
    main()
