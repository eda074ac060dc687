"""All configuration, read from TVMREPRO_* (and a few standard) environment variables in one place."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class Settings:
    """Everything tvm-repro can be configured with; `from_env()` is the one reader."""

    home: Path = DEFAULT_HOME
    server: str = DEFAULT_SERVER
    redis_url: str | None = None
    database_url: str | None = None
    runtime: str = DEFAULT_RUNTIME
    docker_host: str | None = None
    log_cap_bytes: int = LOG_CAP_BYTES
    max_request_bytes: int = MAX_REQUEST_BYTES
    max_queued_runs: int = MAX_QUEUED_RUNS
    max_deliveries: int = MAX_DELIVERIES
    sandbox_pids: int = SANDBOX_PIDS
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        """Read settings from environment variables (os.environ by default)."""
        env = os.environ if environ is None else environ
        return cls(
            home=Path(env.get("TVMREPRO_HOME") or DEFAULT_HOME).expanduser(),
            server=env.get("TVMREPRO_SERVER") or DEFAULT_SERVER,
            redis_url=env.get("REDIS_URL") or None,
            database_url=env.get("DATABASE_URL") or None,
            runtime=env.get("TVMREPRO_RUNTIME") or DEFAULT_RUNTIME,
            docker_host=env.get("DOCKER_HOST") or None,
            log_cap_bytes=int(env.get("TVMREPRO_LOG_CAP_BYTES") or LOG_CAP_BYTES),
            max_request_bytes=int(env.get("TVMREPRO_MAX_REQUEST_BYTES") or MAX_REQUEST_BYTES),
            max_queued_runs=int(env.get("TVMREPRO_MAX_QUEUED_RUNS") or MAX_QUEUED_RUNS),
            max_deliveries=int(env.get("TVMREPRO_MAX_DELIVERIES") or MAX_DELIVERIES),
            sandbox_pids=int(env.get("TVMREPRO_SANDBOX_PIDS") or SANDBOX_PIDS),
        )

    @property
    def envs_dir(self) -> Path:
        """Where provisioned environments live."""
        return self.home / "envs"

    @property
    def cache_dir(self) -> Path:
        """The package cache shared by all environments (one download per wheel)."""
        return self.home / "uv-cache"

    @property
    def work_dir(self) -> Path:
        """Scratch space for runs (each run gets its own subdirectory, removed afterwards)."""
        return self.home / "work"
