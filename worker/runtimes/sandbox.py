"""One local sandbox process: started, warmed up (TVM imported), handed one case, then ended.

The process is the harness's supervisor (images/harness/supervisor.py) inside
bubblewrap. Its events come back on a pipe: first an unsigned `ready` once TVM
is imported, then, after the hand-over (the case, then a fresh key on stdin),
the lines it signed with that key. Its work directory is a tmpfs mounted for
it with a size and an inode cap; everything it holds goes when it is discarded.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Protocol

import pyseccomp

from worker.runtimes.base import (
    EVENTS_READ_CAP,
    PTYS_MAX,
    TMPFS_INODES,
    WORKDIR_INODES,
    CappedReader,
    Execution,
    Limits,
    SandboxJob,
    handover_bytes,
    signal_name,
    wait_cancellable,
)
from worker.runtimes.cgroup import RunCgroup
from worker.runtimes.events import exit_status, verified_events
from worker.runtimes.isolation import Isolation, LimitsSummary
from worker.runtimes.syscalls import sandbox_rules

READY_TIMEOUT_S = 300  # importing TVM on a loaded machine; past it the sandbox is a fault


def seccomp_filter() -> pyseccomp.SyscallFilter:
    """The sandbox's filter (syscalls.sandbox_rules, the Docker runtime's profile too):
    everything allowed but what the rules refuse."""
    rules = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    for rule in sandbox_rules():
        if pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, rule.name) < 0:
            continue  # not a system call of this architecture
        args = ([pyseccomp.Arg(0, pyseccomp.MASKED_EQ, rule.arg0_mask, rule.arg0_value)]
                if rule.arg0_mask is not None else [])
        rules.add_rule(pyseccomp.ERRNO(rule.errno_value), rule.name, *args)
    return rules


def readable_fd(write: Callable[[IO[bytes]], object]) -> int:
    """A pipe's read end holding what `write` wrote (bubblewrap reads its --args and --seccomp
    from descriptors; both are far below a pipe's buffer)."""
    read_fd, write_fd = os.pipe()
    with os.fdopen(write_fd, "wb") as out:
        write(out)
    return read_fd


def seccomp_fd() -> int:
    """A descriptor holding the compiled filter, for bubblewrap's --seccomp."""
    return readable_fd(lambda out: seccomp_filter().export_bpf(out))


def args_fd(args: list[str]) -> int:
    """A descriptor holding `args` NUL-separated, for bubblewrap's --args: its command line (and
    so /proc/1/cmdline inside) then names no host path."""
    return readable_fd(lambda out: out.write(b"".join(a.encode() + b"\0" for a in args)))


class EventsReader(CappedReader):
    """The events pipe: kept up to a cap; `ready` is set once the supervisor said so."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__(stream, EVENTS_READ_CAP)
        self.ready = threading.Event()

    def run(self) -> None:
        """Read until EOF, watching the first line for `ready`; then close the stream (one
        closed under it ends it as EOF would: CappedReader.run)."""
        with contextlib.suppress(ValueError, OSError), self.stream:
            while chunk := self.stream.read1(65536):  # type: ignore[attr-defined]
                self.output.keep(chunk)
                if not self.ready.is_set() and b"\n" in self.output.kept:
                    first = bytes(self.output.kept.split(b"\n", 1)[0])
                    if b'"event": "ready"' in first:
                        self.ready.set()


# Mounts the work directory's tmpfs, and the /tmp, /dev/shm and /dev/pts that bubblewrap binds
# (SHARED_MOUNTS, beside it: bubblewrap's own tmpfs has no inode cap, its devpts no `max`), in a
# private mount namespace, then runs the sandbox: the mounts are the sandbox's alone and go with
# it, even when the worker dies.
_MOUNT_THEN_EXEC = ('o=$1; d=$2; t=$3; p=$4; shift 4; r=$(dirname "$d"); '
                    'mount -t tmpfs -o "$o" tmpfs "$d" && mount -t tmpfs -o "$t" tmpfs "$r/tmp" '
                    '&& mount -t tmpfs -o "$t" tmpfs "$r/shm" '
                    '&& mount -t devpts -o "$p" devpts "$r/pts" || exit 97; exec "$@"')
# Beside the work directory: what the sandbox sees at /tmp, /dev/shm and /dev/pts.
SHARED_MOUNTS = (("tmp", "/tmp"), ("shm", "/dev/shm"), ("pts", "/dev/pts"))


def with_workdir_tmpfs(unshare: str | None, command: list[str], path: Path, limits: Limits,
                       uid: int) -> tuple[list[str], str]:
    """`command` run with a size- and inode-capped tmpfs at `path`; what the work directory is."""
    if unshare is None:  # not root: a plain directory, uncapped
        os.chown(path, uid, uid)
        return command, "directory (no size cap: no mount namespace here)"
    options = (f"size={limits.tmpfs_mb}m,nr_inodes={WORKDIR_INODES},mode=0700,uid={uid},gid={uid},"
               "nosuid,nodev")
    shared = f"size={limits.tmpfs_mb}m,nr_inodes={TMPFS_INODES},mode=1777,nosuid,nodev"
    ptys = f"newinstance,ptmxmode=0666,mode=620,max={PTYS_MAX},nosuid,noexec"
    for name, _ in SHARED_MOUNTS:
        (path.parent / name).mkdir(exist_ok=True)
    wrapped = [unshare, "--mount", "--propagation", "private", "--", "sh", "-c", _MOUNT_THEN_EXEC,
               "sh", options, str(path), shared, ptys, *command]
    return wrapped, workdir_summary(limits)


def workdir_summary(limits: Limits) -> str:
    """What a result's `isolation` says of a work directory mounted as a capped tmpfs."""
    return f"tmpfs size={limits.tmpfs_mb}m inodes={WORKDIR_INODES}"


class SandboxProcess(Protocol):
    """A sandbox's process as a LocalSandbox drives it: bubblewrap's (TreePopen), or one a
    zygote forked (zygote.ForkedProcess)."""

    stdin: IO[bytes] | None
    stdout: IO[bytes] | None
    stderr: IO[bytes] | None
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def kill_tree(self) -> None: ...

    def release(self) -> None: ...

    def host_pid(self) -> int | None: ...


class TreePopen(subprocess.Popen[bytes]):
    """A bubblewrap sandbox's process: killed with its whole session."""

    def kill_tree(self) -> None:
        """Kill the whole sandbox (bubblewrap's PID namespace takes everything in it along)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)

    def release(self) -> None:
        """Nothing beyond its pipes to let go."""

    def host_pid(self) -> int | None:
        """Its pid (the top of the sandbox's process tree)."""
        return self.pid


class LocalSandbox:
    """A started sandbox process waiting for its one case."""

    def __init__(self, proc: SandboxProcess, rundir: Path | None, limits: Limits,
                 isolation: Isolation, hold: contextlib.ExitStack, log_cap: int) -> None:
        self.proc, self.rundir, self.limits = proc, rundir, limits
        self.isolation, self.hold = isolation, hold
        assert proc.stdout is not None and proc.stderr is not None
        self.outputs = [CappedReader(s, log_cap) for s in (proc.stdout, proc.stderr)]
        self.events: EventsReader | None = None
        self.discarded = False
        self.cgroup: RunCgroup | None = None  # its run's, from the hand-over on

    def enter(self, cgroup: RunCgroup) -> bool:
        """Move the waiting sandbox (its whole process tree) into its run's cgroup; False when
        it was gone. From then on the cgroup is the sandbox's and goes with it (discard)."""
        self.cgroup = cgroup
        pid = self.proc.host_pid()
        return pid is not None and bool(cgroup.add_tree(pid))

    def watch(self, events_stream: IO[bytes]) -> None:
        """Start reading its events and output."""
        self.events = EventsReader(events_stream)
        for reader in (self.events, *self.outputs):
            reader.start()

    def alive(self) -> bool:
        """Whether it still runs (a sandbox that died while waiting is not handed a case)."""
        return self.proc.poll() is None

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S,
                   stop: Callable[[], bool] = lambda: False) -> bool:
        """Wait until it has imported TVM and waits; False when it died or took too long (or
        `stop` said so: its run was cancelled)."""
        assert self.events is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not stop():
            if self.events.ready.wait(0.05):
                return self.alive()
            if not self.alive():
                return False
        return False

    def hand_over(self, job: SandboxJob, limits: Limits, key: bytes) -> bool:
        """Give it the case and the key; False when it was gone (it died while waiting)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(handover_bytes(job, limits, key))
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            return False
        return True

    def _exited(self, timeout_s: float) -> bool:
        """Whether the sandbox's process ended within timeout_s."""
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def finish(self, job: SandboxJob, key: bytes, handed_at: float) -> Execution:
        """Wait for the run (its time limit counts from the hand-over) and collect it."""
        timed_out, cancelled = wait_cancellable(self._exited, job, handed_at + job.timeout_s)
        if timed_out or cancelled:
            self.kill()
        seconds = time.monotonic() - handed_at
        assert self.events is not None
        for reader in (self.events, *self.outputs):
            reader.join(timeout=10)
        events = verified_events(bytes(self.events.output.kept), key)
        said = exit_status(events)
        rc = said[0] if said else self.proc.returncode
        sig = said[1] if said else signal_of(self.proc.returncode)
        return Execution(
            events=[e for e in events if e["event"] != "exit"], returncode=rc, signal=sig,
            timed_out=timed_out, cancelled=cancelled, stdout=self.outputs[0].output.text(),
            stderr=self.outputs[1].output.text(),
            # The kernel's OOM killer acted in the run's own cgroup: its memory_mb was reached.
            oom_killed=(self.cgroup is not None and self.cgroup.oom_kills() > 0
                        and not timed_out and not cancelled),
            truncated=any(r.output.truncated for r in self.outputs), seconds=seconds,
            isolation=self._isolation(job))

    def _isolation(self, job: SandboxJob) -> Isolation:
        """What the result's `isolation` says: the sandbox's, the case's limits, its cgroup."""
        isolation: Isolation = {**self.isolation, **job_limits_summary(job, self.limits)}
        if self.cgroup is not None:
            isolation["cgroup"] = self.cgroup.summary()
        return isolation

    def kill(self) -> None:
        """Kill the whole sandbox: everything in its PID namespace goes along."""
        self.proc.kill_tree()
        self.proc.wait()

    def discard(self) -> None:
        """End it and remove its work directory; the environment's build is let go."""
        if self.discarded:
            return
        self.discarded = True
        if self.proc.poll() is None:
            self.kill()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(Exception):
                stream.close()  # type: ignore[union-attr]
        self.proc.release()
        if self.rundir is not None:
            shutil.rmtree(self.rundir, ignore_errors=True)
        if self.cgroup is not None:
            self.cgroup.remove()
        self.hold.close()


def signal_of(rc: int | None) -> str | None:
    """The signal in a sandbox's own exit status (bwrap reports a child's signal N as 128+N)."""
    if rc is None:
        return None
    if rc < 0:
        return signal_name(-rc)
    return signal_name(rc - 128) if 128 < rc < 128 + 65 else None


def job_limits_summary(job: SandboxJob, started_with: Limits) -> LimitsSummary:
    """The isolation's limits: the case's own (the supervisor applied them to its child)."""
    return {"memory_mb": job.memory_mb, "timeout_s": job.timeout_s, "pids": started_with.pids}
