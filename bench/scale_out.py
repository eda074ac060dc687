"""The scale-out load test: small runs at a steady rate on two worker hosts, one killed midway.

A deployment of several hosts on this machine: PostgreSQL (a database of this run's own),
Redis (its keys under a prefix of this run's own, deleted afterwards), the API behind its front,
and two workers, each a host of its own: its own UTS namespace (`unshare --uts`, so its own host
name, and the other cannot see its processes), its own TVMREPRO_HOME and zygotes (the
provisioned environments linked in, as a host's own disk would hold them). They share only the
broker and the store, over loopback.

Two submitters, as the API tells them apart (by address): A (127.0.0.1) submits jobs of
JOB_RUNS small runs (a tiny Relax module, built and run in the VM, the cache bypassed) at
`--rate` runs an hour; B (127.0.0.2) submits one run every B_PERIOD_S and waits for it. At
`--kill-at` minutes every process of host A's namespace is killed with SIGKILL. After
`--minutes`, submitting stops and the bench waits for the runs to drain, then reads the store:

- held: runs finished per minute of the window, against the rate asked;
- wait in the queue: from a run stored to its (last) claim, p50 and p95;
- lost: runs of A's jobs with no result at the end; duplicates: runs started more than once
  (a second delivery), and how many of those the killed host held;
- the killed host's runs: every one finished by the other host;
- B's end to end: submit to its result stored, p50, p95, max.

    .venv/bin/python bench/scale_out.py [--minutes 10] [--rate 10000] [--kill-at 5] [--env ENV]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psutil
import redis
import sqlalchemy as sa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.service_vs_bare import BENCH_REDIS_URL, finished, stored_at  # noqa: E402
from tvmrepro.settings import Settings  # noqa: E402
from tvmrepro.store import Store  # noqa: E402
from tvmrepro.store import schema as t  # noqa: E402

PG_SERVER = os.environ.get("TVMREPRO_BENCH_PG_SERVER", "postgresql://postgres@127.0.0.1:5432")
PG_DRIVER_SERVER = PG_SERVER.replace("postgresql://", "postgresql+psycopg://")
DEFAULT_ENV = "tvm-0.27.0.post1-cpu"
JOB_RUNS = 5
B_PERIOD_S = 6.0
DRAIN_S = 240.0
START_TIMEOUT_S = 120.0
HOSTS = ("host-a", "host-b")
B_ADDRESS = "127.0.0.2"
TINY = """from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 4), dtype="float32")) -> R.Tensor((4, 4), dtype="float32"):
        y: R.Tensor((4, 4), dtype="float32") = R.add(x, x)
        return y
"""


def tiny_case(runs: int) -> dict[str, Any]:
    """A tiny module, `runs` variants of it (each a run of its own)."""
    return {"title": "scale-out load", "source": TINY, "module": "Module", "target": "llvm",
            "entry": "main", "inputs": {"seed": 0},
            "variants": [{"name": f"v{n}", "passes": []} for n in range(runs)]}


def _on_server(statement: str) -> None:
    """One statement on the PostgreSQL server, outside a transaction (CREATE/DROP DATABASE)."""
    server = sa.create_engine(f"{PG_DRIVER_SERVER}/postgres", isolation_level="AUTOCOMMIT")
    with server.connect() as conn:
        conn.execute(sa.text(statement))
    server.dispose()


class Deployment:
    """The API and two worker hosts on a PostgreSQL database and Redis prefix of their own."""

    def __init__(self, env_id: str, envs_dir: Path) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="tvmrepro-scale-out-"))
        self.database = f"tvmrepro_scale_{uuid.uuid4().hex[:8]}"
        self.prefix = f"scale-{uuid.uuid4().hex[:8]}:"
        _on_server(f'CREATE DATABASE "{self.database}"')
        self.url = f"{PG_DRIVER_SERVER}/{self.database}"
        self.port = 20000 + os.getpid() % 10000
        self.api_url = f"http://127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.env_id, self.envs_dir = env_id, envs_dir
        self._spawn("api", "serve", "--port", str(self.port))
        for host in HOSTS:
            self._spawn(host, "worker", "--env", env_id, "--loglevel", "WARNING", host=host)
        self.store = Store(self.url)

    def _environ(self, name: str) -> dict[str, str]:
        home = self.root / name
        home.mkdir()
        (home / "envs").symlink_to(self.envs_dir)
        environ = {k: v for k, v in os.environ.items()
                   if k not in ("REDIS_URL", "DATABASE_URL") and not k.startswith("TVMREPRO_")}
        environ.update({"TVMREPRO_HOME": str(home), "DATABASE_URL": self.url,
                        "REDIS_URL": BENCH_REDIS_URL, "TVMREPRO_REDIS_PREFIX": self.prefix})
        return environ

    def _spawn(self, name: str, *args: str, host: str | None = None) -> None:
        command = [sys.executable, "-m", "cli", *args]
        if host is not None:  # a host of its own: its own name, its processes out of sight
            command = ["unshare", "--uts", "--fork", "sh", "-c",
                       f'hostname {host} && exec "$@"', "sh", *command]
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115  # the child writes to it
        self.procs[name] = subprocess.Popen(command, cwd=REPO, env=self._environ(name),
                                            stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def wait_ready(self) -> None:
        """Until both hosts serve the environment."""
        http = httpx.Client(base_url=self.api_url, timeout=10)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError, ValueError, KeyError, StopIteration):
                envs = http.get("/api/v1/environments").json()["environments"]
                if next(e for e in envs if e["id"] == self.env_id)["workers"] >= len(HOSTS):
                    return
            time.sleep(0.5)
        raise SystemExit(f"the deployment did not start; see {self.root}/*.log")

    def kill_host(self, host: str) -> int:
        """SIGKILL every process of the host's UTS namespace (its worker, pool, zygotes and
        sandboxes): how many."""
        # `unshare --fork` stays in this namespace; its child (the host's shell, then its
        # worker) is the first process of the host's own.
        children = psutil.Process(self.procs[host].pid).children()
        if not children:
            return 0
        namespace = os.readlink(f"/proc/{children[0].pid}/ns/uts")
        if namespace == os.readlink("/proc/self/ns/uts"):
            raise SystemExit(f"{host} is not in a namespace of its own: nothing killed")
        killed = 0
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if os.readlink(entry / "ns" / "uts") == namespace:
                        os.kill(int(entry.name), signal.SIGKILL)
                        killed += 1
        return killed

    def stop(self) -> None:
        """Stop every process, drop the database and the Redis keys."""
        for name, proc in self.procs.items():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM if name == "api" else signal.SIGKILL)
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(30)
        self.store.dispose()
        _on_server(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
        client = redis.Redis.from_url(BENCH_REDIS_URL)
        for key in client.scan_iter(f"{self.prefix}*"):
            client.delete(key)


class Load:
    """Submitter A's steady jobs and submitter B's single runs, on threads of their own."""

    def __init__(self, api_url: str, rate_per_hour: float, seconds: float) -> None:
        self.api_url, self.seconds = api_url, seconds
        self.period = JOB_RUNS * 3600.0 / rate_per_hour
        self.a_jobs: list[str] = []
        self.a_refused: list[str] = []
        self.b_e2e: list[float] = []
        self.b_minute: list[int] = []  # the minute of the window each of B's runs was submitted
        self.b_failed: list[str] = []
        self.started = time.time()

    def submit_a(self) -> None:
        """JOB_RUNS runs every `period` seconds, on schedule (not after the last answer)."""
        http = httpx.Client(base_url=self.api_url, timeout=30)
        body = {"kind": "run", "case": tiny_case(JOB_RUNS), "bypass_cache": True,
                "environments": [DEFAULT_ENV]}
        n = 0
        while (due := self.started + n * self.period) < self.started + self.seconds:
            time.sleep(max(0.0, due - time.time()))
            answer = http.post("/api/v1/jobs", json=body)
            if answer.status_code == 202:
                self.a_jobs.append(answer.json()["id"])
            else:
                self.a_refused.append(f"{answer.status_code} {answer.text[:200]}")
            n += 1

    def submit_b(self) -> None:
        """One run every B_PERIOD_S from another address, each followed to its result."""
        transport = httpx.HTTPTransport(local_address=B_ADDRESS)
        http = httpx.Client(base_url=self.api_url, timeout=60, transport=transport)
        body = {"kind": "run", "case": tiny_case(1), "bypass_cache": True,
                "environments": [DEFAULT_ENV]}
        while time.time() < self.started + self.seconds:
            submitted = time.time()
            answer = http.post("/api/v1/jobs", json=body)
            if answer.status_code != 202:
                self.b_failed.append(f"{answer.status_code} {answer.text[:200]}")
            else:
                job = finished(http, answer.json()["id"])
                (run,) = job["runs"]
                self.b_e2e.append(stored_at(run) - submitted)
                self.b_minute.append(int((submitted - self.started) // 60))
            time.sleep(max(0.0, submitted + B_PERIOD_S - time.time()))


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) of values, by nearest rank; NaN for none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def drained(store: Store, job_ids: list[str], deadline: float) -> None:
    """Until every run of these jobs has a result, or the deadline."""
    while time.time() < deadline:
        left = sum(store.unfinished_count(job_id) for job_id in job_ids)
        if left == 0:
            return
        time.sleep(2)


def a_runs(store: Store, job_ids: list[str]) -> list[dict[str, Any]]:
    """Every run of A's jobs as the store holds it."""
    query = sa.select(t.runs).where(t.runs.c.job_id.in_(job_ids))
    with store.engine.connect() as conn:
        return [dict(row) for row in conn.execute(query).mappings()]


def held_by(store: Store, host: str) -> list[str]:
    """The runs a host's processes hold now (claimed, running)."""
    query = sa.select(t.runs.c.id).where(t.runs.c.state == "running",
                                         t.runs.c.claimed_by.like(f"{host}:%"))
    with store.engine.connect() as conn:
        return list(conn.execute(query).scalars())


def report(load: Load, runs: list[dict[str, Any]], killed_runs: list[str], killed_at: float,
           args: argparse.Namespace) -> dict[str, Any]:
    """The figures, printed and returned."""
    done = [r for r in runs if r["state"] == "done"]
    waits = [r["claimed_at"] - r["created_at"] for r in done if r["claimed_at"]]
    per_minute = [0] * args.minutes
    waits_by_minute: list[list[float]] = [[] for _ in range(args.minutes)]
    for r in done:
        minute = int((r["finished_at"] - load.started) // 60)
        if 0 <= minute < args.minutes:
            per_minute[minute] += 1
        stored = int((r["created_at"] - load.started) // 60)
        if 0 <= stored < args.minutes and r["claimed_at"]:
            waits_by_minute[stored].append(r["claimed_at"] - r["created_at"])
    by_id = {r["id"]: r for r in runs}
    killed_hosts = sorted({str(by_id[i]["claimed_by"]).partition(":")[0] for i in killed_runs
                           if i in by_id})
    figures = {
        "rate_asked_per_hour": args.rate, "minutes": args.minutes,
        "submitted_runs": len(runs), "refused_jobs": len(load.a_refused),
        "finished_per_minute": per_minute,
        "held_per_hour": round(statistics.mean(per_minute[1:]) * 60) if args.minutes > 1 else None,
        "queue_wait_p50_s": round(percentile(waits, 50), 2),
        "queue_wait_p95_s": round(percentile(waits, 95), 2),
        "queue_wait_p95_by_minute_s": [round(percentile(w, 95), 2) for w in waits_by_minute],
        "queue_wait_max_s": round(max(waits, default=float("nan")), 2),
        "lost": len(runs) - len(done),
        "started_twice": sum(1 for r in runs if r["deliveries"] > 1),
        "killed_host_held": len(killed_runs), "killed_host_runs_finished_by": killed_hosts,
        "killed_at_minute": round((killed_at - load.started) / 60, 2),
        "b_runs": len(load.b_e2e), "b_refused": len(load.b_failed),
        "b_e2e_p50_s": round(percentile(load.b_e2e, 50), 2),
        "b_e2e_p95_s": round(percentile(load.b_e2e, 95), 2),
        "b_e2e_max_s": round(max(load.b_e2e, default=float("nan")), 2),
        "b_e2e_max_by_minute_s": [
            round(max((e for e, m in zip(load.b_e2e, load.b_minute, strict=True) if m == minute),
                      default=float("nan")), 2) for minute in range(args.minutes)],
    }
    print(json.dumps(figures, indent=2))
    if load.a_refused:
        print("A's refused answers (first 3):", *load.a_refused[:3], sep="\n  ")
    return figures


def main() -> None:
    """Start the deployment, run the load, kill host A midway, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--rate", type=float, default=10000.0, help="A's runs an hour")
    parser.add_argument("--kill-at", type=float, default=5.0, help="minute host A is killed")
    parser.add_argument("--env", default=DEFAULT_ENV)
    args = parser.parse_args()
    envs_dir = Settings.from_env(os.environ).home / "envs"
    deployment = Deployment(args.env, envs_dir)
    try:
        deployment.wait_ready()
        print(f"deployment up in {deployment.root}; load for {args.minutes} min at "
              f"{args.rate:.0f} runs/h, {HOSTS[0]} killed at minute {args.kill_at}")
        load = Load(deployment.api_url, args.rate, args.minutes * 60.0)
        threads = [threading.Thread(target=load.submit_a, daemon=True),
                   threading.Thread(target=load.submit_b, daemon=True)]
        for thread in threads:
            thread.start()
        time.sleep(max(0.0, load.started + args.kill_at * 60 - time.time()))
        # Mid-run: at the first moment from the minute on that the host holds a run.
        deadline = time.time() + 30
        while not held_by(deployment.store, HOSTS[0]) and time.time() < deadline:
            time.sleep(0.05)
        killed_at = time.time()
        killed = deployment.kill_host(HOSTS[0])
        killed_runs = held_by(deployment.store, HOSTS[0])  # claimed, never to be finished there
        print(f"killed {killed} processes of {HOSTS[0]}, which held {len(killed_runs)} runs")
        for thread in threads:
            thread.join()
        drained(deployment.store, load.a_jobs, time.time() + DRAIN_S)
        report(load, a_runs(deployment.store, load.a_jobs), killed_runs, killed_at, args)
    finally:
        deployment.stop()


if __name__ == "__main__":
    main()
