"""What a local sandbox of a CUDA environment is given, and what a CPU one is not.

The GPU machine's own check is scripts/gpu/service.sh (the README's CUDA section); these hold the
rules on any host, with a stand-in driver where the host has none (named so below).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tvmrepro.environments import default_catalog
from tvmrepro.settings import Settings
from worker.runtimes import gpu
from worker.runtimes.base import Limits, SandboxJob, rlimit_names

CPU = default_catalog().get("tvm-0.27.0.post1-cpu")
CUDA = default_catalog().get("tvm-0.27.0.post1-cuda")


@pytest.fixture
def stand_in_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A stand-in for an NVIDIA driver (device nodes, a libcuda outside /usr) on a host with none."""
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidiactl", "nvidia0", "nvidia1", "nvidia-uvm", "nvidia-modeset"):
        (dev / name).touch()
    lib = tmp_path / "driver"
    lib.mkdir()
    (lib / gpu.DRIVER_LIBRARY).touch()
    monkeypatch.setattr(gpu, "DEVICE_NODE_PATTERNS",
                        tuple(p.replace("/dev", str(dev)) for p in gpu.DEVICE_NODE_PATTERNS))
    monkeypatch.setenv("LD_LIBRARY_PATH", f"/nowhere:{lib}")
    gpu.driver_library_dirs.cache_clear()
    yield tmp_path
    gpu.driver_library_dirs.cache_clear()


def test_a_cuda_sandbox_gets_the_device_nodes_and_the_driver(stand_in_driver: Path) -> None:
    options = gpu.gpu_bwrap_options(CUDA)
    dev, lib = stand_in_driver / "dev", str(stand_in_driver / "driver")
    bound = [options[i + 1] for i, o in enumerate(options) if o == "--dev-bind"]
    assert bound == [str(dev / n) for n in ("nvidia-uvm", "nvidia0", "nvidia1", "nvidiactl")]
    assert ["--ro-bind", lib, lib] == options[-3:]  # outside /usr: bound read-only where it is
    environ = gpu.gpu_environ(CUDA)
    assert environ["LD_LIBRARY_PATH"] == lib and environ["CUDA_CACHE_PATH"].startswith("/tmp/")
    assert gpu.gpu_summary(CUDA)["gpu"] == {"devices": bound, "driver_libraries": [lib]}


def test_a_cpu_sandbox_gets_nothing_of_the_gpus(stand_in_driver: Path) -> None:
    assert gpu.gpu_bwrap_options(CPU) == []
    assert gpu.gpu_environ(CPU) == {} and gpu.gpu_summary(CPU) == {}


def test_a_cuda_run_caps_its_data_not_its_address_space(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    case = {"timeout_s": 30, "memory_mb": 1024}
    cpu, cuda = (Limits.of(SandboxJob("r", "j", env, case, "v"), settings) for env in (CPU, CUDA))
    for limits, kept, left in ((cpu, "RLIMIT_AS", "RLIMIT_DATA"), (cuda, "RLIMIT_DATA", "RLIMIT_AS")):
        for rlimits in (limits.child_rlimits(), rlimit_names(limits)):
            assert rlimits[kept] == 1024 << 20 and left not in rlimits
    # A warm sandbox serves only runs of its own kind: a CPU one's cap would break CUDA.
    assert Limits.pooled(settings, CUDA).covers(cuda) and not Limits.pooled(settings).covers(cuda)
    assert Limits.pooled(settings, CPU).covers(cpu)


def test_cuda_environments_are_python_3_12() -> None:
    assert CUDA.python == "3.12" and CPU.python == "3.11"
