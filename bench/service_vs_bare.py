"""The founding case end to end through the service, against a bare cold `python` run of it.

Measured side by side in one run, interleaved so that drift hits all alike:
- bare: `python repro.py` in the environment's interpreter, a fresh process each
  time (the case's source ported to this TVM, its passes, build, VM), as a user
  would run the report by hand;
- redis: submit over HTTP -> the result is stored (its `finished_at`), with the
  API and a worker already running on Redis (its keys under a prefix of this
  run's own, deleted afterwards) and SQLite;
- embedded: the same on the embedded broker (kombu over SQLite) and SQLite.
Each service run bypasses the cache, and starts on a warm worker: after each run the bench
waits until the worker's processes are idle again (the sandbox that replaces the one the run
took has imported TVM), so no measure shares the CPU with that import. Prints medians and the
ratio service/bare, each ratio beside its floor (bench/floor.py).

    .venv/bin/python bench/service_vs_bare.py [--repeat 7] [--env ENV] [--variant NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psutil
import redis

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.floor import TreeCpu, floor  # noqa: E402
from tvmrepro.environments import default_catalog  # noqa: E402
from tvmrepro.settings import Settings  # noqa: E402
from worker.environments.provision import env_python, provision  # noqa: E402

CASE = REPO / "tests" / "cases" / "tvm-17357" / "case.json"
BENCH_REDIS_URL = os.environ.get("TVMREPRO_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
# The time is read from the stored `finished_at`; a job is followed as tvmrepro's client
# follows it, by long-poll (a service that cannot wait now is asked again after POLL_S).
POLL_S = 0.25
LONG_POLL_S = 20
START_TIMEOUT_S = 120.0
SETTLE_MAX_S, SETTLE_SAMPLE_S = 30.0, 0.25
SETTLE_IDLE_CPU_S = 0.01  # the whole worker tree over one sample: idle

# Untimed: port the case's source to the environment's TVM with the harness's own rules.
PORT = """
import json, sys, tvm
from harness.porting import detect, port
case = json.load(open(sys.argv[1]))
print(port(case["source"], detect(tvm))[0])
"""
REPRO_TAIL = """
import tvm
from tvm import relax

def resolve(name):
    for ns in (relax.transform, (getattr(tvm, "tirx", None) or tvm.tir).transform):
        if hasattr(ns, name):
            return getattr(ns, name)()
    raise NameError(name)

mod = {module}
with tvm.transform.PassContext(opt_level={opt_level}):
    for name in {passes!r}:
        mod = resolve(name)(mod)
    ex = relax.build(mod, target="{target}")
try:
    relax.VirtualMachine(ex, tvm.cpu())
    print("ok")
except Exception as exc:
    print(type(exc).__name__, str(exc).splitlines()[0][:200])
"""


def bare_script(settings: Settings, env_id: str, case: dict[str, Any], variant: str,
                workdir: Path) -> Path:
    """repro.py: the case as a plain script for this environment."""
    env = default_catalog().get(env_id)
    case_file = workdir / "case.json"
    case_file.write_text(json.dumps(case))
    ported = subprocess.run([str(env_python(settings, env)), "-c", PORT, str(case_file)],
                            capture_output=True, text=True, check=True,
                            env={"PYTHONPATH": str(REPO / "images"), "PATH": "/usr/bin:/bin"})
    spec = next(v for v in case["variants"] if v["name"] == variant)
    passes = [p if isinstance(p, str) else p["name"] for p in spec["passes"]]
    tail = REPRO_TAIL.format(module=case.get("module", "Module"), passes=passes,
                             opt_level=case.get("opt_level", 3), target=env.target)
    script = workdir / "repro.py"
    script.write_text(ported.stdout + tail)
    return script


def finished(http: httpx.Client, job_id: str) -> dict[str, Any]:
    """The job, once it is done (or failed), followed by long-poll."""
    path, etag = f"/api/v1/jobs/{job_id}", None
    while True:
        answer = http.get(path, params={"wait": LONG_POLL_S} if etag else None,
                          headers={"If-None-Match": etag} if etag else None)
        if answer.status_code == 304:
            time.sleep(POLL_S)  # it could not wait (a finished job answers 200 first)
            continue
        job: dict[str, Any] = answer.json()
        if job["status"] in ("done", "failed"):
            return job
        etag = answer.headers.get("ETag")
        if etag is None:
            time.sleep(POLL_S)


def stored_at(run: dict[str, Any]) -> float:
    """When the worker stored a run's result (its `finished_at`), as a Unix time."""
    return datetime.fromisoformat(run["finished_at"]).timestamp()


def time_bare(python: Path, script: Path) -> float:
    """Seconds for one cold `python repro.py`."""
    started = time.perf_counter()
    proc = subprocess.run([str(python), str(script)], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"the bare run failed:\n{proc.stderr[-3000:]}")
    return elapsed


class Service:
    """An API and one worker (or, up=True, one `tvmrepro up`), started here, stopped at the end."""

    def __init__(self, name: str, envs_dir: Path, env_id: str, redis_url: str | None,
                 redis_prefix: str = "", concurrency: int = 1,
                 more_envs: tuple[str, ...] = (), up: bool = False) -> None:
        self.name = name
        self.home = Path(tempfile.mkdtemp(prefix=f"tvmrepro-bench-{name}-"))
        (self.home / "envs").symlink_to(envs_dir)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.environ = {k: v for k, v in os.environ.items()
                        if k not in ("REDIS_URL", "DATABASE_URL") and not k.startswith("TVMREPRO_")}
        self.environ["TVMREPRO_HOME"] = str(self.home)
        if redis_url:
            self.environ["REDIS_URL"] = redis_url
            self.environ["TVMREPRO_REDIS_PREFIX"] = redis_prefix
        served = [arg for env in (env_id, *more_envs) for arg in ("--env", env)]
        if up:  # the API and its worker (default concurrency), as `tvmrepro up` starts them
            self.procs = [self._spawn("up", "up", "--port", str(self.port), *served)]
        else:
            self.procs = [self._spawn("api", "serve", "--port", str(self.port)),
                          self._spawn("worker", "worker", *served, "--loglevel", "WARNING",
                                      "--concurrency", str(concurrency))]
        self.http = httpx.Client(base_url=self.url, timeout=30.0)
        self._wait_ready(env_id)

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.home / f"{name}.log", "wb")  # noqa: SIM115  # the child writes to it
        return subprocess.Popen([sys.executable, "-m", "cli", *args], cwd=REPO,
                                env=self.environ, stdout=log, stderr=subprocess.STDOUT)

    def _wait_ready(self, env_id: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                envs = self.http.get("/api/v1/environments").json()["environments"]
                if next(e for e in envs if e["id"] == env_id)["workers"]:
                    return
            except (httpx.TransportError, ValueError, KeyError):
                pass
            time.sleep(0.2)
        raise SystemExit(f"the {self.name} service did not start; see {self.home}/*.log")

    def time_job(self, case: dict[str, Any], env_id: str, variant: str) -> dict[str, float]:
        """Seconds from submit to the result stored, and the run's own time in the sandbox."""
        body = {"case": case, "environments": [env_id], "variants": [variant],
                "bypass_cache": True}
        submitted = time.time()
        job = finished(self.http, self.http.post("/api/v1/jobs", json=body).json()["id"])
        (run,) = job["runs"]
        stored = stored_at(run)
        return {"e2e": stored - submitted, "sandbox": run["result"]["seconds"]["total"]}

    def settle(self) -> None:
        """Wait until the service's processes (the worker's sandboxes too) stop using the CPU."""
        tops = [psutil.Process(proc.pid) for proc in self.procs]
        deadline = time.monotonic() + SETTLE_MAX_S
        while time.monotonic() < deadline:
            tree = [p for top in tops for p in (top, *top.children(recursive=True))]
            before = _cpu_seconds(tree)
            time.sleep(SETTLE_SAMPLE_S)
            if _cpu_seconds(tree) - before < SETTLE_IDLE_CPU_S:
                return

    def stop(self) -> None:
        """Stop the API and the worker."""
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _cpu_seconds(processes: list[psutil.Process]) -> float:
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:  # ended meanwhile
            continue
        total += times.user + times.system
    return total


TABLE_HEADER = (f"{'':<28} {'median':>8} {'min':>8} {'max':>8} {'/bare':>9}"  # above summary()s
                f" {'floor':>8}")


def summary(label: str, seconds: list[float], bare: float, cpu: list[float] | None = None) -> str:
    """One line of the table: `cpu`, the CPU seconds of each sample (TreeCpu), gives the ratio's
    floor (bench/floor.py); without them (a part of a measure, whose own CPU no process tree
    holds apart) the floor reads `-`."""
    median = statistics.median(seconds)
    low = f"{floor(statistics.median(cpu), bare):7.2f}x" if cpu else f"{'-':>8}"
    return (f"{label:<28} {median:8.3f} {min(seconds):8.3f} {max(seconds):8.3f}"
            f" {median / bare:8.2f}x {low}")


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="tvm-0.27.0.post1-cpu")
    parser.add_argument("--variant", default="fusetir-once")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="also print the samples as JSON")
    args = parser.parse_args()
    settings = Settings.from_env()
    env = default_catalog().get(args.env)
    provision(settings, env)
    case = json.loads(CASE.read_text())
    script = bare_script(settings, env.id, case, args.variant, Path(tempfile.mkdtemp()))
    prefix = f"tvmrepro-bench-{uuid.uuid4().hex[:12]}:"  # a shared Redis is never flushed
    services = [Service("redis", settings.envs_dir, env.id, BENCH_REDIS_URL, prefix),
                Service("embedded", settings.envs_dir, env.id, None)]
    samples: dict[str, list[float]] = {"bare": []}
    cpu: dict[str, list[float]] = {}  # each measure's CPU seconds, for its floor
    try:
        for service in services:  # warm-up: the first run after start pays for cold caches
            service.time_job(case, env.id, args.variant)
        for _ in range(args.repeat):
            for service in services:
                service.settle()
            with TreeCpu() as used:
                samples["bare"].append(time_bare(env_python(settings, env), script))
            cpu.setdefault("bare", []).append(used.seconds)
            for service in services:
                service.settle()
                with TreeCpu() as used:
                    timing = service.time_job(case, env.id, args.variant)
                cpu.setdefault(service.name, []).append(used.seconds)
                samples.setdefault(service.name, []).append(timing["e2e"])
                samples.setdefault(f"{service.name} (sandbox)", []).append(timing["sandbox"])
    finally:
        for service in services:
            service.stop()
        bench_redis = redis.Redis.from_url(BENCH_REDIS_URL)
        for key in bench_redis.scan_iter(match=f"{prefix}*"):
            bench_redis.delete(key)
    bare = statistics.median(samples["bare"])
    print(f"founding case, variant {args.variant}, {env.id}, {args.repeat} runs each "
          f"(medians; service runs bypass the cache)")
    print(TABLE_HEADER)
    print(summary("bare cold python", samples["bare"], bare, cpu["bare"]))
    for name in ("redis", "embedded"):
        print(summary(f"service, {name} broker", samples[name], bare, cpu[name]))
        print(summary("  of which run in sandbox", samples[f"{name} (sandbox)"], bare))
    if args.json:
        print(json.dumps({**samples, "cpu": cpu}))


if __name__ == "__main__":
    main()
