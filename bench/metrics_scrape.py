"""What one GET /metrics costs on a large store: the collector's reads, timed.

A fresh store (SQLite in a temporary home, or the PostgreSQL database that --database names,
its tables dropped after) is filled with --runs finished runs in jobs of ten, their rows written
directly as a worker would store them (no case is run: the figure is the scrape's, not the
runs'), finished over the last seven days (so about 1/168 of them within the histograms' hour),
half `ok` and half `error`. The database's statistics are then made (ANALYZE; on PostgreSQL
VACUUM ANALYZE, as its autovacuum would), and the collector of service/metrics.py is run
--repeat times, each whole scrape timed; with --redis, its broker part reads that Redis too.

    .venv/bin/python bench/metrics_scrape.py [--runs 200000] [--repeat 5]
    .venv/bin/python bench/metrics_scrape.py --database postgresql://... --redis redis://...
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from service.jobs import JobService  # noqa: E402
from service.metrics import ServiceCollector  # noqa: E402
from tvmrepro.queue import make_celery  # noqa: E402
from tvmrepro.settings import Settings  # noqa: E402
from tvmrepro.store import Store, open_store  # noqa: E402
from tvmrepro.store import schema as t  # noqa: E402

ENV = "tvm-0.27.0.post1-cpu"
SPREAD_S = 7 * 86400.0
BATCH = 5000


def rows(count: int, now: float) -> dict[sa.Table, list[dict[str, Any]]]:
    """Jobs, runs and results of `count` finished runs, ten to a job."""
    found: dict[sa.Table, list[dict[str, Any]]] = {t.jobs: [], t.runs: [], t.results: []}
    for _ in range(max(1, count // 10)):
        job = uuid.uuid4().hex
        found[t.jobs].append({"id": job, "kind": "run", "title": "", "case": {}, "environments": [ENV],
                              "variants": [], "bypass_cache": False, "created_at": now - SPREAD_S})
        for ordinal in range(10):
            run, finished = uuid.uuid4().hex, now - random.uniform(0, SPREAD_S)
            found[t.runs].append({
                "id": run, "job_id": job, "ordinal": ordinal, "variant": "script",
                "environment": ENV, "state": "done", "cache_key": run, "cached": False,
                "result_id": run, "timeout_s": 120, "deliveries": 1, "claimed_by": "bench:1",
                "claimed_at": finished - 3, "published_at": finished - 5,
                "created_at": finished - 5, "finished_at": finished})
            found[t.results].append({"run_id": run, "status": random.choice(["ok", "error"]),
                                     "stage": "script", "signature": None, "data": {},
                                     "created_at": finished})
    return found


def fill(store: Store, count: int) -> None:
    """Write the rows, then make the database's statistics."""
    with store.write() as conn:
        for table, found in rows(count, time.time()).items():
            for start in range(0, len(found), BATCH):
                conn.execute(table.insert(), found[start:start + BATCH])
    with store.engine.connect() as conn:
        autocommit = conn.execution_options(isolation_level="AUTOCOMMIT")
        autocommit.exec_driver_sql("VACUUM ANALYZE" if conn.dialect.name == "postgresql"
                                   else "ANALYZE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--database", help="a PostgreSQL URL (default: SQLite in a temporary home)")
    parser.add_argument("--redis", help="a Redis URL (default: the embedded broker)")
    args = parser.parse_args()
    given = {"TVMREPRO_HOME": tempfile.mkdtemp(prefix="tvmrepro-bench-metrics-")}
    given.update({"DATABASE_URL": args.database} if args.database else {})
    given.update({"REDIS_URL": args.redis} if args.redis else {})
    settings = Settings.from_env(given)
    store = open_store(settings.store_url)
    try:
        started = time.monotonic()
        fill(store, args.runs)
        print(f"{args.runs} runs stored in {time.monotonic() - started:.1f} s")
        collector = ServiceCollector(JobService(settings, store, make_celery(settings)))
        took = []
        for _ in range(args.repeat):
            started = time.monotonic()
            families = list(collector.collect())
            took.append(time.monotonic() - started)
        print(f"{len(families)} families; a scrape: median {statistics.median(took):.3f} s, "
              f"first {took[0]:.3f} s, max {max(took):.3f} s ({store.engine.dialect.name}, "
              f"{'Redis' if args.redis else 'embedded broker'})")
    finally:
        if args.database:
            store.drop_schema()
        store.dispose()


if __name__ == "__main__":
    main()
