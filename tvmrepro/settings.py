"""All configuration, read from TVMREPRO_* (and a few standard) environment variables in one place.

`Settings.from_env()` is the one reader: a field `port` is read from TVMREPRO_PORT,
except REDIS_URL, DATABASE_URL and DOCKER_HOST, which keep their usual names. Names
match in any case (tvmrepro_port too) and an empty variable counts as unset. The
strings are parsed by pydantic as keyword arguments would be; a value that does not
parse raises BadInput naming the variable, e.g. `TVMREPRO_PORT: not an integer: 'abc'`.

A plain pydantic model, not pydantic-settings: every process imports this module
first, and pydantic-settings' own imports (asyncio, importlib.metadata, the cloud
secret sources) cost more at startup than this reader does.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.fields import FieldInfo

from tvmrepro.errors import BadInput, ReproError

DEFAULT_HOME = Path.home() / ".cache" / "tvmrepro"
DEFAULT_SERVER = "http://127.0.0.1:8000"
DEFAULT_RUNTIME = "local"
DEFAULT_TIMEOUT_S = 120
MAX_TIMEOUT_S = 1800
DEFAULT_MEMORY_MB = 4096
MAX_MEMORY_MB = 65536
LOG_CAP_BYTES = 1 << 20
# The files a case carries beside its code (tvmrepro.attachments): how many, how large each
# and all of them (decoded), and how long a name may be.
MAX_FILES = 8
MAX_FILE_BYTES = 16 << 20
MAX_FILES_BYTES = 32 << 20
MAX_FILE_NAME = 128
# What a case's own text may take of a request (its source or script, its variants).
MAX_CASE_BYTES = 1 << 20
# The request body: a case's text and its files in base64 (4 characters for 3 bytes, and up
# to 4 of padding a file), each file's name (JSON-escaped) and punctuation within 1 KiB.
MAX_REQUEST_BYTES = MAX_CASE_BYTES + 4 * -(-MAX_FILES_BYTES // 3) + MAX_FILES * (4 + 1024)
MAX_QUEUED_RUNS = 500
# What one request may ask of a shared service: reports in a triage, stored cases in a sweep
# (a store holding more is swept in parts: a sweep's `offset`).
MAX_TRIAGE_REPORTS = 200
MAX_SWEEP_CASES = 200
# An issue's number (GitHub's largest trackers are near 250,000): a known issue's key.
MAX_ISSUE_NUMBER = 10_000_000
# One submitter's share of the service (docs/api.md, "Submitters and budgets"): waiting runs
# per environment (half a queue, so that one client cannot fill it alone, and a whole triage
# of MAX_TRIAGE_REPORTS fits), and bytes stored in SUBMITTER_WINDOW_S (about six requests of
# MAX_REQUEST_BYTES a day).
MAX_SUBMITTER_RUNS = MAX_QUEUED_RUNS // 2
MAX_SUBMITTER_BYTES = 256 << 20
SUBMITTER_WINDOW_S = 86400.0
# The reports (of a triage) or stored cases (of a sweep) that one read of a job shows.
DEFAULT_PARTS_PAGE = 50
MAX_PARTS_PAGE = 500
# Where the issues that triage names live: a known issue links only there.
DEFAULT_TRACKER_URL = "https://github.com/apache/tvm"
MIN_TOKEN_CHARS = 16
MAX_DELIVERIES = 3
# Characters of IR that one job's runs may store in all (each run's own is capped too:
# worker/runner.py); past it a run's IR is not stored, and a marker says so (tvmrepro.jobs.stored_ir).
JOB_IR_CAP = 256 << 20
SANDBOX_PIDS = 256
SANDBOX_CPUS = 2.0  # CPU quota of a Docker sandbox (cores)
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
API_WORKERS = 2  # gunicorn processes (each with API_THREADS threads)
API_THREADS = 4
# How long one request may take to arrive whole (its line, headers and body) once its first
# byte has: a slow or stalled client holds one of the API's threads at most this long.
READ_TIMEOUT_S = 10.0
# The API's front (service/front.py): connections one client (an address, an IPv6 /64) may
# hold at once, and all clients together.
FRONT_CLIENT_CONNECTIONS = 64
FRONT_CONNECTIONS = 4096
# A run that waits this long for a worker ends as infra_error (Expired): a job for an
# environment no worker serves does not hold its place in the queue for ever.
WAIT_EXPIRY_S = 86400.0
# Runs at once per worker; 0: one per core, at least 2, at most one per default memory limit
# (tvmrepro.queue.worker_concurrency), so one long run never holds a whole worker.
WORKER_CONCURRENCY = 0
# Runs of one lane (environment, short or long) published to the broker and not done; 0: twice
# the live workers' slots, at least 4 (tvmrepro.jobs.release: fair release between submitters).
RELEASE_WINDOW = 0
# A message unacknowledged this long is handed out again by Redis: above the longest run.
VISIBILITY_TIMEOUT_S = MAX_TIMEOUT_S + 600
# A worker that stops reporting for this long no longer counts as serving its environments.
# It reports in every sweep of its recovery step (RECONCILE_INTERVAL_S).
WORKER_STALE_S = 30.0
# The worker's recovery sweep: how often it looks for runs the broker lost, and how long a
# waiting run may go unclaimed before it is published again (a duplicate is harmless).
RECONCILE_INTERVAL_S = 5.0
REQUEUE_AFTER_S = 600.0
# A claimed run whose claimer is silent this long past its own time limit was lost.
CLAIM_GRACE_S = 60.0
# Warm sandboxes: how many each runtime keeps waiting per environment (each worker process
# has its own runtime, so a worker keeps `concurrency` of them per environment), and how
# long one may wait unused before it is stopped.
WARM_SANDBOXES = 1
WARM_IDLE_S = 900.0
ENV_PREFIX = "TVMREPRO_"
# Where the frontend flavours' torch comes from when TVMREPRO_TORCH_SOURCE is unset and pip has
# no folder of wheels (PIP_FIND_LINKS): PyTorch's own index of CPU builds (PyPI's x86_64 torch
# is a CUDA build of several GB).
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"

# The GitHub bot (tvmrepro/bot/, docs/bot.md): GitHub's REST API, the author associations
# whose commands it takes, the passing checks before it asks to confirm a fix, and how long
# reports of one signature are answered as one group.
DEFAULT_GITHUB_API_URL = "https://api.github.com"
DEFAULT_GITHUB_ASSOCIATIONS = "OWNER,MEMBER,COLLABORATOR"
GITHUB_FIXED_SWEEPS = 2
GITHUB_FLOOD_WINDOW_S = 86400.0
GITHUB_RETRY_BACKOFF_S = 30.0  # a failed follow-up's first wait (doubled after each try)

# Settings whose value an error never shows.
_SECRETS = ("maintainer_token", "github_webhook_secret", "github_token")
# How a value that does not parse is described (pydantic's error type -> words).
_PROBLEMS = {"int_parsing": "not an integer", "int_from_float": "not an integer",
             "float_parsing": "not a number", "bool_parsing": "not a boolean"}


class Settings(BaseModel):
    """Everything tvm-repro can be configured with; `from_env()` is the one reader.

    Keyword construction (`Settings(home=...)`) takes the keywords and the defaults only.
    """

    # validate_default: the defaults pass the same constraints and validators as values read.
    model_config = ConfigDict(frozen=True, extra="ignore", validate_by_name=True,
                              validate_default=True)

    home: Path = DEFAULT_HOME
    # TVMREPRO_SERVER; unset, a client finds the service itself (cli.discovery.find_service).
    server: str | None = None
    redis_url: str | None = Field(default=None, validation_alias="REDIS_URL")
    redis_prefix: str = ""  # prepended to every Redis key: deployments can share one Redis
    database_url: str | None = Field(default=None, validation_alias="DATABASE_URL")
    runtime: str = DEFAULT_RUNTIME  # a name in worker.runtimes.RUNTIMES, checked when one is made
    docker_host: str | None = Field(default=None, validation_alias="DOCKER_HOST")
    # Wheels that provisioning and image builds may install from (offline builds).
    wheelhouse: Path | None = None
    # The base image that image builds use instead of the recipes' official one (where no
    # registry can be reached): e.g. a local stand-in of python:3.11-slim.
    base_image: str | None = None
    # Where the frontend flavours' torch (a CPU build) is installed from: an index URL or a
    # folder of wheels. Unset: pip's own folder (PIP_FIND_LINKS), else TORCH_CPU_INDEX.
    torch_source: str | None = None
    # Where downloaded packages are kept (default: under the home); homes can share one.
    package_cache: Path | None = None
    # The artifact store (tvmrepro.store.artifacts): the store's values of 256 KiB or more, in
    # a folder every host of a deployment shares (default: under the home).
    artifacts: Path | None = None
    # Finished jobs older than this many days are removed with their artifacts by the
    # workers' recovery sweep (tvmrepro.store.retention); 0 keeps every job.
    retention_days: float = Field(default=0.0, ge=0)
    log_cap_bytes: int = Field(default=LOG_CAP_BYTES, gt=0)
    max_request_bytes: int = Field(default=MAX_REQUEST_BYTES, gt=0)
    max_queued_runs: int = Field(default=MAX_QUEUED_RUNS, ge=0)
    max_triage_reports: int = Field(default=MAX_TRIAGE_REPORTS, gt=0)
    max_sweep_cases: int = Field(default=MAX_SWEEP_CASES, gt=0)
    max_submitter_runs: int = Field(default=MAX_SUBMITTER_RUNS, ge=0)
    max_submitter_bytes: int = Field(default=MAX_SUBMITTER_BYTES, ge=0)
    # The header a reverse proxy in front of the API sets to the client's address (e.g.
    # X-Real-IP); unset, a submitter is the connection's own address.
    client_header: str = ""
    # The token (TVMREPRO_MAINTAINER_TOKEN) whose bearer's triages keep the service's known
    # issues (`Authorization: Bearer ...`); unset, no triage of the service keeps them.
    maintainer_token: str | None = Field(default=None, min_length=MIN_TOKEN_CHARS, repr=False)
    tracker_url: str = DEFAULT_TRACKER_URL
    max_deliveries: int = Field(default=MAX_DELIVERIES, gt=0)
    job_ir_cap: int = Field(default=JOB_IR_CAP, ge=0)
    sandbox_pids: int = Field(default=SANDBOX_PIDS, gt=0)
    sandbox_cpus: float = Field(default=SANDBOX_CPUS, gt=0)
    host: str = DEFAULT_HOST
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    api_workers: int = Field(default=API_WORKERS, gt=0)
    api_threads: int = Field(default=API_THREADS, gt=0)
    read_timeout_s: float = Field(default=READ_TIMEOUT_S, gt=0)
    # An event-driven front holds the clients' connections and hands gunicorn whole requests
    # (service/front.py); off (TVMREPRO_FRONT=0) behind a proxy that does so (compose's nginx).
    front: bool = True
    front_client_connections: int = Field(default=FRONT_CLIENT_CONNECTIONS, gt=0)
    front_connections: int = Field(default=FRONT_CONNECTIONS, gt=0)
    # Host names (comma-separated) the API answers to besides localhost's and the address it
    # is bound to, e.g. "repro.example.org,api"; "*" answers any (behind a proxy that checks).
    allowed_hosts: str = ""
    wait_expiry_s: float = Field(default=WAIT_EXPIRY_S, gt=0)
    worker_concurrency: int = Field(default=WORKER_CONCURRENCY, ge=0)
    release_window: int = Field(default=RELEASE_WINDOW, ge=0)
    visibility_timeout_s: int = Field(default=VISIBILITY_TIMEOUT_S, gt=0)
    worker_stale_s: float = Field(default=WORKER_STALE_S, gt=0)
    reconcile_interval_s: float = Field(default=RECONCILE_INTERVAL_S, gt=0)
    requeue_after_s: float = Field(default=REQUEUE_AFTER_S, gt=0)
    claim_grace_s: float = Field(default=CLAIM_GRACE_S, ge=0)
    warm_sandboxes: int = Field(default=WARM_SANDBOXES, ge=0)
    warm_idle_s: float = Field(default=WARM_IDLE_S, gt=0)
    # apache/tvm's history for the commit windows and suspects of bisections: a commit index
    # (JSON lines), a git repository, or a URL cloned once into the home (tvmrepro.history).
    tvm_history: str | None = None
    # The local runtime gives each run a cgroup of its own (memory, CPU share, processes) where
    # it can (worker/runtimes/cgroup.py); 0 turns that off.
    run_cgroups: bool = True
    # The GitHub bot (docs/bot.md): the App's webhook secret (unset: the webhook answers 404),
    # its REST API, and how it authenticates: a token, or the App's id and private key (a PEM
    # file) for an installation token.
    github_webhook_secret: str | None = Field(default=None, min_length=MIN_TOKEN_CHARS, repr=False)
    github_api_url: str = DEFAULT_GITHUB_API_URL
    github_token: str | None = Field(default=None, repr=False)
    github_app_id: str | None = None
    github_private_key: Path | None = None
    github_bot_name: str = Field(default="tvm-repro", pattern=r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}$")
    # Comma-separated author associations whose commands the bot takes (and the issue's author).
    github_allowed_associations: str = DEFAULT_GITHUB_ASSOCIATIONS
    github_fixed_sweeps: int = Field(default=GITHUB_FIXED_SWEEPS, gt=0)
    github_flood_window_s: float = Field(default=GITHUB_FLOOD_WINDOW_S, gt=0)
    github_retry_backoff_s: float = Field(default=GITHUB_RETRY_BACKOFF_S, gt=0)
    # Where the bot's comments link the job pages (this service as the world reaches it).
    public_url: str = DEFAULT_SERVER

    @field_validator("tracker_url")
    @classmethod
    def _tracker(cls, value: str) -> str:
        if not re.fullmatch(r"https?://[\w.-]+(:\d+)?(/[\w.~-]+)*/?", value):
            raise ValueError("not an http(s) address of a tracker, such as "
                             f"{DEFAULT_TRACKER_URL}")
        return value.rstrip("/")

    @field_validator("github_api_url", "public_url")
    @classmethod
    def _address(cls, value: str) -> str:
        if not re.fullmatch(r"https?://[\w.-]+(:\d+)?(/[\w.~-]+)*/?", value):
            raise ValueError("not an http(s) address")
        return value.rstrip("/")

    @field_validator("home", "wheelhouse", "package_cache", "artifacts", "github_private_key")
    @classmethod
    def _expand(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read settings from environment variables (os.environ by default); BadInput names one."""
        # Upper-cased, so that a variable matches in any case; empty ones count as unset.
        given = {name.upper(): value for name, value in
                 (os.environ if environ is None else environ).items() if value}
        values = {field: given[variable] for field in cls.model_fields
                  if (variable := variable_name(field)) in given}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise _bad_variable(exc) from exc

    def ensure_home(self) -> Path:
        """Create TVMREPRO_HOME if it is missing; a fault names the path and why it failed."""
        try:
            self.home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ReproError(f"cannot create TVMREPRO_HOME {self.home}: {exc.strerror}") from exc
        return self.home

    def torch_wheels(self) -> str:
        """Where torch's CPU build is installed from (see torch_source)."""
        if self.torch_source:
            return self.torch_source
        pip_folders = os.environ.get("PIP_FIND_LINKS", "").split()
        return pip_folders[0] if pip_folders else TORCH_CPU_INDEX

    @property
    def envs_dir(self) -> Path:
        """Where provisioned environments live."""
        return self.home / "envs"

    @property
    def cache_dir(self) -> Path:
        """The package cache shared by all environments (one download per wheel)."""
        return self.package_cache or self.home / "uv-cache"

    @property
    def artifacts_dir(self) -> Path:
        """The artifact store's folder: TVMREPRO_ARTIFACTS, else under TVMREPRO_HOME."""
        return self.artifacts or self.home / "artifacts"

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


def variable_name(field: str) -> str:
    """The environment variable a Settings field is read from (e.g. port -> TVMREPRO_PORT)."""
    info: FieldInfo | None = Settings.model_fields.get(field)
    alias = info.validation_alias if info is not None else None
    if isinstance(alias, str):
        return alias
    return ENV_PREFIX + field.upper()


def _bad_variable(exc: ValidationError) -> BadInput:
    error: dict[str, Any] = dict(exc.errors()[0])
    located = str(error["loc"][0]) if error["loc"] else ""
    field = next((name for name in Settings.model_fields if variable_name(name) == located
                  or name == located.lower().removeprefix(ENV_PREFIX.lower())), located)
    problem = _PROBLEMS.get(error["type"], str(error["msg"]).lower())
    if field in _SECRETS:  # an error message must not carry the secret
        return BadInput(variable_name(field), problem)
    return BadInput(variable_name(field), f"{problem}: {error.get('input')!r}")
