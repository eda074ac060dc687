"""A real service for tests: the API (gunicorn) and Celery workers as subprocesses.

Each Stack has its own TVMREPRO_HOME (the test session's provisioned
environments linked in). Its broker and store are the backend's: Redis on a
dedicated database number and PostgreSQL, or the embedded SQLite broker and
store in that home.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import redis

from tests.conftest import HISTORY_INDEX, REPO
from tvmrepro.settings import Settings
from tvmrepro.store import Store

if TYPE_CHECKING:
    from service.jobs import JobService

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
# The recovery sweep runs often in tests so that a lost run is found in seconds.
TEST_TIMINGS = {
    "TVMREPRO_RECONCILE_INTERVAL_S": "1",
    "TVMREPRO_CLAIM_GRACE_S": "5",
    "TVMREPRO_REQUEUE_AFTER_S": "60",
    "TVMREPRO_API_WORKERS": "2",
}


@dataclass(frozen=True)
class Backend:
    """Where the broker and the store are: Redis + PostgreSQL, or embedded (both SQLite)."""

    name: str
    redis_url: str | None = None
    database_url: str | None = None
    redis_prefix: str = ""


# Below the kernel's ephemeral range (32768-60999): a port from bind(0) is one that an
# outgoing connection or another process's bind(0) may take before the server binds it
# (an API then exits with "Address already in use" while another answers on its port).
PORTS = range(20000, 32000)


def free_port() -> int:
    """A TCP port nobody listens on right now, drawn outside the ephemeral range."""
    while True:
        port = random.choice(PORTS)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def make_home(root: Path, test_home: Path) -> Path:
    """A fresh TVMREPRO_HOME that shares the session's provisioned environments."""
    home = root / "home"
    home.mkdir(parents=True)
    (home / "envs").symlink_to(test_home / "envs")
    return home


class Stack:
    """The API and workers of one test, started and stopped as real processes."""

    def __init__(self, backend: Backend, home: Path, **overrides: str) -> None:
        self.backend, self.home = backend, home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.environ = self._environ(overrides)
        self.settings = Settings.from_env(self.environ)
        self.api: subprocess.Popen[bytes] | None = None
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.store = Store(self.settings.store_url, artifacts=self.settings.artifacts_dir)
        self.store.create_schema()
        self.http = httpx.Client(base_url=self.url, timeout=30.0)

    def configure(self, **overrides: str) -> None:
        """Change settings (TVMREPRO_* variables) of processes started from now on."""
        self.environ.update(overrides)
        self.settings = Settings.from_env(self.environ)

    def _environ(self, overrides: dict[str, str]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("REDIS_URL", "DATABASE_URL") and not k.startswith("TVMREPRO_")}
        env.update(TEST_TIMINGS, TVMREPRO_HOME=str(self.home),
                   TVMREPRO_TVM_HISTORY=str(HISTORY_INDEX), **overrides)
        if self.backend.redis_url:
            env["REDIS_URL"] = self.backend.redis_url
            env["TVMREPRO_REDIS_PREFIX"] = self.backend.redis_prefix
        if self.backend.database_url:
            env["DATABASE_URL"] = self.backend.database_url
        return env

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        # The product knows no fake runtime: a stack of fake runs starts the tests' launcher.
        entry = "tests.fakes.cli" if self.environ.get("TVMREPRO_RUNTIME") == "fake" else "cli"
        with open(self.home / f"{name}.log", "ab") as log:  # the child keeps its own copy
            return subprocess.Popen([sys.executable, "-m", entry, *args], env=self.environ,
                                    cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def start_api(self) -> None:
        """Start the API and wait until /healthz answers 200."""
        self.api = self._spawn("api", "serve", "--port", str(self.port))
        self._until(lambda: self._healthy(), "the API to answer /healthz")

    def _healthy(self) -> bool:
        """Our API answers /healthz (an API that exited fails at once: another may be there)."""
        assert self.api is not None
        if self.api.poll() is not None:
            raise AssertionError(f"the API exited ({self.api.returncode})\n{self.logs()}")
        try:
            return self.http.get("/healthz").status_code == 200
        except httpx.TransportError:
            return False

    def start_worker(self, env_id: str, *also: str) -> subprocess.Popen[bytes]:
        """Start a worker for one environment (and `also` these) and wait until it heartbeats."""
        before = self.worker_ids(env_id)
        more = [arg for other in also for arg in ("--env", other)]
        proc = self._spawn(f"worker-{env_id}", "worker", "--env", env_id, *more,
                           "--loglevel", "INFO")
        self.workers[env_id] = proc
        self._until(lambda: self.worker_ids(env_id) - before, f"a worker for {env_id}")
        return proc

    def worker_ids(self, env_id: str) -> set[str]:
        """Live worker ids (host:pid) serving env_id, from their heartbeats."""
        with self.store.engine.connect() as conn:
            from tvmrepro.store import schema

            rows = conn.execute(schema.workers.select().where(
                schema.workers.c.heartbeat_at > time.time() - 10)).mappings()
            return {r["id"] for r in rows if env_id in r["environments"]}

    def _until(self, ready: Any, what: str, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}\n{self.logs()}")
            time.sleep(0.2)

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST a job, queued even where no worker is up yet (tests start them later); assert 202."""
        response = self.http.post("/api/v1/jobs", json={"wait": True, **body})
        assert response.status_code == 202, response.text
        job: dict[str, Any] = response.json()
        return job

    def wait(self, job_id: str, timeout: float = 120.0) -> dict[str, Any]:
        """Poll a job until it is done or failed."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                job: dict[str, Any] = self.http.get(f"/api/v1/jobs/{job_id}").json()
                if job["status"] in ("done", "failed"):
                    return job
            except httpx.TransportError:
                pass  # the API is restarting
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} unfinished after {timeout} s\n{self.logs()}")
            time.sleep(0.2)

    def wait_running(self, job_id: str, deliveries: int = 1,
                     timeout: float = 60.0) -> dict[str, Any]:
        """Wait until a run of the job is claimed for the `deliveries`-th time; its store row."""
        found: dict[str, Any] = {}

        def claimed() -> bool:
            job = self.store.job(job_id)
            for run in job.runs if job else []:
                if run.state == "running" and run.deliveries == deliveries:
                    found.update(run.model_dump())
                    return True
            return False

        self._until(claimed, f"a run of job {job_id} to start", timeout)
        return found

    def stop(self, proc: subprocess.Popen[bytes] | None, grace: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM a process (a clean stop), then SIGKILL its whole group after `grace`."""
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(grace)
        # Whatever it left behind in its group (pool processes, sandboxes).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        """kill -9 a process and everything in its group at once (a lost machine)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def close(self, clean: bool = False) -> None:
        """Stop everything this stack started: killed at once, or a clean stop where that is
        what a test checks (a Docker worker's containers outlive a kill: they take a clean stop).

        A clean Celery stop of a worker takes 6-8 s (measured with py-spy on the embedded
        broker: ~3 s before its consumer loop wakes to the signal, then the pool's threads,
        its timer and the pool processes closing their runtimes, about a second each); a kill
        of the group takes none, and the sandboxes' bubblewrap dies with its parent.
        """
        running = [p for p in [self.api, *self.workers.values()] if p is not None]
        for proc in running:
            if not clean:
                self.kill(proc)
            elif proc.poll() is None:  # all at once: a clean stop takes seconds each
                proc.terminate()
        for proc in running:
            self.stop(proc)
        self.http.close()
        self.store.dispose()

    def logs(self, tail: int = 3000) -> str:
        """The end of every process log of this stack (for failure messages)."""
        parts = []
        for path in sorted(self.home.glob("*.log")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-tail:]}")
        return "\n".join(parts)

    def result_rows(self, job_id: str) -> list[dict[str, Any]]:
        """Every stored result row that belongs to a run of this job."""
        from tvmrepro.store import schema

        job = self.store.job(job_id)
        ids = [run.id for run in (job.runs if job else [])]
        with self.store.engine.connect() as conn:
            rows = conn.execute(schema.results.select().where(schema.results.c.run_id.in_(ids)))
            return [dict(r) for r in rows.mappings()]


@contextlib.contextmanager
def serving(backend: Backend, home: Path, env_ids: tuple[str, ...],
            **overrides: str) -> Iterator[Stack]:
    """A stack (of these settings) with its API and a worker per environment started,
    stopped at the end."""
    running = Stack(backend, home, **overrides)
    try:
        running.start_api()
        for env_id in env_ids:
            running.start_worker(env_id)
        yield running
    finally:
        running.close()


def founding_body(case: dict[str, Any], envs: list[str] | str, **extra: Any) -> dict[str, Any]:
    """A run job for a case on these environments, queued even before their workers are up."""
    return {"kind": "run", "case": case, "environments": envs, "wait": True, **extra}


def sleeping_script(seconds: float, tag: str = "") -> dict[str, Any]:
    """A script-mode case that imports TVM, then sleeps (a run long enough to kill mid-way)."""
    script = f"import time\nimport tvm\n# {tag}\ntime.sleep({seconds})\nprint('slept')\n"
    return {"title": f"sleep {seconds} {tag}", "script": script}


def dump(data: Any) -> str:
    """JSON for assertion messages."""
    return json.dumps(data, indent=1)[:4000]


@contextlib.contextmanager
def api_in_thread(home: Path, **overrides: str) -> Iterator[tuple[str, JobService]]:
    """A real API (the app and its store in `home`) served from a thread of this process: its
    URL and its job service (to store results no runtime made). Needs no worker."""
    from werkzeug.serving import make_server

    from service.app import create_app

    app = create_app(Settings.from_env({"TVMREPRO_HOME": str(home), **overrides}))
    http = make_server("127.0.0.1", free_port(), app, threaded=True)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    service: JobService = app.extensions["tvmrepro"]
    try:
        yield f"http://127.0.0.1:{http.server_port}", service
    finally:
        http.shutdown()
        thread.join()
        service.store.dispose()


class OwnRedis:
    """A redis-server of our own, without persistence: a restart empties it."""

    def __init__(self, workdir: Path) -> None:
        server = shutil.which("redis-server")
        if server is None:
            pytest.fail("redis-server is not installed")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.args = [server, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                     "--appendonly", "no", "--dir", str(workdir)]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start it and wait until it answers."""
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL)
        client = redis.Redis(port=self.port)
        for _ in range(200):
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise AssertionError("own redis-server did not start")

    def stop(self) -> None:
        """Stop it (everything in it is lost)."""
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait()
