"""The floor of a measured ratio: the lowest the machine allows, from the CPU the work took.

Work that took C CPU seconds (user + system, summed over all its processes) cannot end in less
than C / N seconds of wall time on N cores, however its processes overlap. A measure against a
baseline of B seconds can therefore show no ratio below (C / N) / B: its floor. Every bench
prints each ratio beside its floor, computed here one way: a ratio near its floor is bound by
the CPU its work needs; the distance above it is waiting (the disk, the network, a lock, other
work on the machine), or processes that did not overlap.

C is what this process and its descendants spent while the work ran (TreeCpu): the commands it
ran, every process of the services it started (the API, the worker, its pool and sandboxes),
ended ones included. It is read from a CPU-accounting cgroup of the bench's own, which this
module makes and moves this process into when it is imported, before any service starts (v1
`cpuacct`, else v2 `cpu.stat`; no limit is set in it): every descendant is born in it, and the
kernel counts a process's CPU there however it ends (tests/fixtures/timing.py counts the suite's
CPU the same way). The worker moves its sandboxes into cgroups of its own only in the memory,
cpu and pids hierarchies (v1), or below its own (v2), so they stay counted. Where no cgroup can
be made (not root), C is summed over this process's living tree and its waited-for children's
rusage instead: that misses a process no one waits for (a warm sandbox: its zygote's children
are reaped by the kernel), so the floor comes out lower, never higher. Either way, processes
outside the tree are not counted (Redis, a Docker engine's containers), and C runs on a little
past a service's stored result, to the poll that reads it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import psutil

CORES = os.cpu_count() or 1


def tree_cpu() -> float:
    """CPU seconds so far of this process's descendants, living and waited for.

    Read from the top down (a process's own times and its waited-for children's, then its
    children's): a child that ends and is waited for between its parent's read and its own is
    missed, never counted twice."""
    me = psutil.Process()
    mine = me.cpu_times()
    total = mine.children_user + mine.children_system
    level = _children(me)
    while level:
        below = []
        for process in level:
            try:
                times = process.cpu_times()
            except psutil.Error:  # ended meanwhile: in its parent's children times, or lost
                continue
            total += times.user + times.system + times.children_user + times.children_system
            below += _children(process)
        level = below
    return total


def _children(process: psutil.Process) -> list[psutil.Process]:
    try:
        return process.children()
    except psutil.Error:
        return []


def _own_cgroup() -> tuple[Path, Callable[[Path], float]] | None:
    """This process's cgroup directory that counts CPU (v1 cpuacct, else v2), and its reader."""
    mounts: dict[str, Path] = {}
    with open("/proc/self/mounts") as lines:
        for line in lines:
            _, target, fstype, options, *_ = line.split()
            if fstype == "cgroup" and "cpuacct" in options.split(","):
                mounts.setdefault("cpuacct", Path(target))
            elif fstype == "cgroup2":
                mounts.setdefault("", Path(target))
    with open("/proc/self/cgroup") as lines:
        paths = {name: path for _, names, path in (line.rstrip("\n").split(":", 2) for line in lines)
                 for name in (names.split(",") if names else [""])}
    for name, read in (("cpuacct", _cpuacct_seconds), ("", _cpu_stat_seconds)):
        if name in mounts and name in paths:
            return mounts[name] / paths[name].lstrip("/"), read
    return None


def _cpuacct_seconds(cgroup: Path) -> float:
    return int((cgroup / "cpuacct.usage").read_text()) / 1e9


def _cpu_stat_seconds(cgroup: Path) -> float:
    for line in (cgroup / "cpu.stat").read_text().splitlines():
        key, value = line.split()
        if key == "usage_usec":
            return int(value) / 1e6
    raise OSError(f"no usage_usec in {cgroup / 'cpu.stat'}")


def _enter_own_cgroup() -> Callable[[], float] | None:
    """Move this process into a new CPU-accounting cgroup (left, and removed, at exit); its
    CPU seconds reader, or None where none can be made."""
    found = _own_cgroup()
    if found is None:
        return None
    parent, read = found
    mine = parent / f"tvmrepro-bench-{os.getpid()}"
    try:
        mine.mkdir()
        (mine / "cgroup.procs").write_text(str(os.getpid()))
        read(mine)
    except OSError:
        with contextlib.suppress(OSError):
            mine.rmdir()
        return None
    atexit.register(_leave, parent, mine)
    return lambda: read(mine)


def _leave(parent: Path, mine: Path) -> None:
    with contextlib.suppress(OSError):  # a process left behind keeps it: it stays, empty later
        (parent / "cgroup.procs").write_text(str(os.getpid()))
        mine.rmdir()


_CGROUP_CPU = _enter_own_cgroup()  # at import: before this process starts any service


def cpu_source() -> str:
    """Where TreeCpu reads the CPU from, in words."""
    return "the bench's cgroup" if _CGROUP_CPU is not None else "the process tree's rusage"


class TreeCpu:
    """The CPU seconds this process and its descendants spent inside a `with` block (`seconds`)."""

    seconds = 0.0

    def __enter__(self) -> TreeCpu:
        self._start = self._now()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.seconds = self._now() - self._start

    @staticmethod
    def _now() -> float:
        return _CGROUP_CPU() if _CGROUP_CPU is not None else tree_cpu()


def floor(cpu_seconds: float, baseline_s: float) -> float:
    """The lowest ratio to a baseline of `baseline_s` that work of `cpu_seconds` allows here."""
    return cpu_seconds / CORES / baseline_s


def with_floor(ratio: float, cpu_seconds: float, baseline_s: float) -> str:
    """`ratio` and its floor, as every bench prints them: `1.23x (floor 0.45x)`."""
    return f"{ratio:.2f}x (floor {floor(cpu_seconds, baseline_s):.2f}x)"
