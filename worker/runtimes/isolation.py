"""What a result's `isolation` says: how the runtime isolated and limited the run."""

from __future__ import annotations

from typing import TypedDict


class LimitsSummary(TypedDict):
    """A sandbox's limits, as the case asked them."""

    memory_mb: int
    timeout_s: int
    pids: int


class CgroupSummary(TypedDict):
    """The run's own cgroup (cgroup.RunCgroup)."""

    version: int
    memory_mb: int
    pids: int
    cpu: str  # its share of the CPUs: shares= (v1) or weight= (v2)


class GpuSummary(TypedDict):
    """What a local CUDA sandbox was given (gpu.py)."""

    devices: list[str]
    driver_libraries: list[str]


class Isolation(TypedDict, total=False):
    """A result's `isolation`: the runtime's sandbox and its limits; each runtime says what
    it applies (the local runtime its uid, work directory and cgroup, the Docker runtime its
    image and container flags) and whether the sandbox was started ahead of the run (`warm`)."""

    runtime: str
    sandbox: str
    network: str
    memory_mb: int
    timeout_s: int
    pids: int
    warm: bool
    uid: int
    workdir: str
    gpu: bool | GpuSummary
    cgroup: CgroupSummary | None
    cgroup_reason: str
    image: str | None
    image_id: str
    harness: str | None
    user: str
    read_only_root: bool
    cpus: float
    tmpfs: str
    ptys: int
    seccomp: str
