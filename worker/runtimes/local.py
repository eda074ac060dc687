"""The local runtime: the harness in the environment's interpreter, sandboxed without Docker.

Under bubblewrap (when installed and we are root) the case sees a read-only
root, no home directories, an empty network namespace, its own PID namespace
(everything dies with the sandbox), a size-capped /tmp and a private work
directory; it runs as a fresh unprivileged uid so process limits bind. Without
bubblewrap it falls back to rlimits plus `unshare` for the network, and the
result's `isolation` says so. Always: a wall-clock timeout that kills the whole
tree, rlimits (CPU, address space, processes, file size, open files), a
scrubbed environment, capped stdout/stderr, the work directory removed after.
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from images import HARNESS_DIR
from tvmrepro.environments import Environment
from tvmrepro.errors import ProvisionError, RuntimeFault
from tvmrepro.settings import Settings
from worker.provision import collect_builds, in_use, provision, read_fingerprint
from worker.runtimes.base import (
    CappedReader,
    Execution,
    Limits,
    SandboxJob,
    read_events,
    signal_name,
)

SANDBOX_UID_RANGE = (200_000, 260_000)  # fresh uid per run: RLIMIT_NPROC counts per uid
# Inside the sandbox: where the environment, the harness and the work dir appear.
ENV_MOUNT, HARNESS_MOUNT, WORK_MOUNT, IN_MOUNT = "/mnt/env", "/mnt/harness", "/mnt/work", "/mnt/in"


def sandbox_environ() -> dict[str, str]:
    """The only variables the case sees: nothing of the caller's."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONPATH": HARNESS_MOUNT,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "TVM_BACKTRACE": "1",  # else a TVMScript parse error loses its message
        "TVM_NUM_THREADS": "2",
    }


def _rlimits(limits: Limits) -> Callable[[], None]:
    def apply() -> None:
        os.setsid()
        for name, value in (
            (resource.RLIMIT_AS, limits.memory_mb << 20),
            (resource.RLIMIT_CPU, limits.cpu_seconds),
            (resource.RLIMIT_NPROC, limits.pids),
            (resource.RLIMIT_FSIZE, limits.file_size),
            (resource.RLIMIT_NOFILE, limits.open_files),
            (resource.RLIMIT_CORE, 0),
        ):
            resource.setrlimit(name, (value, value))

    return apply


class LocalRuntime:
    """Runs the harness with a provisioned environment's interpreter, in a sandbox."""

    name = "local"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.bwrap = shutil.which("bwrap") if os.geteuid() == 0 else None
        self.unshare = shutil.which("unshare") if os.geteuid() == 0 else None

    def isolation(self) -> dict[str, Any]:
        """What this runtime can apply on this machine."""
        if self.bwrap:
            kind = "bwrap"
        elif self.unshare:
            kind = "unshare-net+rlimits"
        else:
            kind = "rlimits"
        return {"runtime": "local", "sandbox": kind, "network": "none" if kind != "rlimits" else "host"}

    def _command(self, job: SandboxJob, envdir: Path, rundir: Path, uid: int,
                 events_fd: int) -> list[str]:
        harness = ["-m", "harness", f"{IN_MOUNT}/case.json", "--variant", job.variant,
                   "--events", f"fd:{events_fd}", "--workdir", WORK_MOUNT]
        if not self.bwrap:
            return self._fallback_command(job, envdir, rundir, harness)
        base_prefix = Path(os.path.realpath(envdir / "bin" / "python")).parent.parent
        tmp_mb = Limits.of(job, self.settings).tmpfs_mb
        cmd = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
               "--perms", "1777", "--size", str(tmp_mb << 20), "--tmpfs", "/tmp"]
        for hidden in ("/root", "/home", "/work", "/var/lib", "/run"):
            if os.path.isdir(hidden):
                cmd += ["--perms", "0755", "--tmpfs", hidden]
        cmd += ["--ro-bind", str(base_prefix), str(base_prefix),
                "--perms", "0755", "--tmpfs", "/mnt", "--perms", "0755", "--dir", HARNESS_MOUNT,
                "--ro-bind", str(envdir), ENV_MOUNT,
                "--ro-bind", str(HARNESS_DIR), f"{HARNESS_MOUNT}/harness",
                "--ro-bind", str(rundir / "in"), IN_MOUNT,
                "--bind", str(rundir / "work"), WORK_MOUNT, "--chdir", WORK_MOUNT,
                "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                "--unshare-cgroup-try", "--die-with-parent", "--new-session",
                "--hostname", "sandbox",
                # setpriv below needs these two to become the sandbox uid; it drops them.
                "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                f"{ENV_MOUNT}/bin/python", *harness]
        return cmd

    def _fallback_command(self, job: SandboxJob, envdir: Path, rundir: Path,
                          harness: list[str]) -> list[str]:
        harness = [a.replace(IN_MOUNT, str(rundir / "in")).replace(WORK_MOUNT, str(rundir / "work"))
                   for a in harness]
        python = [str(envdir / "bin" / "python"), *harness]
        if self.unshare:
            return [self.unshare, "--net", "--pid", "--fork", "--kill-child", "--mount-proc", *python]
        return python

    def _prepare(self, job: SandboxJob, uid: int) -> Path:
        rundir = self.settings.work_dir / job.run_id
        shutil.rmtree(rundir, ignore_errors=True)
        (rundir / "in").mkdir(parents=True)
        (rundir / "work").mkdir()
        (rundir / "in" / "case.json").write_text(json.dumps(job.case))
        # Readable by the sandbox's uid; only work/ is its to write.
        os.chmod(rundir, 0o755)
        os.chmod(rundir / "in", 0o755)
        os.chmod(rundir / "in" / "case.json", 0o644)
        if self.bwrap:
            os.chown(rundir / "work", uid, uid)
        else:  # without a PYTHONPATH mount, the harness is found next to the case
            shutil.copytree(HARNESS_DIR, rundir / "in" / "harness",
                            ignore=shutil.ignore_patterns("__pycache__"))
        return rundir

    def fingerprint(self, env: Environment) -> dict[str, Any]:
        """env's fingerprint, provisioning it here first if it is missing or stale."""
        return provision(self.settings, env)

    def execute(self, job: SandboxJob) -> Execution:
        """Run the harness for this job in the sandbox and collect what it reported."""
        if read_fingerprint(self.settings, job.env) is None:
            raise RuntimeFault(f"environment {job.env.id} is not provisioned here "
                               f"(run: tvmrepro env provision {job.env.id})")
        try:
            # The build is held for the whole run: re-provisioning cannot remove it meanwhile.
            with in_use(self.settings, job.env) as build:
                execution = self._execute_in(job, build)
        except ProvisionError as exc:
            raise RuntimeFault(str(exc)) from exc
        collect_builds(self.settings, job.env, wait=False)  # builds replaced during the run
        return execution

    def _execute_in(self, job: SandboxJob, envdir: Path) -> Execution:
        uid = SANDBOX_UID_RANGE[0] + secrets.randbelow(SANDBOX_UID_RANGE[1] - SANDBOX_UID_RANGE[0])
        rundir = self._prepare(job, uid)
        environ = sandbox_environ()
        if not self.bwrap:
            environ["PYTHONPATH"] = str(rundir / "in")
        events_path = rundir / "events.jsonl"
        try:
            with open(events_path, "wb") as events_file:
                fd = events_file.fileno()
                execution = self._spawn(job, self._command(job, envdir, rundir, uid, fd), environ,
                                        fd, events_path)
            if self.bwrap:
                execution.isolation["uid"] = uid
            return execution
        finally:
            shutil.rmtree(rundir, ignore_errors=True)

    def _spawn(self, job: SandboxJob, cmd: list[str], environ: dict[str, str], events_fd: int,
               events_path: Path) -> Execution:
        limits = Limits.of(job, self.settings)
        started = time.monotonic()
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=environ, pass_fds=(events_fd,),
                                    preexec_fn=_rlimits(limits))
        except OSError as exc:
            raise RuntimeFault(f"cannot start the sandbox: {exc}") from exc
        assert proc.stdout is not None and proc.stderr is not None  # both are pipes
        readers = [CappedReader(s, self.settings.log_cap_bytes) for s in (proc.stdout, proc.stderr)]
        for reader in readers:
            reader.start()
        timed_out = False
        try:
            proc.wait(timeout=job.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for reader in readers:
            reader.join(timeout=10)
        rc = proc.returncode
        return Execution(
            events=read_events(events_path),
            returncode=rc,
            signal=self._signal_of(rc),
            timed_out=timed_out,
            stdout=readers[0].output.text(),
            stderr=readers[1].output.text(),
            truncated=readers[0].output.truncated or readers[1].output.truncated,
            seconds=time.monotonic() - started,
            isolation={**self.isolation(), **limits.summary()},
        )

    def _signal_of(self, rc: int | None) -> str | None:
        if rc is None:
            return None
        if rc < 0:
            return signal_name(-rc)
        # bwrap and unshare report a child killed by signal N as exit status 128 + N.
        if (self.bwrap or self.unshare) and 128 < rc < 128 + 65:
            return signal_name(rc - 128)
        return None
