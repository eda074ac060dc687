"""The local runtime: the harness in the environment's interpreter, sandboxed without Docker.

Each sandbox runs under bubblewrap (when installed and we are root) with the root, mounts,
namespaces and privileges commands.py gives it, as a uid no other live sandbox has (uids.py),
in a cgroup of its own where one can be made (cgroup.py); without bubblewrap it falls back to
rlimits plus `unshare` for the network, and the result's `isolation` says so. Always: a
wall-clock timeout that kills the whole tree, rlimits, a scrubbed environment, capped
stdout/stderr, the work directory removed after.

The sandbox process is the harness's supervisor: it imports TVM, waits for its
one case on stdin, runs it in a child and reports the child's end on a channel
the child cannot reach (sandbox.py). A worker keeps such sandboxes warm
(`prewarm`, warm.py), each forked by its environment's zygote, which imported
TVM once (zygote.py); a run takes one, or starts one when none waits.
"""

from __future__ import annotations

import compileall
import contextlib
import logging
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from images import HARNESS_DIR
from tvmrepro.environments import Environment
from tvmrepro.errors import ProvisionError, RuntimeFault
from tvmrepro.liveness import pid_alive
from tvmrepro.settings import Settings
from worker.environments.provision import collect_builds, in_use, provision, read_fingerprint
from worker.runtimes.base import (
    CancelCheck,
    Execution,
    Fingerprint,
    Limits,
    SandboxJob,
    cancelled_before_start,
    fingerprint_tvm,
    new_key,
)
from worker.runtimes.cgroup import Cgroups
from worker.runtimes.commands import WORK_MOUNT, SandboxCommands, rlimits_preexec, sandbox_environ
from worker.runtimes.gpu import gpu_environ, gpu_summary
from worker.runtimes.isolation import Isolation
from worker.runtimes.sandbox import LocalSandbox, TreePopen, with_workdir_tmpfs, workdir_summary
from worker.runtimes.uids import claim_uid
from worker.runtimes.warm import WarmSandboxes
from worker.runtimes.zygote import ZYGOTE_LOG, Zygote, Zygotes, control_pair

log = logging.getLogger(__name__)
HAND_OVER_ATTEMPTS = 3  # sandboxes that died before taking the case cost no run


class LocalRuntime:
    """Runs the harness with a provisioned environment's interpreter, in a sandbox."""

    name = "local"
    fork_workdir = WORK_MOUNT  # where a forked sandbox mounts its work directory (a class
    # attribute: the test standing for a kernel that refuses a forked sandbox's mounts moves it)

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.bwrap = shutil.which("bwrap") if os.geteuid() == 0 else None
        self.unshare = shutil.which("unshare") if os.geteuid() == 0 else None
        # A zygote per environment forks the warm sandboxes (zygote.py), idle as long as they.
        self.zygotes = (Zygotes(self._start_zygote, settings.warm_idle_s)
                        if self.bwrap is not None else None)
        self.warm: WarmSandboxes[LocalSandbox] = WarmSandboxes(
            settings, self._start_warm, after_reap=self.zygotes.reap if self.zygotes else None)
        # A cgroup per run (memory, CPU share, processes), where one can be made (cgroup.py).
        self.cgroups = Cgroups(settings.run_cgroups)
        self.sweep_rundirs()
        # The harness's bytecode next to it (the environments' Python is this one's minor
        # version): the sandbox mounts it read-only and would compile it from source every run.
        compileall.compile_dir(str(HARNESS_DIR), quiet=2)

    def sweep_rundirs(self) -> list[Path]:
        """Remove the sandbox directories of processes that are gone (a worker killed mid-run)."""
        removed = []
        for rundir in self.settings.work_dir.glob("sandbox-*-*"):
            owner = rundir.name.split("-")[1]
            if owner.isdigit() and not pid_alive(int(owner)):  # a zombie counts as gone
                shutil.rmtree(rundir, ignore_errors=True)
                removed.append(rundir)
        return removed

    @property
    def commands(self) -> SandboxCommands:
        """The command lines of its sandboxes, with the tools it has now (a test takes them)."""
        return SandboxCommands(self.bwrap, self.unshare)

    def isolation(self) -> Isolation:
        """What this runtime can apply on this machine."""
        return self.commands.isolation()

    def _zygote_command(self, env: Environment, envdir: Path, rundir: Path, limits: Limits,
                        control_fd: int) -> tuple[list[str], list[int]]:
        """The zygote's command line (a seam: a test stands a refusing kernel in here)."""
        return self.commands.zygote(env, envdir, rundir, limits, control_fd)

    def _prepare(self) -> Path:
        # Named by its owner: a sandbox directory whose worker died is swept (sweep_rundirs).
        rundir = self.settings.work_dir / f"sandbox-{os.getpid()}-{uuid.uuid4().hex}"
        (rundir / "work").mkdir(parents=True)
        os.chmod(rundir, 0o755)
        if not self.bwrap:  # without a PYTHONPATH mount, the harness is found next to the case
            shutil.copytree(HARNESS_DIR, rundir / "in" / "harness",
                            ignore=shutil.ignore_patterns("__pycache__"))
            os.chmod(rundir / "in", 0o755)
        return rundir

    def fingerprint(self, env: Environment) -> Fingerprint:
        """env's fingerprint, provisioning it here first if it is missing or stale."""
        return provision(self.settings, env)

    def prewarm(self, envs: list[Environment], processes: int = 1) -> None:
        """Keep sandboxes waiting for each of `envs` provisioned here, as warm.py says."""
        # The frontend flavours made here already (each made by a report's first need) too.
        flavours = [env.with_frontends() for env in envs if env.frontend_packages]
        self.warm.prewarm([*envs, *flavours], processes,
                          serves=lambda env: read_fingerprint(self.settings, env) is not None)

    def reserve(self, env: Environment, timeout_s: int, memory_mb: int, count: int = 1) -> None:
        """Start `count` sandboxes for env now, without waiting for them: the next runs of env
        with these limits take them. Forked by env's zygote when one lives (a worker keeps one
        for each environment it serves), else each imports TVM (all of a bisection's releases
        at once)."""
        limits = Limits.of(SandboxJob("", "", env, {"timeout_s": timeout_s,
                                                     "memory_mb": memory_mb}, ""), self.settings)
        for _ in range(count):
            # A zygote is not started here: it would die with this (the caller's) thread.
            sandbox = self._fork(env, limits, start_zygote=False)
            self.warm.reserve(env, limits, sandbox or self.start(env, limits))

    def close(self) -> None:
        """Stop the waiting sandboxes; remove what killed processes left since the start."""
        self.warm.close()
        if self.zygotes is not None:
            self.zygotes.stop_all()
        self.cgroups.close()
        self.sweep_rundirs()

    def _start_warm(self, env: Environment, limits: Limits) -> LocalSandbox:
        """A warm sandbox, ready: forked by env's zygote, else started with its own import."""
        forked = self._fork(env, limits)
        if forked is not None:
            if forked.wait_ready():
                return forked
            self._forked_sandbox_failed(env, forked)
        sandbox = self.start(env, limits)
        if not sandbox.wait_ready():
            sandbox.discard()
            raise RuntimeFault(f"a warm sandbox for {env.id} did not get ready")
        return sandbox

    def _fork(self, env: Environment, limits: Limits,
              start_zygote: bool = True) -> LocalSandbox | None:
        """A sandbox forked by env's zygote (started first if none lives and `start_zygote`);
        None without one."""
        if self.zygotes is None:
            return None
        hold = contextlib.ExitStack()
        try:
            uid = claim_uid(hold)
            forked = self.zygotes.spawn(env, limits, uid, self.fork_workdir, start_zygote)
        except BaseException:
            hold.close()
            raise
        if forked is None:
            hold.close()
            return None
        isolation: Isolation = {**self.isolation(), "uid": uid,
                                "workdir": workdir_summary(limits), **gpu_summary(env)}
        sandbox = LocalSandbox(forked[0], None, limits, isolation, hold,
                               self.settings.log_cap_bytes)
        sandbox.watch(forked[1])
        return sandbox

    def _forked_sandbox_failed(self, env: Environment, sandbox: LocalSandbox) -> None:
        """A forked sandbox died before it was ready: forking does not work here (the log says
        why); from now on each sandbox imports TVM itself."""
        if sandbox.alive():
            sandbox.kill()
        for reader in sandbox.outputs:
            reader.join(timeout=2)
        sandbox.discard()
        if self.zygotes is not None:
            self.zygotes.disable(f"a sandbox forked for {env.id} did not get ready: "
                                 f"{sandbox.outputs[1].output.text()[-2000:]}")

    def start_zygotes(self, envs: list[Environment]) -> None:
        """Start the zygotes of `envs` at once (their TVM imports overlap) and wait until they
        are ready: from then on every sandbox of theirs is forked, one TVM import per
        environment for all of a command's runs. A zygote dies with the thread that started it:
        the caller's must outlive the runs (a one-shot command's main thread). Where one does
        not get ready, forking is turned off and each sandbox imports TVM itself."""
        if self.zygotes is None or not self.zygotes.enabled:
            return
        launched: list[tuple[Environment, Zygote]] = []
        try:
            for env in envs:
                launched.append((env, self._launch_zygote(env)))
            for env, zygote in launched:
                self._zygote_ready(env, zygote)
        except BaseException as exc:  # none is left running, whatever stopped the start
            for _env, zygote in launched:
                zygote.stop()
            if not isinstance(exc, RuntimeFault):
                raise
            self.zygotes.disable(str(exc))
            return
        for env, zygote in launched:
            self.zygotes.adopt(env, zygote)

    def _start_zygote(self, env: Environment) -> Zygote:
        """env's zygote, started and ready (it imported TVM); RuntimeFault if it did not get so."""
        return self._zygote_ready(env, self._launch_zygote(env))

    def _zygote_ready(self, env: Environment, zygote: Zygote) -> Zygote:
        """`zygote`, once it imported TVM; stopped and RuntimeFault if it did not get so."""
        if not zygote.wait_ready():
            why = zygote.log_tail() if not zygote.alive() else "it took too long"
            zygote.stop()
            raise RuntimeFault(f"the zygote of {env.id} did not get ready: {why}")
        return zygote

    def _launch_zygote(self, env: Environment) -> Zygote:
        """env's zygote, started (it goes on importing TVM); RuntimeFault if it cannot start.
        Nothing it took (the build, its run directory, its control socket) outlives a failure."""
        with contextlib.ExitStack() as starting:
            envdir = starting.enter_context(in_use(self.settings, env))
            rundir = self._prepare()
            starting.callback(shutil.rmtree, rundir, True)
            control, control_fd = control_pair()
            starting.callback(control.close)
            command, fds = self._zygote_command(env, envdir, rundir,
                                                Limits.pooled(self.settings, env), control_fd)
            try:
                with open(rundir / ZYGOTE_LOG, "wb") as output:  # a file: never blocks a keeper
                    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output,
                                            stderr=output,
                                            env={**sandbox_environ(env), **gpu_environ(env)},
                                            pass_fds=(control_fd, *fds), start_new_session=True)
            except OSError as exc:
                raise RuntimeFault(f"cannot start the zygote of {env.id}: {exc}") from exc
            finally:
                for fd in (control_fd, *fds):
                    os.close(fd)
            hold = starting.pop_all()  # started: what it took is the zygote's from here on
        return Zygote(proc, control, hold, rundir)

    def start(self, env: Environment, limits: Limits) -> LocalSandbox:
        """Start a sandbox for env with these limits; it imports TVM and waits for a case."""
        hold = contextlib.ExitStack()
        try:
            # The build is held for the sandbox's life: re-provisioning cannot remove it meanwhile.
            envdir = hold.enter_context(in_use(self.settings, env))
            return self._spawn(env, envdir, limits, hold)
        except ProvisionError as exc:
            hold.close()
            raise RuntimeFault(str(exc)) from exc
        except BaseException:
            hold.close()
            raise

    def _spawn(self, env: Environment, envdir: Path, limits: Limits,
               hold: contextlib.ExitStack) -> LocalSandbox:
        uid = claim_uid(hold)
        rundir = self._prepare()
        environ = {**sandbox_environ(env), **gpu_environ(env)}
        if not self.bwrap:
            environ["PYTHONPATH"] = str(rundir / "in")
        events_r, events_w = os.pipe()
        inner, fds = self.commands.sandbox(env, envdir, rundir, uid, limits, events_w)
        command, workdir = with_workdir_tmpfs(self.unshare, inner, rundir / "work", limits, uid)
        try:
            proc = TreePopen(command,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=environ,
                                    pass_fds=(events_w, *fds), preexec_fn=rlimits_preexec(limits))
        except OSError as exc:
            os.close(events_r)
            shutil.rmtree(rundir, ignore_errors=True)
            raise RuntimeFault(f"cannot start the sandbox: {exc}") from exc
        finally:
            for fd in (events_w, *fds):
                os.close(fd)
        isolation: Isolation = {**self.isolation(), "workdir": workdir, **gpu_summary(env)}
        if self.bwrap:
            isolation["uid"] = uid
        sandbox = LocalSandbox(proc, rundir, limits, isolation, hold, self.settings.log_cap_bytes)
        sandbox.watch(os.fdopen(events_r, "rb"))
        return sandbox

    def execute(self, job: SandboxJob) -> Execution:
        """Run the harness for this job in a (warm, else fresh) sandbox and collect the run."""
        with self.warm.running():  # the replacements of warm sandboxes wait: their CPU is its
            return self._execute(job)

    def _execute(self, job: SandboxJob) -> Execution:
        facts = read_fingerprint(self.settings, job.env)
        if facts is None and job.env.frontends and read_fingerprint(
                self.settings, job.env.plain()) is not None:
            facts = self._make_flavour(job.env)
        if facts is None:
            raise RuntimeFault(f"environment {job.env.id} is not provisioned here "
                               f"(run: tvmrepro env provision {job.env.id})")
        limits, key = Limits.of(job, self.settings), new_key()
        try:
            execution, warm = self._hand_over(job, limits, key)
        finally:
            self.warm.refill(job.env)  # once the run is over
        execution.isolation["warm"] = warm
        execution.tvm = fingerprint_tvm(facts)
        collect_builds(self.settings, job.env, wait=False)  # builds replaced during the run
        return execution

    def _make_flavour(self, env: Environment) -> Fingerprint:
        """The frontend flavour of a served environment, made on its first report that imports
        torch or onnx (about 11 s from the package cache, longer with the first download)."""
        log.info("installing the frontend packages (%s) for %s, on first need",
                 ", ".join(f"{n} {v}" for n, v in sorted(env.frontend_packages.items())
                           if n in env.frontend_modules), env.id)
        try:
            facts = provision(self.settings, env)
        except ProvisionError as exc:
            raise RuntimeFault(f"cannot install the frontend packages of {env.id}: {exc}") from exc
        self.warm.serve(env)
        return facts

    def _hand_over(self, job: SandboxJob, limits: Limits, key: bytes) -> tuple[Execution, bool]:
        """The run in a sandbox that took the case; whether that one was warm."""
        cancelled = CancelCheck(job)
        for _ in range(HAND_OVER_ATTEMPTS):
            sandbox, warm, forked = self._sandbox_for(job.env, limits, cancelled)
            if sandbox is None:  # cancelled before it had one (waiting for a warm one)
                return cancelled_before_start(self.isolation()), False
            try:
                ready = sandbox.wait_ready(stop=cancelled)
                if ready and self._enter_cgroup(sandbox, job) and sandbox.hand_over(job, limits,
                                                                                   key):
                    return sandbox.finish(job, key, time.monotonic()), warm
                if cancelled():  # while a cold sandbox imported TVM: nothing to run
                    return cancelled_before_start(sandbox.isolation.copy()), warm
                if forked and not ready:  # forking fails here: the next attempt starts cold
                    self._forked_sandbox_failed(job.env, sandbox)
            finally:
                sandbox.discard()
        raise RuntimeFault(f"the sandbox for {job.env.id} died before it took the case")

    def _enter_cgroup(self, sandbox: LocalSandbox, job: SandboxJob) -> bool:
        """Move the sandbox into a new cgroup of the run's own, with the run's memory, before it
        takes the case (where none can be made, its isolation says why); False when it died."""
        cgroup = self.cgroups.make(job.run_id or uuid.uuid4().hex, job.memory_mb,
                                   self.settings.sandbox_pids)
        if cgroup is None:
            sandbox.isolation.update(self.cgroups.isolation())
            return True
        return sandbox.enter(cgroup)

    def _sandbox_for(self, env: Environment, limits: Limits, cancelled: Callable[[], bool]
                     ) -> tuple[LocalSandbox | None, bool, bool]:
        """A reserved or warm sandbox for the case's limits (warm.py), else a fresh one with the
        case's own; None when the run was cancelled before it had one. Whether it is warm, and
        whether it was forked for this run just now."""
        warm = self.warm.take(env, limits, stop=cancelled)
        if warm is not None:
            return warm, True, False
        if cancelled():
            return None, False, False
        # Forked by env's zygote where one lives (a one-shot command's, start_zygotes), else
        # started with an import of its own.
        forked = self._fork(env, limits, start_zygote=False)
        if forked is not None:
            return forked, True, True
        return self.start(env, limits), False, False
