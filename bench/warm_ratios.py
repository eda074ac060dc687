"""What warm sandboxes buy, against bare cold `python repro.py` runs of the founding case.

Measured side by side in one run (interleaved where each sample is one run):
- `tvmrepro run --local --cold` (no service: a fresh sandbox, TVM imported after the case
  arrives), and `tvmrepro run --local` on the home of a running `tvmrepro up` (embedded broker,
  SQLite), which hands the run to that worker's warm sandbox, each against one bare run;
- throughput: 20 runs through the service (Redis broker, a worker of concurrency 2,
  warm sandboxes, cache bypassed), submitted at once, against `xargs -P2` of 20 bare runs,
  and the machine's CPU seconds per run of each (on two busy cores, what bounds throughput);
- a cache hit: submit -> the job's answer (done), for a case already run, once each API
  process has answered a few (its first requests pay imports and compile caches): the
  median of HITS_PER_ROUND hits per round;
- the Docker runtime warm against cold (bench/docker_warm.py: DOCKER_HOST's engine, else a
  private one with the image built offline), unless --no-docker.
Each ratio is printed beside its floor (bench/floor.py), but the Docker runtime's: its
containers' CPU is the engine's, outside this process's tree.
The service end to end against bare (Redis and embedded) is bench/service_vs_bare.py;
a full bisection against one bare run is bench/bisect_vs_bare.py.

    .venv/bin/python bench/warm_ratios.py [--repeat 5] [--env ENV] [--variant NAME]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psutil
import redis

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.floor import TreeCpu, with_floor  # noqa: E402
from bench.service_vs_bare import (  # noqa: E402
    BENCH_REDIS_URL,
    CASE,
    POLL_S,
    TABLE_HEADER,
    Service,
    bare_script,
    stored_at,
    summary,
    time_bare,
)
from tvmrepro.environments import default_catalog  # noqa: E402
from tvmrepro.settings import Settings  # noqa: E402
from worker.environments.provision import env_python, provision  # noqa: E402

BURST = 20
HITS_PER_ROUND = 5
WARM_UP_HITS = 20  # over fresh connections: gunicorn hands them to each of its processes


def time_local(case_file: Path, env_id: str, variant: str, beside: Service | None = None) -> float:
    """Seconds for one `tvmrepro run --local` of the case (a fresh process, as a user runs it):
    --cold, or on the home of `beside` (a `tvmrepro up`), whose warm sandboxes it then takes."""
    flags, environ = ["--cold"], None
    if beside is not None:
        flags, environ = [], beside.environ
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "cli", "run", "--local", *flags, str(case_file),
                           "--env", env_id, "--variant", variant, "--json"], cwd=REPO,
                          capture_output=True, text=True, env=environ)
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1):  # 1: the case's own failure is reported, not ours
        raise SystemExit(f"run --local failed:\n{proc.stderr[-3000:]}")
    if beside is not None and "warm sandboxes of `tvmrepro up`" not in proc.stderr:
        raise SystemExit(f"run --local did not take the warm sandboxes of `up`:\n{proc.stderr}")
    return elapsed


def time_xargs(python: Path, script: Path, count: int) -> tuple[float, float]:
    """Seconds for `count` bare runs through `xargs -P2`, and the machine's CPU seconds meanwhile."""
    cpu_before = machine_cpu()
    started = time.perf_counter()
    subprocess.run(["xargs", "-P2", "-n1", str(python)], input="\n".join([str(script)] * count),
                   text=True, capture_output=True, check=True)
    return time.perf_counter() - started, machine_cpu() - cpu_before


def machine_cpu() -> float:
    """CPU seconds the whole machine has been busy. Not the service's processes' own: a sandbox's
    CPU reaches no rusage of its worker (bubblewrap's processes are not waited for by it), and the
    service's work is also the API's, Redis's and this poller's."""
    times = psutil.cpu_times()
    return times.user + times.nice + times.system + times.irq + times.softirq


def time_burst(service: Service, case: dict[str, Any], env_id: str, variant: str,
               count: int) -> float:
    """Seconds from submitting `count` jobs at once (cache bypassed) to the last result stored."""
    body = {"case": case, "environments": [env_id], "variants": [variant], "bypass_cache": True}
    started = time.time()
    ids = [service.http.post("/api/v1/jobs", json=body).json()["id"] for _ in range(count)]
    pending = set(ids)
    while pending:  # one request a poll: the job list says how many runs of each are done
        time.sleep(POLL_S)
        page = service.http.get("/api/v1/jobs", params={"limit": count}).json()["jobs"]
        pending -= {job["id"] for job in page if job["done"] == job["runs"]}
    stored = max(stored_at(run) for job_id in ids
                 for run in service.http.get(f"/api/v1/jobs/{job_id}").json()["runs"])
    return stored - started


def time_cache_hit(service: Service, case: dict[str, Any], env_id: str, variant: str) -> float:
    """Seconds from submit to a done answer for a case whose result is cached."""
    body = {"case": case, "environments": [env_id], "variants": [variant]}
    started = time.perf_counter()
    job = service.http.post("/api/v1/jobs", json=body).json()
    while job["status"] not in ("done", "failed"):
        time.sleep(0.001)
        job = service.http.get(f"/api/v1/jobs/{job['id']}").json()
    return time.perf_counter() - started


def warm_up_api(service: Service, case: dict[str, Any], env_id: str, variant: str) -> None:
    """Cache hits over fresh connections until every API process has answered some."""
    body = {"case": case, "environments": [env_id], "variants": [variant]}
    for _ in range(WARM_UP_HITS):
        with httpx.Client(base_url=service.url, timeout=30.0) as fresh:
            fresh.post("/api/v1/jobs", json=body)


def docker_line(settings: Settings, env_id: str, variant: str, repeat: int, bare: float) -> str:
    """The Docker runtime's warm and cold medians, their ratio and each against bare."""
    from bench.docker_warm import measure

    samples = measure(settings, default_catalog().get(env_id), variant, repeat)
    cold, warm = (statistics.median(samples[k]) for k in ("cold", "warm"))
    # No floor: the containers run under the engine, outside this process's tree (bench/floor.py).
    return "\n".join([summary("docker runtime, cold", samples["cold"], bare),
                      summary("docker runtime, warm", samples["warm"], bare),
                      f"docker warm/cold {warm / cold:.2f}x (floor -)"])


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="tvm-0.27.0.post1-cpu")
    parser.add_argument("--variant", default="fusetir-once")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-docker", dest="docker", action="store_false")
    args = parser.parse_args()
    settings = Settings.from_env()
    env = default_catalog().get(args.env)
    provision(settings, env)
    case = json.loads(CASE.read_text())
    python = env_python(settings, env)
    script = bare_script(settings, env.id, case, args.variant, Path(tempfile.mkdtemp()))
    prefix = f"tvmrepro-bench-{uuid.uuid4().hex[:12]}:"
    service = Service("redis-c2", settings.envs_dir, env.id, BENCH_REDIS_URL, prefix,
                      concurrency=2)
    up: Service | None = None
    samples: dict[str, list[float]] = {"bare": [], "local": [], "local_up": [], "cache": []}
    cpu: dict[str, list[float]] = {name: [] for name in samples}  # for each ratio's floor
    try:
        up = Service("up", settings.envs_dir, env.id, None, up=True)
        service.time_job(case, env.id, args.variant)  # warm-up, and the result the hits read
        warm_up_api(service, case, env.id, args.variant)
        time_local(CASE, env.id, args.variant, beside=up)  # its API's first requests
        for _ in range(args.repeat):
            service.settle()
            up.settle()
            with TreeCpu() as used:
                samples["bare"].append(time_bare(python, script))
            cpu["bare"].append(used.seconds)
            with TreeCpu() as used:
                samples["local"].append(time_local(CASE, env.id, args.variant))
            cpu["local"].append(used.seconds)
            up.settle()
            with TreeCpu() as used:
                samples["local_up"].append(time_local(CASE, env.id, args.variant, beside=up))
            cpu["local_up"].append(used.seconds)
            with TreeCpu() as used:
                samples["cache"].append(statistics.median(
                    time_cache_hit(service, case, env.id, args.variant)
                    for _ in range(HITS_PER_ROUND)))
            cpu["cache"].append(used.seconds / HITS_PER_ROUND)  # a hit's, as the sample is
        up.stop()  # its idle worker polls its broker: no part of the throughput measures
        service.settle()
        with TreeCpu() as xargs_tree:
            xargs, xargs_cpu = time_xargs(python, script, BURST)
        service.settle()
        cpu_before = machine_cpu()
        burst = time_burst(service, case, env.id, args.variant, BURST)
        service.settle()  # the replacements the burst left to start count as its work
        burst_cpu = machine_cpu() - cpu_before
    finally:
        service.stop()
        if up is not None:
            up.stop()
        bench_redis = redis.Redis.from_url(BENCH_REDIS_URL)
        for key in bench_redis.scan_iter(match=f"{prefix}*"):
            bench_redis.delete(key)
    bare = statistics.median(samples["bare"])
    print(f"founding case, variant {args.variant}, {env.id}, {args.repeat} runs each (medians)")
    print(TABLE_HEADER)
    print(summary("bare cold python", samples["bare"], bare, cpu["bare"]))
    print(summary("tvmrepro run --local --cold", samples["local"], bare, cpu["local"]))
    print(summary("run --local beside `up`", samples["local_up"], bare, cpu["local_up"]))
    print(summary("cache hit, submit->answer", samples["cache"], bare, cpu["cache"]))
    print(f"cache hit, submit->answer over HTTP: median {statistics.median(samples['cache']) * 1000:.1f} ms")
    # The ratio is bare's time over the service's: its floor is bare's CPU over the cores.
    print(f"throughput, {BURST} runs at concurrency 2: service {BURST / burst:.2f} runs/s, "
          f"xargs -P2 bare {BURST / xargs:.2f} runs/s, "
          f"ratio {with_floor(xargs / burst, xargs_tree.seconds, burst)}")
    # On two busy cores throughput is CPU per run: a single-use sandbox imports TVM as a bare run
    # does (before the case comes), so the ratio is capped near bare CPU / service CPU.
    print(f"machine CPU per run: bare {xargs_cpu / BURST:.2f} s, service {burst_cpu / BURST:.2f} s "
          f"(API, worker, sandboxes, Redis; ratio {xargs_cpu / burst_cpu:.2f}x)")
    if args.docker:
        print(docker_line(settings, env.id, args.variant, args.repeat, bare))


if __name__ == "__main__":
    main()
