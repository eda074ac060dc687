"""A full bisection over every CPU release through the service, against one bare run of the case.

Side by side, interleaved so that drift hits both alike:
- bare: one cold `python repro.py` in the newest CPU environment (as bench/bisect_vs_bare.py);
- service: a bisect job (strategy all, oracle signature, the cache bypassed) submitted over
  HTTP to an API and one real worker on Redis serving every CPU environment, at its default
  concurrency; timed from submit to the last probe's result stored. Each job starts on a warm
  worker: warm-up jobs run until every probe of one took a warm sandbox (each pool process then
  keeps one per environment), and before each measure the bench waits until the worker's
  processes are idle (their replacement sandboxes have imported TVM).
Each ratio is printed beside its floor (bench/floor.py). Also prints how many probes were warm,
the probes' time in their sandboxes, and the memory (PSS) the idle warm sandboxes hold, per pool
process.

    .venv/bin/python bench/bisect_service.py [--repeat 3] [--variant NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
import redis

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bisect_vs_bare import cpu_bench  # noqa: E402
from bench.floor import TreeCpu  # noqa: E402
from bench.service_vs_bare import (  # noqa: E402
    BENCH_REDIS_URL,
    POLL_S,
    TABLE_HEADER,
    Service,
    stored_at,
    summary,
    time_bare,
)
from worker.environments.provision import env_python  # noqa: E402

WARM_UP_MAX = 6  # bisections at most before every probe of one is warm
WARM_WAIT_S = 600.0  # for every pool process to have a sandbox per environment
MIB = 1024 * 1024


def time_bisect(service: Service, case: dict[str, Any], envs: list[str],
                variant: str) -> dict[str, Any]:
    """One bisect job: seconds from submit to its last result stored, warm probes, sandbox time."""
    body = {"kind": "bisect", "case": case, "environments": envs, "variant": variant,
            "oracle": "signature", "bypass_cache": True}
    submitted = time.time()
    job = service.http.post("/api/v1/jobs", json=body).json()
    if "id" not in job:
        raise SystemExit(f"the bisect job was refused: {job}")
    while job["status"] not in ("done", "failed"):
        time.sleep(POLL_S)
        job = service.http.get(f"/api/v1/jobs/{job['id']}").json()
    runs = job["runs"]
    if any(run["cached"] for run in runs):
        raise SystemExit("a probe was served from the cache")
    results = [run["result"] or {} for run in runs]
    stored = max(stored_at(run) for run in runs)
    return {"e2e": stored - submitted, "runs": len(runs),
            "warm": sum(bool(r.get("isolation", {}).get("warm")) for r in results),
            "sandbox": sum(r.get("seconds", {}).get("total", 0.0) for r in results),
            "verdict": (job.get("bisect") or {}).get("verdict")}


def sandbox_memory(service: Service) -> list[tuple[int, int, float, float]]:
    """Per pool process: its pid, waiting sandboxes, their PSS and RSS in MiB (whole trees)."""
    worker = psutil.Process(service.procs[1].pid)
    rows = []
    for pool_process in worker.children():
        sandboxes = pool_process.children()
        pss = rss = 0.0
        for sandbox in sandboxes:
            for process in [sandbox, *sandbox.children(recursive=True)]:
                try:
                    info = process.memory_full_info()
                except psutil.Error:  # ended meanwhile, or not ours to read
                    continue
                pss, rss = pss + info.pss / MIB, rss + info.rss / MIB
        rows.append((pool_process.pid, len(sandboxes), pss, rss))
    return rows


def wait_warm(service: Service, environments: int) -> bool:
    """Wait until every pool process keeps a sandbox per environment (the replacements of the
    last job's, started once its runs stopped, have imported TVM), then until all is idle."""
    worker = psutil.Process(service.procs[1].pid)
    deadline = time.monotonic() + WARM_WAIT_S
    while time.monotonic() < deadline:
        pools = worker.children()
        if pools and all(len(p.children()) >= environments for p in pools):
            service.settle()
            return True
        time.sleep(0.25)
    return False


def warm_up(service: Service, case: dict[str, Any], envs: list[str], variant: str) -> int:
    """Bisect until every probe of one took a warm sandbox; how many bisections that took."""
    for attempt in range(1, WARM_UP_MAX + 1):
        wait_warm(service, len(envs))
        found = time_bisect(service, case, envs, variant)
        print(f"warm-up bisection {attempt}: {found['warm']}/{found['runs']} probes warm, "
              f"{found['e2e']:.2f} s", flush=True)
        if found["warm"] == found["runs"]:
            return attempt
    return WARM_UP_MAX


def main() -> None:
    """Measure and print."""
    args, settings, envs, case, script = cpu_bench(__doc__ or "")
    newest, ids = envs[-1], [env.id for env in envs]
    prefix = f"tvmrepro-bench-{uuid.uuid4().hex[:12]}:"  # a shared Redis is never flushed
    concurrency = max(2, os.cpu_count() or 1)  # the worker's default
    service = Service("bisect", settings.envs_dir, ids[0], BENCH_REDIS_URL, prefix,
                      concurrency=concurrency, more_envs=tuple(ids[1:]))
    samples: dict[str, list[float]] = {"bare": [], "service": [], "warm": [], "sandbox": [],
                                       "bare_cpu": [], "service_cpu": []}
    verdicts = set()
    try:
        warm_up(service, case, ids, args.variant)
        if not wait_warm(service, len(ids)):
            print("the worker did not keep a sandbox per environment in every process")
        memory = sandbox_memory(service)
        for _ in range(args.repeat):
            wait_warm(service, len(ids))
            with TreeCpu() as used:
                samples["bare"].append(time_bare(env_python(settings, newest), script))
            samples["bare_cpu"].append(used.seconds)
            wait_warm(service, len(ids))
            with TreeCpu() as used:
                found = time_bisect(service, case, ids, args.variant)
            samples["service_cpu"].append(used.seconds)
            for name in ("e2e", "warm", "sandbox"):
                samples["service" if name == "e2e" else name].append(found[name])
            verdicts.add(str(found["verdict"]))
    finally:
        service.stop()
        bench_redis = redis.Redis.from_url(BENCH_REDIS_URL)
        for key in bench_redis.scan_iter(match=f"{prefix}*"):
            bench_redis.delete(key)
    report(args, newest.id, len(ids), concurrency, samples, verdicts, memory)


def report(args: argparse.Namespace, newest: str, releases: int, concurrency: int,
           samples: dict[str, list[float]], verdicts: set[str],
           memory: list[tuple[int, int, float, float]]) -> None:
    """Print the table, the warm probes and the memory."""
    bare = statistics.median(samples["bare"])
    print(f"founding case, variant {args.variant}: bare run on {newest} vs a bisect job over "
          f"{releases} CPU releases through the service (Redis, warm worker, concurrency "
          f"{concurrency}, cache bypassed; {os.cpu_count()} cores), {args.repeat} runs each; "
          f"verdicts {sorted(verdicts)}; load {os.getloadavg()[0]:.1f}")
    print(TABLE_HEADER)
    print(summary("bare cold python", samples["bare"], bare, samples["bare_cpu"]))
    print(summary("bisect job, service", samples["service"], bare, samples["service_cpu"]))
    print(summary("  probes' sandbox time, sum", samples["sandbox"], bare))
    print(f"warm probes per bisection: {samples['warm']} of {releases}")
    for pid, count, pss, rss in memory:
        per = f"{pss / count:.0f} MiB PSS ({rss / count:.0f} MiB RSS) each" if count else "-"
        print(f"pool process {pid}: {count} idle warm sandboxes, {pss:.0f} MiB PSS, "
              f"{rss:.0f} MiB RSS in all; {per}")
    print(json.dumps(samples))


if __name__ == "__main__":
    main()
