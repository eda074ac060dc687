"""What every runtime takes (a SandboxJob), gives back (an Execution), limits and caps."""

from __future__ import annotations

import json
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from tvmrepro.environments import Environment
from tvmrepro.settings import Settings

HARNESS_TIMEOUT_GRACE_S = 5  # CPU time beyond the wall-clock limit (RLIMIT_CPU is the backstop)
FILE_SIZE_CAP = 512 << 20  # largest file a run may write (RLIMIT_FSIZE / ulimit fsize)
TMPFS_MAX_MB = 1024  # the sandbox's /tmp: its memory limit, at most this
OPEN_FILES_CAP = 4096


@dataclass(frozen=True)
class SandboxJob:
    """One harness invocation: a case (target and limits filled in), a variant, an environment."""

    run_id: str
    job_id: str
    env: Environment
    case: dict[str, Any]
    variant: str

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

    @classmethod
    def of(cls, job: SandboxJob, settings: Settings) -> Limits:
        """The limits of `job` (its case's memory and time) under these settings."""
        return cls(memory_mb=job.memory_mb, timeout_s=job.timeout_s, pids=settings.sandbox_pids,
                   cpus=settings.sandbox_cpus, tmpfs_mb=min(job.memory_mb, TMPFS_MAX_MB),
                   cpu_seconds=job.timeout_s + HARNESS_TIMEOUT_GRACE_S)

    def summary(self) -> dict[str, Any]:
        """What a result's `isolation` says of them."""
        return {"memory_mb": self.memory_mb, "timeout_s": self.timeout_s, "pids": self.pids}


@dataclass
class Execution:
    """What came back from the sandbox: events, exit, output."""

    events: list[dict[str, Any]]
    returncode: int | None
    signal: str | None = None
    timed_out: bool = False
    oom_killed: bool = False
    stdout: str = ""
    stderr: str = ""
    truncated: bool = False
    seconds: float = 0.0
    isolation: dict[str, Any] = field(default_factory=dict)


class Runtime(Protocol):
    """Runs the harness for a SandboxJob somewhere isolated."""

    name: str

    def execute(self, job: SandboxJob) -> Execution:
        """Run it and return what happened; raise RuntimeFault only for its own failures."""
        ...

    def fingerprint(self, env: Environment) -> dict[str, Any]:
        """What env's TVM has here (version, python, libinfo, pass names); RuntimeFault if none."""
        ...


def signal_name(number: int) -> str:
    """'SIGSEGV' for 11, and so on."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def parse_events(data: bytes) -> list[dict[str, Any]]:
    """JSON lines into events; a torn last line (the process was killed mid-write) is dropped."""
    events = []
    for line in data.decode(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and "event" in event:
            events.append(event)
    return events


def read_events(path: Path) -> list[dict[str, Any]]:
    """The events in a file (none if it is missing)."""
    try:
        return parse_events(path.read_bytes())
    except OSError:
        return []


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
        """Read until EOF."""
        while chunk := self.stream.read(65536):
            self.output.keep(chunk)
