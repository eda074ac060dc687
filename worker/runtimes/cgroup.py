"""A cgroup per run for the local runtime: memory (tmpfs pages included), a CPU share, processes.

A worker process makes its runs' cgroups under its own (`tvmrepro-<pid>-<id>`, in each
controller's hierarchy on cgroup v1: memory, cpu, pids; one directory on v2),
one per run, named by the run. A sandbox is moved into its run's cgroup, its
whole process tree, when it is handed its case: a warm sandbox was forked
before any run existed. What it then allocates (its pages, the tmpfs pages it
writes to /tmp, /dev/shm or its work directory, the kernel memory of its
files) is charged there, against the run's `memory_mb`; past it the kernel's
OOM killer acts inside the cgroup, and its count there (`oom_kill` in
memory.oom_control or memory.events) is the run's `oom` evidence. Every run's
cgroup gets the same CPU share, so runs at once share the CPU by run, not by
process, however many a run forks. The cgroup is removed after the run.

Where none can be made (not root, a v2 host without delegation of the
controllers), `Cgroups.reason` says why, and every result's isolation says so.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import time
import uuid
from pathlib import Path

import psutil

from tvmrepro.liveness import pid_alive
from worker.runtimes.isolation import CgroupSummary, Isolation

log = logging.getLogger(__name__)
CGROUP_FS = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("memory", "cpu", "pids")
CPU_SHARES = 1024  # v1: every run's cgroup the same share (the kernel's default weight)
CPU_WEIGHT = 100  # v2: the same
REMOVE_WAIT_S = 5.0  # a killed sandbox's processes leave its cgroup within this


def _own_paths() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and '' for the v2 hierarchy."""
    paths: dict[str, str] = {}
    with open("/proc/self/cgroup") as lines:
        for line in lines:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                paths[name] = path
    return paths


def _v1_mounts() -> dict[str, Path]:
    """Where each v1 controller's hierarchy is mounted."""
    found: dict[str, Path] = {}
    with open("/proc/self/mounts") as lines:
        for line in lines:
            _, target, fstype, options, *_ = line.split()
            if fstype == "cgroup":
                for name in options.split(","):
                    if name in V1_CONTROLLERS:
                        found.setdefault(name, Path(target))
    return found


def _write(path: Path, value: str) -> None:
    path.write_text(value)


class RunCgroup:
    """One run's cgroup: a directory per hierarchy (v1: memory, cpu, pids; v2: one)."""

    def __init__(self, dirs: dict[str, Path], version: int, memory_mb: int, pids: int) -> None:
        self.dirs, self.version = dirs, version
        self.memory_mb, self.pids_max = memory_mb, pids

    @property
    def main(self) -> Path:
        """The directory whose cgroup.procs lists the run's processes."""
        return self.dirs["memory"] if self.version == 1 else self.dirs[""]

    def add(self, pid: int) -> None:
        """Move one process (all its threads) into the run's cgroup."""
        for directory in self.dirs.values():
            _write(directory / "cgroup.procs", str(pid))

    def add_tree(self, pid: int) -> list[int]:
        """Move `pid` and every process below it (a waiting sandbox: its tree does not change
        while it waits for its case); the processes moved."""
        moved: list[int] = []
        try:
            tree = [psutil.Process(pid)]
            tree += tree[0].children(recursive=True)
        except psutil.NoSuchProcess:
            return moved
        for process in tree:
            with contextlib.suppress(ProcessLookupError):
                self.add(process.pid)
                moved.append(process.pid)
        return moved

    def procs(self) -> list[int]:
        """The processes in it now."""
        try:
            return [int(p) for p in (self.main / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer ended in it."""
        counters = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            for line in (self.dirs["memory" if self.version == 1 else ""] / counters).read_text(
                    ).splitlines():
                name, _, value = line.partition(" ")
                if name == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def setting(self, name: str) -> str:
        """A control file's value ('' when it cannot be read): for tests and the bench."""
        controller = name.split(".", 1)[0]
        directory = self.dirs.get(controller if self.version == 1 else "")
        try:
            return (directory / name).read_text().strip() if directory else ""
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL everything in it (v2: cgroup.kill; v1: each process listed)."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                _write(self.main / "cgroup.kill", "1")
                return
        for pid in self.procs():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> bool:
        """Kill what is left in it and remove it; False when it could not be (swept later)."""
        deadline = time.monotonic() + REMOVE_WAIT_S
        while self.procs() and time.monotonic() < deadline:
            self.kill()
            time.sleep(0.05)
        removed = True
        for directory in self.dirs.values():
            removed &= _rmdir(directory, deadline)
        return removed

    def summary(self) -> CgroupSummary:
        """What a result's isolation says of it."""
        return {"version": self.version, "memory_mb": self.memory_mb, "pids": self.pids_max,
                "cpu": f"shares={CPU_SHARES}" if self.version == 1 else f"weight={CPU_WEIGHT}"}


def _rmdir(directory: Path, deadline: float) -> bool:
    while True:
        try:
            directory.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                log.warning("cannot remove the cgroup %s: %s", directory, exc)
                return False
            time.sleep(0.05)


class Cgroups:
    """Where this process makes its runs' cgroups (`parents`), or why it cannot (`reason`)."""

    def __init__(self, enabled: bool = True) -> None:
        self.parents: dict[str, Path] = {}
        self.version = 0
        self.reason: str | None = None
        if not enabled:
            self.reason = "turned off (TVMREPRO_RUN_CGROUPS=0)"
        elif os.geteuid() != 0:
            self.reason = "not root: no cgroup of the worker's can be made"
        else:
            try:
                self._setup()
            except OSError as exc:
                self.parents.clear()
                self.reason = f"cannot make a cgroup here: {exc}"
        if self.reason:
            log.warning("runs get no cgroup of their own: %s", self.reason)

    def _setup(self) -> None:
        own = _own_paths()
        name = f"tvmrepro-{os.getpid()}-{uuid.uuid4().hex[:8]}"  # a runtime's own
        v2 = CGROUP_FS / "cgroup.controllers"
        if v2.exists() and {"memory", "cpu", "pids"} <= set(v2.read_text().split()):
            base = CGROUP_FS / own.get("", "/").lstrip("/")
            parent = base / name
            parent.mkdir(exist_ok=True)
            # A v2 cgroup with processes cannot hand controllers down ("no internal processes"):
            # that needs the worker in a leaf of a delegated subtree (systemd's Delegate=yes).
            try:
                for directory in (base, parent):
                    _write(directory / "cgroup.subtree_control", "+memory +cpu +pids")
            except OSError as exc:
                with contextlib.suppress(OSError):
                    parent.rmdir()
                raise OSError(exc.errno, f"cgroup v2: {base} cannot hand the memory, cpu and "
                              f"pids controllers down ({exc.strerror}; run the worker in a leaf "
                              "of a delegated subtree)") from exc
            self.parents, self.version = {"": parent}, 2
            self.sweep()
            return
        mounts = _v1_mounts()
        missing = [c for c in V1_CONTROLLERS if c not in mounts or c not in own]
        if missing:
            raise OSError(errno.ENOENT, f"no cgroup hierarchy for {', '.join(missing)}")
        for controller in V1_CONTROLLERS:
            parent = mounts[controller] / own[controller].lstrip("/") / name
            parent.mkdir(exist_ok=True)
            self.parents[controller] = parent
        self.version = 1
        self.sweep()

    @property
    def available(self) -> bool:
        """Whether runs get a cgroup of their own here."""
        return bool(self.parents)

    def make(self, run: str, memory_mb: int, pids: int) -> RunCgroup | None:
        """A new cgroup for one run, its limits set (None where none can be made)."""
        if not self.parents:
            return None
        limit = str(memory_mb << 20)
        dirs = {c: p / f"run-{run}" for c, p in self.parents.items()}
        try:
            for directory in dirs.values():
                directory.mkdir(exist_ok=True)
            if self.version == 1:
                memory = dirs["memory"]
                _write(memory / "memory.limit_in_bytes", limit)
                if (memory / "memory.memsw.limit_in_bytes").exists():  # no swap either
                    _write(memory / "memory.memsw.limit_in_bytes", limit)
                _write(dirs["cpu"] / "cpu.shares", str(CPU_SHARES))
                _write(dirs["pids"] / "pids.max", str(pids))
            else:
                main = dirs[""]
                _write(main / "memory.max", limit)
                with contextlib.suppress(OSError):  # a kernel without swap accounting
                    _write(main / "memory.swap.max", "0")
                _write(main / "cpu.weight", str(CPU_WEIGHT))
                _write(main / "pids.max", str(pids))
        except OSError as exc:
            log.warning("cannot make the cgroup of run %s: %s", run, exc)
            for directory in dirs.values():
                with contextlib.suppress(OSError):
                    directory.rmdir()
            return None
        return RunCgroup(dirs, self.version, memory_mb, pids)

    def sweep(self) -> None:
        """Remove the cgroups of this host's worker processes that are gone (killed mid-run)."""
        for parent in self.parents.values():
            for other in parent.parent.glob("tvmrepro-*"):
                owner = other.name.split("-")[1]
                if owner.isdigit() and int(owner) != os.getpid() and not pid_alive(int(owner)):
                    _remove_tree(other)

    def close(self) -> None:
        """Remove this process's cgroups (its runs are over)."""
        for parent in self.parents.values():
            _remove_tree(parent)

    def isolation(self) -> Isolation:
        """What a result's isolation says when the run got no cgroup."""
        return {"cgroup": None, "cgroup_reason": self.reason or "none made for this run"}


def _remove_tree(directory: Path) -> None:
    """rmdir a cgroup and its children, killing what still runs in them."""
    for child in sorted(directory.glob("*/"), reverse=True):
        if child.is_dir():
            for pid in (child / "cgroup.procs").read_text().split() \
                    if (child / "cgroup.procs").exists() else []:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(pid), signal.SIGKILL)
            _rmdir(child, time.monotonic() + REMOVE_WAIT_S)
    _rmdir(directory, time.monotonic() + REMOVE_WAIT_S)
