"""What a local sandbox of a CUDA environment is given of this host's GPUs, and nothing more.

A CUDA run needs the NVIDIA device nodes (the control node, one per GPU, unified memory's) and
the driver's user-space library (libcuda, which the driver installs beside the kernel module:
it must match that module, so it comes from the host, never from the environment). The
sandbox's /dev is its own, so the nodes are bound in one by one; /usr is bound already, so a
driver installed there is reachable as it is, and one installed elsewhere (a container
toolkit's /usr/local/nvidia is under /usr too) is bound read-only at its own path and named in
LD_LIBRARY_PATH. A CPU environment gets none of this, and neither does anything on a host with
no NVIDIA driver: a CUDA case there ends as TVM says it does without a device.

The zygote of a CUDA environment is given the nodes (the sandboxes it forks live in its mount
namespace) but never touches them: CUDA does not survive a fork once initialised, and TVM
initialises it only when a case first asks for a device, in the case's own process.
"""

from __future__ import annotations

import glob
import os
import subprocess
from functools import cache

from tvmrepro.environments import Environment
from worker.runtimes.isolation import Isolation

# The nodes the CUDA driver opens: control, one per GPU, unified memory (and its tools node).
DEVICE_NODE_PATTERNS = ("/dev/nvidiactl", "/dev/nvidia[0-9]*", "/dev/nvidia-uvm",
                        "/dev/nvidia-uvm-tools")
DRIVER_LIBRARY = "libcuda.so.1"


def gpu_device_nodes() -> list[str]:
    """The NVIDIA device nodes of this host (none without the driver)."""
    return sorted({node for pattern in DEVICE_NODE_PATTERNS for node in glob.glob(pattern)})


@cache
def driver_library_dirs() -> tuple[str, ...]:
    """Where this host's libcuda lies: what the loader's cache names, else the directories of
    the worker's own LD_LIBRARY_PATH that hold it."""
    found: list[str] = []
    try:
        listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True,
                                 check=False, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        listing = ""
    for line in listing.splitlines():
        name, _, path = line.strip().partition(" => ")
        if name.split(" ", 1)[0] == DRIVER_LIBRARY and path:
            found.append(os.path.dirname(os.path.realpath(path)))
    for directory in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if directory and os.path.exists(os.path.join(directory, DRIVER_LIBRARY)):
            found.append(os.path.realpath(directory))
    return tuple(dict.fromkeys(found))


def wants_gpu(env: Environment) -> bool:
    """Whether env's sandboxes are given the GPUs."""
    return env.device == "cuda"


def gpu_bwrap_options(env: Environment) -> list[str]:
    """bubblewrap options giving env's sandbox the GPUs' nodes and the driver's library."""
    if not wants_gpu(env):
        return []
    options: list[str] = []
    for node in gpu_device_nodes():
        options += ["--dev-bind", node, node]
    for directory in driver_library_dirs():
        if not directory.startswith(("/usr/", "/lib")):  # those the sandbox's root binds
            options += ["--ro-bind", directory, directory]
    return options


def gpu_environ(env: Environment) -> dict[str, str]:
    """Variables env's sandbox needs for the GPUs: where the driver's library lies (the
    sandbox's environment is otherwise scrubbed), CUDA's kernel cache in the sandbox's /tmp."""
    if not wants_gpu(env):
        return {}
    environ = {"CUDA_CACHE_PATH": "/tmp/.nv/ComputeCache"}
    if driver_library_dirs():
        environ["LD_LIBRARY_PATH"] = ":".join(driver_library_dirs())
    return environ


def gpu_summary(env: Environment) -> Isolation:
    """What a run's isolation record says of the GPUs it was given."""
    if not wants_gpu(env):
        return {}
    return {"gpu": {"devices": gpu_device_nodes(), "driver_libraries": list(driver_library_dirs())}}
