"""All configuration, read from TVMREPRO_* (and a few standard) environment variables in one place."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_HOME = Path.home() / ".cache" / "tvmrepro"
DEFAULT_SERVER = "http://127.0.0.1:8000"
DEFAULT_RUNTIME = "local"
DEFAULT_TIMEOUT_S = 120
MAX_TIMEOUT_S = 1800
DEFAULT_MEMORY_MB = 4096
MAX_MEMORY_MB = 65536
LOG_CAP_BYTES = 1 << 20
MAX_REQUEST_BYTES = 1 << 20
MAX_QUEUED_RUNS = 500
MAX_DELIVERIES = 3
SANDBOX_PIDS = 256
SANDBOX_CPUS = 2.0  # CPU quota of a Docker sandbox (cores)
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
API_WORKERS = 2  # gunicorn processes (each with API_THREADS threads)
API_THREADS = 4
WORKER_CONCURRENCY = 1  # runs at once per worker process: each run can use every core
# A message unacknowledged this long is handed out again by Redis: above the longest run.
VISIBILITY_TIMEOUT_S = MAX_TIMEOUT_S + 600
# A worker that stops reporting for this long no longer counts as serving its environments.
HEARTBEAT_S = 5.0
WORKER_STALE_S = 30.0
# The worker's recovery sweep: how often it looks for runs the broker lost, and how long a
# waiting run may go unclaimed before it is published again (a duplicate is harmless).
RECONCILE_INTERVAL_S = 5.0
REQUEUE_AFTER_S = 600.0
# A claimed run whose claimer is silent this long past its own time limit was lost.
CLAIM_GRACE_S = 60.0


@dataclass(frozen=True)
class Settings:
    """Everything tvm-repro can be configured with; `from_env()` is the one reader."""

    home: Path = DEFAULT_HOME
    server: str = DEFAULT_SERVER
    redis_url: str | None = None
    redis_prefix: str = ""  # prepended to every Redis key: deployments can share one Redis
    database_url: str | None = None
    runtime: str = DEFAULT_RUNTIME
    docker_host: str | None = None
    log_cap_bytes: int = LOG_CAP_BYTES
    max_request_bytes: int = MAX_REQUEST_BYTES
    max_queued_runs: int = MAX_QUEUED_RUNS
    max_deliveries: int = MAX_DELIVERIES
    sandbox_pids: int = SANDBOX_PIDS
    sandbox_cpus: float = SANDBOX_CPUS
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    api_workers: int = API_WORKERS
    api_threads: int = API_THREADS
    worker_concurrency: int = WORKER_CONCURRENCY
    visibility_timeout_s: int = VISIBILITY_TIMEOUT_S
    heartbeat_s: float = HEARTBEAT_S
    worker_stale_s: float = WORKER_STALE_S
    reconcile_interval_s: float = RECONCILE_INTERVAL_S
    requeue_after_s: float = REQUEUE_AFTER_S
    claim_grace_s: float = CLAIM_GRACE_S

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        """Read settings from environment variables (os.environ by default)."""
        env = os.environ if environ is None else environ
        return cls(
            home=Path(env.get("TVMREPRO_HOME") or DEFAULT_HOME).expanduser(),
            server=env.get("TVMREPRO_SERVER") or DEFAULT_SERVER,
            redis_url=env.get("REDIS_URL") or None,
            redis_prefix=env.get("TVMREPRO_REDIS_PREFIX") or "",
            database_url=env.get("DATABASE_URL") or None,
            runtime=env.get("TVMREPRO_RUNTIME") or DEFAULT_RUNTIME,
            docker_host=env.get("DOCKER_HOST") or None,
            log_cap_bytes=int(env.get("TVMREPRO_LOG_CAP_BYTES") or LOG_CAP_BYTES),
            max_request_bytes=int(env.get("TVMREPRO_MAX_REQUEST_BYTES") or MAX_REQUEST_BYTES),
            max_queued_runs=int(env.get("TVMREPRO_MAX_QUEUED_RUNS") or MAX_QUEUED_RUNS),
            max_deliveries=int(env.get("TVMREPRO_MAX_DELIVERIES") or MAX_DELIVERIES),
            sandbox_pids=int(env.get("TVMREPRO_SANDBOX_PIDS") or SANDBOX_PIDS),
            sandbox_cpus=float(env.get("TVMREPRO_SANDBOX_CPUS") or SANDBOX_CPUS),
            host=env.get("TVMREPRO_HOST") or DEFAULT_HOST,
            port=int(env.get("TVMREPRO_PORT") or DEFAULT_PORT),
            api_workers=int(env.get("TVMREPRO_API_WORKERS") or API_WORKERS),
            api_threads=int(env.get("TVMREPRO_API_THREADS") or API_THREADS),
            worker_concurrency=int(env.get("TVMREPRO_WORKER_CONCURRENCY") or WORKER_CONCURRENCY),
            visibility_timeout_s=int(env.get("TVMREPRO_VISIBILITY_TIMEOUT_S")
                                     or VISIBILITY_TIMEOUT_S),
            heartbeat_s=float(env.get("TVMREPRO_HEARTBEAT_S") or HEARTBEAT_S),
            worker_stale_s=float(env.get("TVMREPRO_WORKER_STALE_S") or WORKER_STALE_S),
            reconcile_interval_s=float(env.get("TVMREPRO_RECONCILE_INTERVAL_S")
                                       or RECONCILE_INTERVAL_S),
            requeue_after_s=float(env.get("TVMREPRO_REQUEUE_AFTER_S") or REQUEUE_AFTER_S),
            claim_grace_s=float(env.get("TVMREPRO_CLAIM_GRACE_S") or CLAIM_GRACE_S),
        )

    def ensure_home(self) -> Path:
        """Create TVMREPRO_HOME if it is missing; a fault names the path and why it failed."""
        from tvmrepro.errors import ReproError

        try:
            self.home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ReproError(f"cannot create TVMREPRO_HOME {self.home}: {exc.strerror}") from exc
        return self.home

    @property
    def envs_dir(self) -> Path:
        """Where provisioned environments live."""
        return self.home / "envs"

    @property
    def cache_dir(self) -> Path:
        """The package cache shared by all environments (one download per wheel)."""
        return self.home / "uv-cache"

    @property
    def store_url(self) -> str:
        """The job store: DATABASE_URL, else SQLite under TVMREPRO_HOME."""
        return self.database_url or f"sqlite:///{self.home / 'tvmrepro.sqlite'}"

    @property
    def broker_url(self) -> str:
        """The Celery broker: REDIS_URL, else kombu's SQLAlchemy transport on SQLite."""
        return self.redis_url or f"sqla+sqlite:///{self.home / 'broker.sqlite'}"

    @property
    def work_dir(self) -> Path:
        """Scratch space for runs (each run gets its own subdirectory, removed afterwards)."""
        return self.home / "work"
