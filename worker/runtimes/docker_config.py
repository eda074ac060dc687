"""What a sandbox container of the Docker runtime is: its command, user, paths and environment,
every limit and security flag of its host config, and what a result's `isolation` says of it.

Nothing here talks to the engine beyond docker-py's config builders: docker.py creates, runs
and removes the containers these configs describe.
"""

from __future__ import annotations

import docker
from docker.types import (
    ContainerConfig,
    DeviceRequest,
    DriverConfig,
    HostConfig,
    LogConfig,
    Mount,
    Ulimit,
)

from tvmrepro.environments import Environment
from tvmrepro.settings import Settings
from worker.runtimes.base import PTYS_MAX, TMPFS_INODES, Limits, SandboxJob
from worker.runtimes.commands import sandbox_environ
from worker.runtimes.isolation import Isolation
from worker.runtimes.syscalls import docker_profile

SANDBOX_USER = "10001:10001"  # made by the image recipes
OUT_DIR, SCRATCH_DIR = "/out", "/tmp"
EVENTS_FILE = f"{OUT_DIR}/events.jsonl"
HARNESS_PATH = "/opt/harness"
CONTAINER_LOG_CAP = "1m"  # the engine's own copy of the output (docker logs), per container
# /dev/shm's size: the engine's default, kept (a larger one, filled past the memory limit
# with /tmp, left the container stalled at the limit until its time ran out, not OOM-killed).
SHM_MB = 64
# The container's own devpts instance, holding at most PTYS_MAX ptys (the engine's has no
# `max`: one container could take every pty the host's instances share). An anonymous volume
# of the local driver mounts it; a mount at /dev/pts replaces the engine's, and /dev/ptmx
# (pts/ptmx) then opens this one.
PTYS_VOLUME = DriverConfig("local", {
    "type": "devpts", "device": "devpts",
    "o": f"newinstance,ptmxmode=0666,mode=620,max={PTYS_MAX},nosuid,noexec"})


def harness_command(self_limit_s: float) -> list[str]:
    """The harness's supervisor, killed by the container itself `self_limit_s` after its start."""
    return ["timeout", "--signal=KILL", str(int(self_limit_s)),
            "python3", "-m", "harness", "--events", EVENTS_FILE, "--workdir", SCRATCH_DIR]


def container_environ(env: Environment | None = None) -> dict[str, str]:
    """What the case sees in the container: the local sandbox's scrubbed set (with
    FRONTENDS_VARIABLE in a frontend flavour's), with image paths."""
    return {**sandbox_environ(env), "PATH": "/opt/tvm/bin:/usr/local/bin:/usr/bin:/bin",
            "PYTHONPATH": HARNESS_PATH}


def sandbox_host_config(client: docker.DockerClient, job: SandboxJob,
                        settings: Settings) -> HostConfig:
    """Every limit and security flag of a sandbox container, in one place."""
    limits = Limits.of(job, settings)
    memory = f"{limits.memory_mb}m"
    gpus = [DeviceRequest(count=-1, capabilities=[["gpu"]])] if job.env.device == "cuda" else None
    host_config: HostConfig = client.api.create_host_config(
        network_mode="none",
        read_only=True,
        # TVM compiles and dlopens its kernels in /tmp (the work directory), hence exec. Each
        # tmpfs caps its inodes, as the local sandbox's do: an inode is unaccounted memory.
        tmpfs={SCRATCH_DIR: f"rw,exec,nosuid,nodev,size={limits.tmpfs_mb}m,mode=1777,"
                            f"nr_inodes={TMPFS_INODES}",
               "/dev/shm": f"rw,noexec,nosuid,nodev,size={SHM_MB}m,mode=1777,"
                           f"nr_inodes={TMPFS_INODES}"},
        mounts=[Mount(target=OUT_DIR, source=None, type="volume"),
                Mount(target="/dev/pts", source=None, type="volume", driver_config=PTYS_VOLUME)],
        cap_drop=["ALL"],
        # The local sandbox's system call rules (syscalls.py) instead of the engine's default
        # profile, whose refusals they cover whatever the engine's version (io_uring included).
        security_opt=["no-new-privileges", f"seccomp={docker_profile()}"],
        pids_limit=limits.pids,
        mem_limit=memory,
        memswap_limit=memory,  # equal: no swap on top of the limit
        nano_cpus=int(limits.cpus * 1e9),
        init=True,  # reaps orphans; the harness's exit status (128+N for a signal) is ours
        # fsize also bounds events.jsonl on the /out volume.
        ulimits=[Ulimit(name="fsize", soft=limits.file_size, hard=limits.file_size),
                 Ulimit(name="nofile", soft=limits.open_files, hard=limits.open_files),
                 Ulimit(name="core", soft=0, hard=0)],
        log_config=LogConfig(type="json-file",
                             config={"max-size": CONTAINER_LOG_CAP, "max-file": "1"}),
        device_requests=gpus,
    )
    return host_config


def container_config(client: docker.DockerClient, job: SandboxJob, settings: Settings,
                     image_id: str, command: list[str], labels: dict[str, str]) -> ContainerConfig:
    """The whole config of a detached sandbox container of `image_id` running `command`."""
    config: ContainerConfig = client.api.create_container_config(
        image_id, command, user=SANDBOX_USER,
        detach=True,
        environment=container_environ(job.env), working_dir=SCRATCH_DIR, hostname="sandbox",
        labels=labels, network_disabled=True, stdin_open=True,
        host_config=sandbox_host_config(client, job, settings))
    # The case arrives on stdin, once: when the worker closes its side, stdin ends
    # (docker-py sets StdinOnce only for attached, non-detached containers).
    config["StdinOnce"] = True
    return config


def isolation(job: SandboxJob, settings: Settings, image_id: str,
              harness: str | None) -> Isolation:
    """A run's `isolation` record: the container's flags and limits, its image and harness."""
    limits = Limits.of(job, settings)
    return {"runtime": "docker", "sandbox": "container", "network": "none",
            "image": job.env.image, "image_id": image_id,
            "harness": harness, "user": SANDBOX_USER,
            "read_only_root": True, **limits.summary(), "cpus": limits.cpus,
            "tmpfs": f"/tmp size={limits.tmpfs_mb}m, /dev/shm size={SHM_MB}m, "
                     f"inodes={TMPFS_INODES} each",
            "ptys": PTYS_MAX, "seccomp": "worker/runtimes/syscalls.py",
            "gpu": job.env.device == "cuda"}
