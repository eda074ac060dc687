"""The Docker runtime bounds a run as the local runtime's sandbox does (tests/worker/
test_run_cgroup.py, test_syscalls.py): memory over all its processes and its /tmp is one limit
(the container's cgroup); the system call rules are the local sandbox's (io_uring refused
whatever the engine's version: the tests' engine, Debian's 20.10, allows it by default); ptys
and the inodes of /tmp and /dev/shm are capped per container."""

from __future__ import annotations

import errno

import pytest

from tests.conftest import NEW_ENV
from tests.docker.runs import run_script
from tests.fixtures.hostile_scripts import (
    FAMILIES,
    FAMILIES_REFUSED,
    FOREIGN_ABI,
    GREEDY,
    IO_URING,
    PTYS,
    x86_64_only,
)
from tvmrepro.environments import Environment
from worker.runtimes.base import PTYS_MAX, TMPFS_INODES
from worker.runtimes.docker import DockerRuntime

pytestmark = [pytest.mark.docker, pytest.mark.tvm]

# Files made in each tmpfs until it refuses one: how many, and the refusal's errno.
INODES = """
import os
for top in ('/tmp', '/dev/shm'):
    n = 0
    try:
        while True:
            open(f'{top}/inode{n}', 'w').close()
            n += 1
    except OSError as exc:
        print(top, n, exc.errno)
"""
# The tmpfs's root, and in /tmp (the work directory) what the harness keeps there.
INODES_TAKEN = 32


def test_memory_over_processes_and_tmpfs_is_one_limit(docker_runtime: DockerRuntime,
                                                      docker_envs: dict[str, Environment]
                                                      ) -> None:
    result = run_script(docker_runtime, docker_envs[NEW_ENV], GREEDY, memory_mb=1536,
                        timeout_s=60)
    assert result.status == "oom", (result.status, result.message, result.log.stdout,
                                     result.log.stderr[-2000:])


def test_io_uring_is_refused(docker_runtime: DockerRuntime,
                             docker_envs: dict[str, Environment]) -> None:
    result = run_script(docker_runtime, docker_envs[NEW_ENV], IO_URING)
    assert result.status == "ok", result.log.stderr[-2000:]
    code, error = result.log.stdout.split()
    assert code == "-1" and int(error) == errno.EPERM, result.log.stdout


@x86_64_only
def test_argument_rules_bind(docker_runtime: DockerRuntime,
                             docker_envs: dict[str, Environment]) -> None:
    result = run_script(docker_runtime, docker_envs[NEW_ENV], FAMILIES)
    assert result.status == "ok", result.log.stderr[-2000:]
    assert result.log.stdout.splitlines() == FAMILIES_REFUSED


@x86_64_only
def test_a_foreign_abi_is_no_way_around_the_filter(docker_runtime: DockerRuntime,
                                                   docker_envs: dict[str, Environment]) -> None:
    result = run_script(docker_runtime, docker_envs[NEW_ENV], FOREIGN_ABI)
    assert (result.status, result.signal) == ("crash", "SIGSYS"), result.log.stdout


def test_ptys_are_capped(docker_runtime: DockerRuntime,
                         docker_envs: dict[str, Environment]) -> None:
    result = run_script(docker_runtime, docker_envs[NEW_ENV], PTYS)
    assert result.status == "ok", result.log.stderr[-2000:]
    opened, error = result.log.stdout.split()
    # The container's own devpts instance is full at its cap (the host's would refuse thousands
    # later, with the same errno).
    assert int(opened) == PTYS_MAX and int(error) == errno.ENOSPC, result.log.stdout


def test_tmpfs_inodes_are_capped(docker_runtime: DockerRuntime,
                                 docker_envs: dict[str, Environment]) -> None:
    result = run_script(docker_runtime, docker_envs[NEW_ENV], INODES, timeout_s=60)
    assert result.status == "ok", result.log.stderr[-2000:]
    made = {top: (int(n), int(error)) for top, n, error in
            (line.split() for line in result.log.stdout.splitlines())}
    assert set(made) == {"/tmp", "/dev/shm"}, result.log.stdout
    for n, error in made.values():
        assert TMPFS_INODES - INODES_TAKEN <= n < TMPFS_INODES and error == errno.ENOSPC, made
