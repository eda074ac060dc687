"""What every runtime takes (a SandboxJob), gives back (an Execution), limits and caps."""

from __future__ import annotations

import contextlib
import json
import resource
import secrets
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any, Protocol, TypedDict

from tvmrepro.environments import Environment
from tvmrepro.settings import DEFAULT_MEMORY_MB, MAX_TIMEOUT_S, Settings
from worker.runtimes.events import Event
from worker.runtimes.gpu import wants_gpu
from worker.runtimes.isolation import Isolation, LimitsSummary

HARNESS_TIMEOUT_GRACE_S = 5  # CPU time beyond the wall-clock limit (RLIMIT_CPU is the backstop)
FILE_SIZE_CAP = 512 << 20  # largest file a run may write (RLIMIT_FSIZE / ulimit fsize)
TMPFS_MAX_MB = 1024  # the sandbox's /tmp: its memory limit, at most this
OPEN_FILES_CAP = 4096
WORKDIR_INODES = 65536  # files and directories a run may make in its work directory
TMPFS_INODES = 65536  # and in each of its /tmp and /dev/shm (an inode is unaccounted memory)
PTYS_MAX = 64  # pseudo-terminals a run may hold (its own devpts instance): the host has ~4096
EVENTS_READ_CAP = 64 << 20  # what is read of the events channel
CANCEL_POLL_S = 1.0  # how often a runtime waiting for a run asks whether its job was cancelled


class Fingerprint(TypedDict, total=False):
    """What an environment's TVM has here (provision.TVM_FACTS_PROBE's facts, with the
    environment's id, pins and, in the Docker runtime, image)."""

    id: str
    packages: dict[str, str]
    image: str
    version: str
    python: str
    libinfo: dict[str, str]
    passes: list[str]
    commit: str | None
    health: dict[str, str | None]
    canary: str


class TvmFacts(TypedDict, total=False):
    """A result's `tvm`: the facts of a fingerprint that say which TVM ran."""

    version: str
    libinfo: dict[str, str]
    packages: dict[str, str]
    python: str
    commit: str | None
    # What the wheel can do (worker.environments.health): capability -> None or its error.
    health: dict[str, str | None]


def never_cancelled() -> bool:
    """The cancel check of a run that no job can cancel (a local run, a test)."""
    return False


@dataclass(frozen=True)
class SandboxJob:
    """One harness invocation: a case (target and limits filled in), a variant, an environment."""

    run_id: str
    job_id: str
    env: Environment
    case: dict[str, Any]
    variant: str
    # Whether the run's job was cancelled: asked every CANCEL_POLL_S while the run goes; a
    # cancelled run's sandbox is killed at once and its slot freed.
    cancelled: Callable[[], bool] = field(default=never_cancelled, compare=False, repr=False)

    @property
    def timeout_s(self) -> int:
        """Wall-clock limit for the whole run."""
        return int(self.case["timeout_s"])

    @property
    def memory_mb(self) -> int:
        """Memory limit of the sandbox."""
        return int(self.case["memory_mb"])


@dataclass(frozen=True)
class Limits:
    """Every resource limit of one sandbox, whichever runtime applies it."""

    memory_mb: int
    timeout_s: int
    pids: int
    cpus: float
    tmpfs_mb: int
    cpu_seconds: int
    open_files: int = OPEN_FILES_CAP
    file_size: int = FILE_SIZE_CAP
    # Each process's memory is capped at memory_mb by RLIMIT_AS (the address space), but a GPU
    # run's by RLIMIT_DATA (its heap and private writable mappings): the CUDA driver reserves
    # address space for unified memory far past any such limit when it starts (cuInit fails
    # under RLIMIT_AS), with inaccessible mappings RLIMIT_DATA does not count. The run's cgroup,
    # where one can be made, caps all its processes together either way.
    address_space_cap: bool = True

    @classmethod
    def of(cls, job: SandboxJob, settings: Settings) -> Limits:
        """The limits of `job` (its case's memory and time) under these settings."""
        return cls(memory_mb=job.memory_mb, timeout_s=job.timeout_s, pids=settings.sandbox_pids,
                   cpus=settings.sandbox_cpus, tmpfs_mb=min(job.memory_mb, TMPFS_MAX_MB),
                   cpu_seconds=job.timeout_s + HARNESS_TIMEOUT_GRACE_S,
                   address_space_cap=not wants_gpu(job.env))

    def summary(self) -> LimitsSummary:
        """What a result's `isolation` says of them."""
        return {"memory_mb": self.memory_mb, "timeout_s": self.timeout_s, "pids": self.pids}

    @classmethod
    def pooled(cls, settings: Settings, env: Environment | None = None) -> Limits:
        """What a warm sandbox of env (a CPU one when None) starts with: the default memory, the
        longest time a case may ask."""
        return cls(memory_mb=DEFAULT_MEMORY_MB, timeout_s=MAX_TIMEOUT_S, pids=settings.sandbox_pids,
                   cpus=settings.sandbox_cpus, tmpfs_mb=min(DEFAULT_MEMORY_MB, TMPFS_MAX_MB),
                   cpu_seconds=MAX_TIMEOUT_S + HARNESS_TIMEOUT_GRACE_S,
                   address_space_cap=env is None or not wants_gpu(env))

    def covers(self, other: Limits) -> bool:
        """Whether a sandbox started with these limits can run a case with `other`'s.

        The supervisor lowers the child's address space and CPU time to the case's; the
        rest (processes, /tmp and work directory sizes) are the sandbox's and must match.
        """
        return (self.memory_mb >= other.memory_mb and self.cpu_seconds >= other.cpu_seconds
                and (self.pids, self.tmpfs_mb, self.cpus, self.address_space_cap)
                == (other.pids, other.tmpfs_mb, other.cpus, other.address_space_cap))

    def memory_rlimit(self) -> dict[str, int]:
        """The rlimit capping each process's memory: RLIMIT_AS, or a GPU run's RLIMIT_DATA."""
        return {"RLIMIT_AS" if self.address_space_cap else "RLIMIT_DATA": self.memory_mb << 20}

    def child_rlimits(self) -> dict[str, int]:
        """What the supervisor sets on the case's child (resource module names)."""
        return {**self.memory_rlimit(), "RLIMIT_CPU": self.cpu_seconds}


@dataclass
class Execution:
    """What came back from the sandbox: events, exit, output."""

    events: list[Event]
    returncode: int | None
    signal: str | None = None
    timed_out: bool = False
    cancelled: bool = False  # killed because its job was cancelled
    oom_killed: bool = False
    stdout: str = ""
    stderr: str = ""
    truncated: bool = False
    seconds: float = 0.0
    isolation: Isolation = field(default_factory=Isolation)
    # What the runtime knows of the environment's TVM (its fingerprint), never what the run says.
    tvm: TvmFacts | None = None


class Runtime(Protocol):
    """Runs the harness for a SandboxJob somewhere isolated."""

    name: str

    def execute(self, job: SandboxJob) -> Execution:
        """Run it and return what happened; raise RuntimeFault only for its own failures."""
        ...

    def fingerprint(self, env: Environment) -> Fingerprint:
        """What env's TVM has here (version, python, libinfo, pass names); RuntimeFault if none."""
        ...

    def prewarm(self, envs: list[Environment], processes: int = 1) -> None:
        """Keep sandboxes of `envs` warm for the runs to come (`processes`: how many of the
        worker's processes share the machine: fewer warm ones each at start)."""
        ...

    def reserve(self, env: Environment, timeout_s: int, memory_mb: int, count: int = 1) -> None:
        """Start `count` sandboxes for env's next runs with these limits now, without waiting."""
        ...

    def start_zygotes(self, envs: list[Environment]) -> None:
        """For a one-shot command of many runs: what lets `envs`' sandboxes share one TVM import
        each, started now (nothing where the runtime has no such thing)."""
        ...

    def close(self) -> None:
        """Give back what it holds (waiting sandboxes or containers, its cgroup)."""
        ...


def asked_cancelled(job: SandboxJob) -> bool:
    """Whether the run's job was cancelled; a check that fails (the store away) says no."""
    try:
        return job.cancelled()
    except Exception:
        return False


def wait_cancellable(exited: Callable[[float], bool], job: SandboxJob,
                     deadline: float) -> tuple[bool, bool]:
    """Wait for a run, in slices of CANCEL_POLL_S, until `exited(timeout_s)` says it ended or
    `deadline` passes; (timed out, cancelled): a cancelled job's run is given up within
    CANCEL_POLL_S (the caller kills it either way)."""
    while True:
        left = deadline - time.monotonic()
        if exited(max(0.05, min(left, CANCEL_POLL_S))):
            return False, False
        if left <= CANCEL_POLL_S:
            return True, False
        if asked_cancelled(job):
            return False, True


class CancelCheck:
    """asked_cancelled for a runtime's loops that poll faster than that: asks at most every
    CANCEL_POLL_S (a sandbox still importing TVM, a container getting ready), and once
    cancelled stays so."""

    def __init__(self, job: SandboxJob) -> None:
        self.job, self.next, self.seen = job, 0.0, False

    def __call__(self) -> bool:
        now = time.monotonic()
        if not self.seen and now >= self.next:
            self.next = now + CANCEL_POLL_S
            self.seen = asked_cancelled(self.job)
        return self.seen


def cancelled_before_start(isolation: Isolation) -> Execution:
    """A run whose job was cancelled before its sandbox took the case: nothing ran."""
    return Execution(events=[], returncode=None, cancelled=True, isolation=isolation)


def signal_name(number: int) -> str:
    """'SIGSEGV' for 11, and so on."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def new_key() -> bytes:
    """The key a run's supervisor signs its events with (sent after the case, after the fork)."""
    return secrets.token_bytes(32)


def handover_bytes(job: SandboxJob, limits: Limits, key: bytes) -> bytes:
    """What a waiting supervisor reads on stdin: the request (length-prefixed), then the key."""
    request = json.dumps({"case": job.case, "variant": job.variant,
                          "rlimits": limits.child_rlimits()}).encode()
    return b"%d\n%s%s\n" % (len(request), request, key.hex().encode())


def fingerprint_tvm(facts: Fingerprint | None) -> TvmFacts | None:
    """A result's `tvm`: the environment's version, pins and build facts from its fingerprint."""
    if not facts:
        return None
    tvm: TvmFacts = {}
    if "version" in facts:
        tvm["version"] = facts["version"]
    if "libinfo" in facts:
        tvm["libinfo"] = facts["libinfo"]
    if "packages" in facts:
        tvm["packages"] = facts["packages"]
    if "python" in facts:
        tvm["python"] = facts["python"]
    if "commit" in facts:
        tvm["commit"] = facts["commit"]
    if "health" in facts:
        tvm["health"] = facts["health"]
    return tvm


def rlimit_names(limits: Limits) -> dict[str, int]:
    """The sandbox process's own rlimits (resource module names), before its supervisor starts."""
    return {**limits.memory_rlimit(), "RLIMIT_CPU": limits.cpu_seconds,
            "RLIMIT_NPROC": limits.pids, "RLIMIT_FSIZE": limits.file_size,
            "RLIMIT_NOFILE": limits.open_files, "RLIMIT_CORE": 0}


def rlimit_setter(limits: Limits) -> dict[int, int]:
    """rlimit_names as resource constants."""
    return {getattr(resource, name): value for name, value in rlimit_names(limits).items()}


class CappedOutput:
    """The first `cap` bytes of a stream fed in chunks; `truncated` once more came."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.kept = bytearray()
        self.truncated = False

    def keep(self, chunk: bytes) -> None:
        """Keep what fits of `chunk`."""
        room = self.cap - len(self.kept)
        if len(chunk) > room:
            self.truncated = True
        if room > 0:
            self.kept += chunk[:room]

    def text(self) -> str:
        """What was kept, decoded."""
        return self.kept.decode(errors="replace")


class CappedReader(threading.Thread):
    """Drains a stream to its end, keeping only the first `cap` bytes (an output flood is cut)."""

    def __init__(self, stream: IO[bytes], cap: int) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.output = CappedOutput(cap)

    def run(self) -> None:
        """Read until EOF, then close the stream (the pipe's end is ours). A sandbox discarded
        while it waited closes its pipes under a reader still reading them: that ends the
        output as EOF would (ValueError: the file object closed; OSError: its descriptor)."""
        with contextlib.suppress(ValueError, OSError), self.stream:
            while chunk := self.stream.read(65536):
                self.output.keep(chunk)
