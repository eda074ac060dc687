"""The sandbox's supervisor: trusted code that holds the result channel; the case runs in a child.

`python -m harness --events fd:N` starts here. The supervisor imports TVM and
the harness (a warm sandbox pays that before a case exists), says `ready` on
the channel, then waits for one request on stdin:

    <length>\\n<request JSON: {"case": ..., "variant": ...}><key hex>\\n

It reads exactly the request, forks, and only then reads the key: the child
(which runs the case with the instrumentation) never holds the key in memory,
never holds the channel (closed right after the fork) and sends its events
over a pipe. The supervisor is not dumpable (PR_SET_DUMPABLE 0), so the
same-uid child can neither ptrace it nor read its memory. It clips and relays
the child's events, each line signed with the key, and ends with a signed
`exit` event carrying the child's exit status, signal and resource use; then
it exits as the child did. The runtime keeps only lines signed with the key it
sent: whatever the case writes anywhere else is not an event.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import hashlib
import hmac
import io
import json
import os
import resource
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

PR_SET_DUMPABLE = 4
MAX_REQUEST_BYTES = 64 << 20
EVENT_LINE_CAP = 8 << 20  # one relayed event line, at most (IR of one pass, a reproducer)
FIELD_CAP = 2000  # a short field (a stage, an error type, a name), at most
SHORT_FIELDS = ("stage", "status", "error_type", "signature_frame", "name", "pass_path")
RESERVED = ("exit", "ready", "usage", "dropped")  # events only the supervisor says
# What the child may have relayed, in all: past it, its events are dropped (counted in a
# `dropped` event) but for its last `result`, relayed at the end. The runtimes read 64 MiB of
# events: this, one result line (EVENT_LINE_CAP) and the supervisor's own stay below it.
RELAY_BUDGET = 32 << 20
RELAY_EVENTS_CAP = 20000
Runner = Callable[[dict[str, Any], str, str], None]  # request, events target, workdir


def sign(key: bytes, body: str) -> str:
    """The MAC of one event line's body."""
    return hmac.new(key, body.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


class Channel:
    """The result channel: an inherited descriptor (fd:N) or a file, moved out of the case's reach."""

    def __init__(self, target: str) -> None:
        if target.startswith("fd:"):
            inherited = int(target[3:])
            self.fd = os.dup2(inherited, 1000 + os.getpid() % 500)
            os.close(inherited)
        else:
            self.fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.set_inheritable(self.fd, False)
        self.key: bytes | None = None
        self.seq = 0
        self.lock = threading.Lock()

    def write(self, event: dict[str, Any]) -> None:
        """One event line: signed once the key is known (`ready` alone goes before it)."""
        with self.lock:
            self.seq += 1
            body = json.dumps({**event, "seq": self.seq}, default=str)
            line = body if self.key is None else json.dumps({"body": body,
                                                             "mac": sign(self.key, body)})
            data = (line + "\n").encode("utf-8", "surrogatepass")
            while data:
                data = data[os.write(self.fd, data):]


def _nondumpable() -> None:
    """No ptrace, no /proc/<pid>/mem for the same-uid child."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def _read_exact(fd: int, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            raise EOFError("stdin closed before the whole request came")
        data += chunk
    return bytes(data)


def _read_line(fd: int, cap: int = 64) -> bytes:
    """One short line, byte by byte: nothing past it is read into this process."""
    data = bytearray()
    while not data.endswith(b"\n"):
        if len(data) > cap:
            raise ValueError("line too long")
        data += _read_exact(fd, 1)
    return bytes(data[:-1])


def read_request(fd: int = 0) -> dict[str, Any]:
    """The request (case and variant), read exactly: the key after it stays in the pipe."""
    size = int(_read_line(fd))
    if not 0 < size <= MAX_REQUEST_BYTES:
        raise ValueError(f"request of {size} bytes")
    request: dict[str, Any] = json.loads(_read_exact(fd, size))
    return request


def clip(event: Any) -> dict[str, Any] | None:
    """A child's event made safe to relay: a dict with an event name, short fields clipped."""
    if not isinstance(event, dict) or not isinstance(event.get("event"), str):
        return None
    if event["event"] in RESERVED:
        return None
    for name in SHORT_FIELDS:
        value = event.get(name)
        if isinstance(value, str) and len(value) > FIELD_CAP:
            event[name] = value[:FIELD_CAP] + "…[clipped]"
    return event


class Relay:
    """The child's event lines to the channel, within RELAY_BUDGET bytes and RELAY_EVENTS_CAP
    events; past them only the last `result` is kept (written by `finish`), so a run that
    floods its events (IR snapshots, say) still ends with its own result and exit."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.lock = threading.Lock()
        self.relayed = self.events = self.dropped = 0
        self.pending: dict[str, Any] | None = None  # the last result past the budget
        self.closed = False

    def take(self, event: dict[str, Any], size: int) -> None:
        """Relay one event, or keep it back (a result) or count it (anything else)."""
        with self.lock:
            if self.closed:
                return
            if self.relayed + size <= RELAY_BUDGET and self.events < RELAY_EVENTS_CAP:
                self.relayed += size
                self.events += 1
                self.channel.write(event)
            elif event["event"] == "result":
                self.pending = event
            else:
                self.dropped += 1

    def run(self, pipe_fd: int) -> None:
        """Relay until the pipe closes; a line past the cap is cut off."""
        with os.fdopen(pipe_fd, "rb") as pipe:
            while line := pipe.readline(EVENT_LINE_CAP):
                if not line.endswith(b"\n"):  # longer than the cap: skip the rest of it
                    while (rest := pipe.readline(EVENT_LINE_CAP)) and not rest.endswith(b"\n"):
                        pass
                    continue
                try:
                    event = clip(json.loads(line.decode("utf-8", "surrogateescape")))
                except ValueError:
                    continue
                if event is not None:
                    self.take(event, len(line))

    def finish(self) -> None:
        """Stop relaying; write the result kept back and what was dropped."""
        with self.lock:
            self.closed = True
            if self.pending is not None:
                self.channel.write(self.pending)
            if self.dropped:
                self.channel.write({"event": "dropped", "events": self.dropped,
                                    "budget_bytes": RELAY_BUDGET})


def _child(channel: Channel, pipe: tuple[int, int], request: dict[str, Any],
           workdir: str, runner: Runner) -> None:
    """In the child: drop the channel and stdin, take the case's limits, run it (never returns)."""
    try:
        os.close(channel.fd)
        os.close(pipe[0])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.setpgid(0, 0)  # its own group: the supervisor's stays out of a killpg(0) of the case
        # What the case prints goes out at once: a run killed at its time limit keeps it.
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, io.TextIOWrapper):
                stream.reconfigure(line_buffering=True)
        for name, value in (request.get("rlimits") or {}).items():
            limit = getattr(resource, name)
            _, hard = resource.getrlimit(limit)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(limit, (value, value))
        runner(request, f"fd:{pipe[1]}", workdir)
    finally:
        os._exit(70)


# Where the kernel counts OOM kills of this sandbox's memory cgroup (v2, then v1).
OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")


def oom_kills() -> int | None:
    """How many processes the kernel's OOM killer ended in this cgroup (None: not visible)."""
    for path in OOM_COUNTERS:
        try:
            with open(path) as counters:
                for line in counters:
                    name, _, value = line.partition(" ")
                    if name == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def vm_peak_kb(pid: int) -> int | None:
    """The process's peak address space (the kernel's VmPeak, which it cannot forge)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmPeak:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


class AddressSpaceWatch:
    """The child's peak address space, sampled while it lives (a dead process has none left
    to read): with its RLIMIT_AS, the evidence that a MemoryError met the limit."""

    INTERVAL_S = 0.02

    def __init__(self, pid: int) -> None:
        self.pid, self.peak_kb, self.done = pid, 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            peak = vm_peak_kb(self.pid)
            if peak is None:
                return
            self.peak_kb = max(self.peak_kb, peak)
            self.done.wait(self.INTERVAL_S)

    def stop(self) -> int | None:
        self.done.set()
        self.thread.join(timeout=1)
        return self.peak_kb or None


def _exit_event(status: int, usage: Any, kills_before: int | None) -> dict[str, Any]:
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    kills_after = oom_kills()
    return {"event": "exit", "returncode": os.waitstatus_to_exitcode(status),
            "signal": signal.Signals(sig).name if sig else None,
            "maxrss_kb": usage.ru_maxrss,
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3),
            # The engine may not flag a container whose child (not its PID 1) was OOM-killed.
            "oom_kills": (kills_after - kills_before
                          if kills_after is not None and kills_before is not None else None)}


def warm_frozen(warm: Callable[[], None]) -> None:
    """Import what every run needs, then freeze it for the collector.

    What the imports make (about 90,000 objects with TVM) lives as long as the process: the
    collector stays off while they run (a tenth of the import), then it is frozen: the child's
    collections skip it (a TVMScript parse triggers many; 10-20% of a case's time) and leave
    its pages shared instead of copying them on the fork. The collector is enabled again in
    the case's process (serve_warm).
    """
    gc.disable()
    warm()
    gc.freeze()


def serve(target: str, workdir: str, warm: Callable[[], None], runner: Runner) -> None:
    """Warm up, wait for one request, run it in a child, report; exit as the child did."""
    channel = Channel(target)
    _nondumpable()
    warm_frozen(warm)
    serve_warm(channel, workdir, runner)


def serve_warm(channel: Channel, workdir: str, runner: Runner) -> None:
    """Say ready, wait for one request, run it in a child, report; exit as the child did."""
    channel.write({"event": "ready"})
    request = read_request(0)
    kills_before = oom_kills()
    pipe = os.pipe()
    pid = os.fork()
    gc.enable()  # the case runs with the collector on, as in a plain run
    if pid == 0:
        _child(channel, pipe, request, workdir, runner)
    os.close(pipe[1])
    channel.key = bytes.fromhex(_read_line(0, 256).decode())
    relay = Relay(channel)
    relaying = threading.Thread(target=relay.run, args=(pipe[0],), daemon=True)
    relaying.start()
    watch = AddressSpaceWatch(pid)
    _, status, usage = os.wait4(pid, 0)
    vm_peak = watch.stop()
    # What the child sent before it died is relayed; its orphans may hold the pipe open.
    relaying.join(timeout=2)
    relay.finish()
    ended = _exit_event(status, usage, kills_before)
    # The child's resource use once more as an event of its own (the runtimes hand the worker
    # every event but `exit`): the evidence an `oom` needs (worker/runner.py, oom_evidence).
    address_space = (request.get("rlimits") or {}).get("RLIMIT_AS")
    channel.write({"event": "usage", **{k: ended[k] for k in ("maxrss_kb", "cpu_seconds",
                                                               "oom_kills")},
                   "vm_peak_kb": vm_peak,
                   "as_limit_kb": address_space >> 10 if isinstance(address_space, int) else None})
    channel.write(ended)
    sys.stdout.flush()
    sys.stderr.flush()
    if os.WIFSIGNALED(status):
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status))
