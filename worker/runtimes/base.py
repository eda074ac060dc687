"""What every runtime takes (a SandboxJob) and gives back (an Execution)."""

from __future__ import annotations

import json
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from tvmrepro.environments import Environment

HARNESS_TIMEOUT_GRACE_S = 5
FILE_SIZE_CAP = 512 << 20  # largest file a run may write (RLIMIT_FSIZE / ulimit fsize)


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


class CappedReader(threading.Thread):
    """Drains a stream to its end, keeping only the first `cap` bytes (an output flood is cut)."""

    def __init__(self, stream: IO[bytes], cap: int) -> None:
        super().__init__(daemon=True)
        self.stream, self.cap = stream, cap
        self.kept = bytearray()
        self.truncated = False

    def run(self) -> None:
        """Read until EOF."""
        while chunk := self.stream.read(65536):
            room = self.cap - len(self.kept)
            if len(chunk) > room:
                self.truncated = True
            if room > 0:
                self.kept += chunk[:room]

    def text(self) -> str:
        """What was kept, decoded."""
        return self.kept.decode(errors="replace")
