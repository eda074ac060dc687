"""Jobs of many runs through the service, against one bare cold run of the founding case.

Side by side, interleaved so that drift hits all alike:
- bare: one cold `python repro.py` in the newest CPU environment (bench/service_vs_bare.py);
- matrix: the job a report asks for, both variants on the three default releases (the newest
  of each minor: six runs, the cache bypassed), submitted over HTTP to an API and one worker
  on Redis serving the three at its default concurrency; timed from submit to the last run's
  result stored;
- reduce: a reduce job of the founding case (`fusetir-once` on the newest release) on the same
  service, timed from submit to the job read done; its answer is checked to be the known one.
Then where a matrix's time goes, stage by stage, read from the store's own times of each run
(created, published, claimed, stored) and the sandbox's (`seconds`: from the hand-over to its
end, and the harness's own part of it: parse, passes, build, VM), medians over the samples:
the POST, the publish, the wait for a slot, the sandbox, the worker's own part around the
sandbox (claim, events, storing), and from the last result stored to the client's poll seeing
the job done. Each ratio is printed beside its floor (bench/floor.py).
Before each measure the bench waits until the service's processes are idle (the sandboxes that
replace the ones a job took have imported TVM).

    .venv/bin/python bench/service_many_runs.py [--repeat 3] [--budget-s 600]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import redis

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.floor import TreeCpu  # noqa: E402
from bench.local_many_runs import checked_reduction  # noqa: E402
from bench.service_vs_bare import (  # noqa: E402
    BENCH_REDIS_URL,
    CASE,
    TABLE_HEADER,
    Service,
    bare_script,
    finished,
    stored_at,
    summary,
    time_bare,
)
from tvmrepro.environments import default_catalog  # noqa: E402
from tvmrepro.settings import Settings  # noqa: E402
from tvmrepro.store import Store  # noqa: E402
from worker.environments.provision import env_python, provision  # noqa: E402

VARIANT = "fusetir-once"


def time_matrix(service: Service, case: dict[str, Any], env_ids: list[str],
                stages: dict[str, list[float]] | None = None) -> float:
    """Seconds from submit to the matrix's last result stored (`stages`: each stage's seconds
    appended, see stage_times)."""
    submitted = time.time()
    job = service.http.post("/api/v1/jobs", json={"case": case, "environments": env_ids,
                                                  "bypass_cache": True}).json()
    posted = time.time()
    done = finished(service.http, job["id"])
    seen = time.time()
    statuses = {run["result"]["status"] for run in done["runs"]}
    if len(done["runs"]) != 2 * len(env_ids) or "infra_error" in statuses:
        raise SystemExit(f"the matrix did not run as asked: {json.dumps(done)[:2000]}")
    if stages is not None:
        for stage, seconds in stage_times(service, job["id"], submitted, posted, seen).items():
            stages.setdefault(stage, []).append(seconds)
    return max(stored_at(run) for run in done["runs"]) - submitted


def stage_times(service: Service, job_id: str, submitted: float, posted: float,
                seen: float) -> dict[str, float]:
    """Where one matrix's time went: the job's own steps, and each run's stages summed over its
    runs (they overlap: two at once), from the store's times and the sandbox's."""
    store = Store(f"sqlite:///{service.home / 'tvmrepro.sqlite'}")
    try:
        job = store.job(job_id)
        assert job is not None
        runs = job.runs
        seconds = [(run.result or {}).get("seconds", {}) for run in runs]
        sandbox = {run.id: float(said.get("total", 0.0))
                   for run, said in zip(runs, seconds, strict=True)}
        harness = sum(float(said.get("harness", 0.0)) for said in seconds)
    finally:
        store.dispose()
    first_published = min(run.published_at or run.created_at for run in runs)
    last_stored = max(run.finished_at or 0.0 for run in runs)
    return {
        "job: POST answered": posted - submitted,
        "job: submit to first publish": first_published - submitted,
        "job: last stored to poll done": seen - last_stored,
        "runs: waiting for a slot": sum((r.claimed_at or 0) - (r.published_at or 0)
                                        for r in runs),
        "runs: in the sandbox": sum(sandbox.values()),
        "runs: of which in the harness": harness,
        "runs: worker around it": sum((r.finished_at or 0) - (r.claimed_at or 0) - sandbox[r.id]
                                      for r in runs),
    }


def time_reduce(service: Service, case: dict[str, Any], env_id: str, budget_s: int) -> float:
    """Seconds from submit to the reduce job read done (its answer checked)."""
    started = time.monotonic()
    job = service.http.post("/api/v1/jobs", json={
        "kind": "reduce", "case": case, "environments": [env_id], "variant": VARIANT,
        "budget_s": budget_s}).json()
    done = finished(service.http, job["id"])
    elapsed = time.monotonic() - started
    if done["status"] != "done" or done["reduce"]["state"] != "done":
        raise SystemExit(f"the reduce job failed: {json.dumps(done)[:2000]}")
    checked_reduction(done["reduce"])
    return elapsed


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--budget-s", type=int, default=600)
    args = parser.parse_args()
    settings = Settings.from_env()
    envs = default_catalog().spanning("cpu")
    for env in envs:
        provision(settings, env)
    newest = envs[-1]
    case = json.loads(CASE.read_text())
    script = bare_script(settings, newest.id, case, VARIANT, Path(tempfile.mkdtemp()))
    prefix = f"tvmrepro-bench-{uuid.uuid4().hex[:12]}:"  # a shared Redis is never flushed
    service = Service("many", settings.envs_dir, newest.id, BENCH_REDIS_URL, prefix,
                      concurrency=2, more_envs=tuple(e.id for e in envs[:-1]))
    env_ids = [e.id for e in envs]
    samples: dict[str, list[float]] = {"bare": [], "matrix": [], "reduce": []}
    cpu: dict[str, list[float]] = {name: [] for name in samples}  # for each ratio's floor
    stages: dict[str, list[float]] = {}
    try:
        time_matrix(service, case, env_ids)  # warm-up: cold caches after the start
        for _ in range(args.repeat):
            service.settle()
            with TreeCpu() as used:
                samples["bare"].append(time_bare(env_python(settings, newest), script))
            cpu["bare"].append(used.seconds)
            service.settle()
            with TreeCpu() as used:
                samples["matrix"].append(time_matrix(service, case, env_ids, stages))
            cpu["matrix"].append(used.seconds)
            service.settle()
            with TreeCpu() as used:
                samples["reduce"].append(time_reduce(service, case, newest.id, args.budget_s))
            cpu["reduce"].append(used.seconds)
    finally:
        service.stop()
        bench_redis = redis.Redis.from_url(BENCH_REDIS_URL)
        for key in bench_redis.scan_iter(match=f"{prefix}*"):
            bench_redis.delete(key)
    bare = statistics.median(samples["bare"])
    print(f"founding case, {args.repeat} samples each (medians); a worker on Redis serving "
          f"{', '.join(env_ids)} at concurrency 2")
    print(TABLE_HEADER)
    print(summary("bare cold python", samples["bare"], bare, cpu["bare"]))
    print(summary("matrix: 6 runs, 3 releases", samples["matrix"], bare, cpu["matrix"]))
    print(summary(f"reduce job ({VARIANT})", samples["reduce"], bare, cpu["reduce"]))
    print(f"where a matrix's {statistics.median(samples['matrix']):.2f} s went (medians; the runs' "
          f"stages are summed over its six runs, two at a time):")
    for stage, seconds in stages.items():
        print(f"  {stage:<34} {statistics.median(seconds):7.3f} s")


if __name__ == "__main__":
    main()
