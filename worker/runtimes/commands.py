"""The local runtime's command lines: bubblewrap's options for a sandbox and a zygote.

What a sandbox sees and may do is decided here (the README's Resource limits say it in
words): a minimal read-only root, the environment, the harness and the work directory at
fixed paths, its own namespaces, no capabilities once it runs the case, the seccomp filter
(sandbox.py), and for a CUDA environment the GPUs (gpu.py). Without bubblewrap (not root) a
sandbox falls back to `unshare` for the network and rlimits only.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable
from pathlib import Path

from images import HARNESS_DIR
from tvmrepro.environments import Environment
from worker.runtimes.base import Limits, rlimit_setter
from worker.runtimes.gpu import gpu_bwrap_options
from worker.runtimes.isolation import Isolation
from worker.runtimes.sandbox import SHARED_MOUNTS, args_fd, seccomp_fd
from worker.runtimes.uids import SANDBOX_UID_RANGE

# Inside the sandbox: where the environment, the harness and the work dir appear.
ENV_MOUNT, HARNESS_MOUNT, WORK_MOUNT = "/mnt/env", "/mnt/harness", "/mnt/work"
# The sandbox's root: these beside /usr, and from /etc what the loader and libc read.
ROOT_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime",
             "nsswitch.conf")


# Set in a frontend flavour's sandboxes: the harness imports TVM's frontends before the case
# (a zygote once for all its runs) and traces them (stage `frontend`).
FRONTENDS_VARIABLE = "TVMREPRO_FRONTENDS"


def sandbox_environ(env: Environment | None = None) -> dict[str, str]:
    """The only variables the case sees: nothing of the caller's."""
    frontends = {FRONTENDS_VARIABLE: "1"} if env is not None and env.frontends else {}
    return {**frontends,
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONPATH": HARNESS_MOUNT,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "TVM_BACKTRACE": "1",  # else a TVMScript parse error loses its message
        "TVM_NUM_THREADS": "2",
    }


def minimal_root(rundir: Path, uid: int) -> list[str]:
    """bwrap options for a root of the system's programs and libraries only: /usr (and what
    links into it), the loader's cache, and an /etc/passwd naming only root and the sandbox."""
    etc = rundir / "etc"
    etc.mkdir()
    (etc / "passwd").write_text(f"root:x:0:0:root:/:/usr/sbin/nologin\n"
                                f"sandbox:x:{uid}:{uid}:sandbox:/tmp:/usr/sbin/nologin\n")
    (etc / "group").write_text(f"root:x:0:\nsandbox:x:{uid}:\n")
    for path, mode in ((etc, 0o755), (etc / "passwd", 0o644), (etc / "group", 0o644)):
        os.chmod(path, mode)  # whatever the worker's umask
    options = ["--ro-bind", "/usr", "/usr", "--perms", "0755", "--dir", "/etc"]
    for top in ROOT_DIRS:
        if os.path.islink(top):  # /bin -> usr/bin on a merged-/usr system
            options += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            options += ["--ro-bind", top, top]
    for name in ETC_FILES:
        options += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return [*options, "--ro-bind", str(etc / "passwd"), "/etc/passwd",
            "--ro-bind", str(etc / "group"), "/etc/group"]


def rlimits_preexec(limits: Limits) -> Callable[[], None]:
    """What a started sandbox process does before it executes: a session of its own, and its
    rlimits."""
    def apply() -> None:
        os.setsid()
        for name, value in rlimit_setter(limits).items():
            resource.setrlimit(name, (value, value))

    return apply


class SandboxCommands:
    """The command lines of this machine's sandboxes and zygotes (bubblewrap's, where it is
    installed and this is root; else the fallback's)."""

    def __init__(self, bwrap: str | None, unshare: str | None) -> None:
        self.bwrap, self.unshare = bwrap, unshare

    def isolation(self) -> Isolation:
        """What this runtime can apply on this machine."""
        if self.bwrap:
            kind = "bwrap"
        elif self.unshare:
            kind = "unshare-net+rlimits"
        else:
            kind = "rlimits"
        return {"runtime": "local", "sandbox": kind, "network": "none" if kind != "rlimits" else "host"}

    def bwrap_options(self, env: Environment, envdir: Path, rundir: Path, uid: int,
                       limits: Limits) -> list[str]:
        """What a sandbox and a zygote share: the root, the mounts, the namespaces."""
        base_prefix = Path(os.path.realpath(envdir / "bin" / "python")).parent.parent
        # The directories bwrap makes above it copy the host's modes (/root is 0700): opened up,
        # else the sandbox's uid cannot reach the interpreter's standard library.
        reach: list[str] = []
        if not base_prefix.is_relative_to("/usr"):
            for parent in reversed(base_prefix.parents[:-1]):  # all but /
                reach += ["--chmod", "0755", str(parent)]
        return [*minimal_root(rundir, uid), "--dev", "/dev", "--proc", "/proc",
                "--perms", "1777", "--size", str(limits.tmpfs_mb << 20), "--tmpfs", "/tmp",
                # multiprocessing's locks and pools need a writable /dev/shm, as under Docker.
                "--perms", "1777", "--size", str(limits.tmpfs_mb << 20), "--tmpfs", "/dev/shm",
                "--ro-bind", str(base_prefix), str(base_prefix), *reach,
                "--perms", "0755", "--tmpfs", "/mnt", "--perms", "0755", "--dir", HARNESS_MOUNT,
                "--ro-bind", str(envdir), ENV_MOUNT,
                "--ro-bind", str(HARNESS_DIR), f"{HARNESS_MOUNT}/harness",
                *gpu_bwrap_options(env),
                "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                "--unshare-cgroup-try", "--die-with-parent", "--new-session",
                "--hostname", "sandbox"]

    def sandbox(self, env: Environment, envdir: Path, rundir: Path, uid: int, limits: Limits,
                 events_fd: int) -> tuple[list[str], list[int]]:
        """The sandbox's command line and the descriptors it reads (bwrap's args and filter)."""
        harness = ["-m", "harness", "--events", f"fd:{events_fd}", "--workdir", WORK_MOUNT]
        if not self.bwrap:
            return self.fallback(envdir, rundir, harness), []
        options = [*self.bwrap_options(env, envdir, rundir, uid, limits),
                   "--bind", str(rundir / "work"), WORK_MOUNT, *self.shared_binds(rundir),
                   "--chdir", WORK_MOUNT,
                   "--remount-ro", "/",  # the root's own tmpfs (/etc, the mount points) too
                   # bwrap needs DAC_OVERRIDE to enter the work dir (the sandbox uid's, 0700),
                   # setpriv SETUID/SETGID to become that uid and SETPCAP to empty the bounding
                   # set (without it, silently, nothing is dropped); becoming the uid clears them.
                   "--cap-drop", "ALL", "--cap-add", "CAP_DAC_OVERRIDE", "--cap-add", "CAP_SETPCAP",
                   "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        fds = [args_fd(options), seccomp_fd()]
        # Options come through a descriptor: bwrap's init, PID 1 inside, shows no host path.
        cmd = [self.bwrap, "--args", str(fds[0]), "--seccomp", str(fds[1]),
               "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
               "--bounding-set=-all", f"{ENV_MOUNT}/bin/python", *harness]
        return cmd, fds

    def shared_binds(self, rundir: Path) -> list[str]:
        """The capped /tmp, /dev/shm and /dev/pts mounted beside the work directory (sandbox.py),
        over bubblewrap's own; none without the mount namespace that mounts them."""
        if self.unshare is None:
            return []
        binds: list[str] = []
        for name, target in SHARED_MOUNTS:  # devpts's ptmx is a device: --dev-bind
            binds += ["--dev-bind" if name == "pts" else "--bind", str(rundir / name), target]
        return binds

    def zygote(self, env: Environment, envdir: Path, rundir: Path, limits: Limits,
                        control_fd: int) -> tuple[list[str], list[int]]:
        """The zygote's command line: the sandbox's root and namespaces, as root with what it
        needs to fork sandboxes into namespaces of their own and make them unprivileged
        (images/harness/zygote.py); the seccomp filter is theirs to load, not its own."""
        assert self.bwrap is not None
        options = [*self.bwrap_options(env, envdir, rundir, SANDBOX_UID_RANGE[0], limits),
                   "--perms", "0700", "--dir", WORK_MOUNT, "--chdir", "/", "--remount-ro", "/",
                   "--cap-drop", "ALL", "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_NET_ADMIN",
                   "--cap-add", "CAP_SETPCAP", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        fds = [args_fd(options), seccomp_fd()]
        cmd = [self.bwrap, "--args", str(fds[0]), f"{ENV_MOUNT}/bin/python", "-m", "harness",
               "--zygote", "--control", f"fd:{control_fd}", "--seccomp", f"fd:{fds[1]}"]
        return cmd, fds

    def fallback(self, envdir: Path, rundir: Path, harness: list[str]) -> list[str]:
        harness = [a.replace(WORK_MOUNT, str(rundir / "work")) for a in harness]
        python = [str(envdir / "bin" / "python"), *harness]
        if self.unshare:
            return [self.unshare, "--net", "--pid", "--fork", "--kill-child", "--mount-proc", *python]
        return python
