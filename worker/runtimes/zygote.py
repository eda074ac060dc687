"""A zygote per environment: TVM imported once, each warm sandbox forked from it in milliseconds.

The zygote is the harness in `--zygote` mode (images/harness/zygote.py) inside
bubblewrap: it imports TVM and waits on a control socket. `spawn` sends it a
sandbox's limits and uid with the sandbox's descriptors (its stdin, stdout,
stderr and events pipes, and a reply socket); the zygote forks the sandbox
into namespaces of its own, isolated as a sandbox bubblewrap starts, and the
reply brings a pidfd of it, then its wait status. The sandbox is then a
LocalSandbox like any other: handed one case, used once, discarded.

Why: a sandbox that imports TVM itself spends 1.5-2 s of CPU before its case;
on a busy worker (a burst, a bisection) that import is most of a run's CPU.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from tvmrepro.environments import Environment
from tvmrepro.errors import RuntimeFault
from worker.runtimes.base import PTYS_MAX, TMPFS_INODES, WORKDIR_INODES, Limits, rlimit_names

log = logging.getLogger(__name__)
ZYGOTE_LOG = "zygote.log"  # in its run directory: what it and its keepers wrote
READY_TIMEOUT_S = 300  # importing TVM on a loaded machine
REPLY_TIMEOUT_S = 10  # from a request to the sandbox's pidfd: a fork and a few mounts


class ForkedProcess:
    """A sandbox forked by a zygote, as the LocalSandbox sees a process (Popen's subset)."""

    def __init__(self, pidfd: int, reply: socket.socket, stdin: IO[bytes], stdout: IO[bytes],
                 stderr: IO[bytes]) -> None:
        self.pidfd, self.reply = pidfd, reply
        self.stdin: IO[bytes] | None = stdin
        self.stdout: IO[bytes] | None = stdout
        self.stderr: IO[bytes] | None = stderr
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Its exit code once it ended (negative: the signal that ended it), else None."""
        if self.returncode is None and self._ended(0):
            self._collect()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for its end; subprocess.TimeoutExpired past `timeout`."""
        if self.returncode is None:
            if not self._ended(timeout):
                raise subprocess.TimeoutExpired("sandbox", timeout or 0)
            self._collect()
        assert self.returncode is not None
        return self.returncode

    def _ended(self, timeout: float | None) -> bool:
        """Whether it ended, waiting up to `timeout` (a pidfd reads as ready once it has)."""
        poller = select.poll()  # not select(): a worker may hold more than 1024 descriptors
        poller.register(self.pidfd, select.POLLIN)
        return bool(poller.poll(None if timeout is None else timeout * 1000))

    def _collect(self) -> None:
        """Its wait status, which its keeper sends once it has reaped it."""
        self.reply.settimeout(REPLY_TIMEOUT_S)
        try:
            status = int(self.reply.recv(64))
            self.returncode = os.waitstatus_to_exitcode(status)
        except (OSError, ValueError):  # the keeper died with it (the zygote was stopped)
            self.returncode = -signal.SIGKILL

    def kill_tree(self) -> None:
        """Kill it; it is PID 1 of its namespace, so everything it started goes with it."""
        with contextlib.suppress(OSError):  # it ended already
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def host_pid(self) -> int | None:
        """Its pid as this host sees it (from its pidfd), None once it ended."""
        if self.pidfd < 0:
            return None
        try:
            with open(f"/proc/self/fdinfo/{self.pidfd}") as info:
                for line in info:
                    if line.startswith("Pid:"):
                        pid = int(line.split()[1])
                        return pid if pid > 0 else None
        except (OSError, ValueError):
            pass
        return None

    def release(self) -> None:
        """Close the handles (the LocalSandbox does, once it ended or was killed)."""
        if self.returncode is None:  # never waited for: what it ended with is not known
            self.returncode = -signal.SIGKILL
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1
        self.reply.close()


class Zygote:
    """One environment's zygote process and its control socket."""

    def __init__(self, proc: subprocess.Popen[bytes], control: socket.socket,
                 hold: contextlib.ExitStack, rundir: Path) -> None:
        self.proc, self.control, self.hold, self.rundir = proc, control, hold, rundir
        self.children: list[ForkedProcess] = []  # those not known to have ended
        self.last_spawn = time.monotonic()

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> bool:
        """Until it imported TVM and serves requests; False when it died or took too long."""
        self.control.settimeout(timeout_s)
        try:
            return self.control.recv(16) == b"ready"
        except OSError:
            return False
        finally:
            self.control.settimeout(None)

    def alive(self) -> bool:
        """Whether it still serves."""
        return self.proc.poll() is None

    def log_tail(self) -> str:
        """The end of what it wrote (why it died), for the log."""
        try:
            return (self.rundir / ZYGOTE_LOG).read_bytes()[-2000:].decode(errors="replace")
        except OSError:
            return ""

    def busy(self) -> bool:
        """Whether a sandbox it forked still lives (stopping it would end that sandbox)."""
        self.children = [c for c in self.children if c.poll() is None]
        return bool(self.children)

    def spawn(self, limits: Limits, uid: int, workdir: str
              ) -> tuple[ForkedProcess, IO[bytes]]:
        """A new sandbox with these limits and uid; its process and its events stream."""
        request = {"uid": uid, "workdir": workdir, "tmpfs_mb": limits.tmpfs_mb,
                   "inodes": WORKDIR_INODES, "tmpfs_inodes": TMPFS_INODES,
                   "ptys": PTYS_MAX, "rlimits": rlimit_names(limits)}
        pipes = [os.pipe() for _ in range(4)]  # stdin, stdout, stderr, events
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # The sandbox reads stdin's read end and writes the others' write ends.
        given = [pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1], theirs.fileno()]
        kept = [pipes[0][1], pipes[1][0], pipes[2][0], pipes[3][0]]
        try:
            socket.send_fds(self.control, [json.dumps(request).encode()], given)
            mine.settimeout(REPLY_TIMEOUT_S)
            message, fds, _, _ = socket.recv_fds(mine, 64, 1)
            if message != b"started" or len(fds) != 1:
                raise OSError("the zygote did not start the sandbox")
            mine.settimeout(None)
        except BaseException:
            for fd in kept:
                os.close(fd)
            mine.close()
            raise
        finally:
            for fd in given[:4]:
                os.close(fd)
            theirs.close()
        stdin, stdout, stderr, events = (os.fdopen(kept[0], "wb"), os.fdopen(kept[1], "rb"),
                                         os.fdopen(kept[2], "rb"), os.fdopen(kept[3], "rb"))
        process = ForkedProcess(fds[0], mine, stdin, stdout, stderr)
        self.children = [c for c in self.children if c.returncode is None] + [process]
        self.last_spawn = time.monotonic()
        return process, events

    def stop(self) -> None:
        """End it (and so every sandbox it forked: they live in its PID namespace)."""
        with contextlib.suppress(OSError):
            self.control.close()
        if self.proc.poll() is None:  # reaped already: its group id may be another's by now
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.hold.close()


def control_pair() -> tuple[socket.socket, int]:
    """The runtime's end of a zygote's control socket, and the descriptor the zygote inherits."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    return mine, theirs.detach()


class Zygotes:
    """A runtime's zygotes, one per environment: started when a sandbox is first asked for,
    started again when dead, stopped when idle. Forking is turned off for good (each sandbox
    then imports TVM itself) when a zygote cannot start at all: a kernel that refuses it."""

    def __init__(self, start: Callable[[Environment], Zygote], idle_s: float) -> None:
        self.start, self.idle_s = start, idle_s
        self.running: dict[str, Zygote] = {}
        self.enabled = True
        self.lock = threading.Lock()  # the pool's starter and reserve fork, its reaper stops

    def spawn(self, env: Environment, limits: Limits, uid: int, workdir: str,
              start: bool = True) -> tuple[ForkedProcess, IO[bytes]] | None:
        """A sandbox forked by env's zygote (started first if none lives and `start`); None
        without one."""
        with self.lock:
            zygote = self._live(env, start)
            if zygote is None:
                return None
            try:
                return zygote.spawn(limits, uid, workdir)
            except OSError as exc:  # it died meanwhile: the next sandbox starts a new one
                log.warning("the zygote of %s did not fork: %s", env.id, exc)
                del self.running[env.key]
                zygote.stop()
                return None

    def _live(self, env: Environment, start: bool) -> Zygote | None:
        zygote = self.running.get(env.key)
        if zygote is not None and not zygote.alive():
            log.warning("the zygote of %s died: %s", env.id, zygote.log_tail())
            del self.running[env.key]
            zygote.stop()
            zygote = None
        if zygote is None and start and self.enabled:
            try:
                zygote = self.running[env.key] = self.start(env)
            except (OSError, RuntimeFault) as exc:
                self._disable(str(exc))
        return zygote

    def adopt(self, env: Environment, zygote: Zygote) -> None:
        """Fork env's sandboxes from `zygote` (started and ready) from now on."""
        with self.lock:
            replaced = self.running.pop(env.key, None)
            self.running[env.key] = zygote
        if replaced is not None:
            replaced.stop()

    def disable(self, why: str) -> None:
        """Forking does not work here: stop every zygote, start none again (logged)."""
        with self.lock:
            self._disable(why)

    def _disable(self, why: str) -> None:
        log.warning("sandboxes are not forked here (each imports TVM itself): %s", why)
        self.enabled = False
        for zygote in self.running.values():
            zygote.stop()
        self.running.clear()

    def reap(self) -> None:
        """Stop the zygotes idle as long as a waiting sandbox may be (none of theirs lives)."""
        with self.lock:
            for env_id, zygote in list(self.running.items()):
                if time.monotonic() - zygote.last_spawn >= self.idle_s and not zygote.busy():
                    del self.running[env_id]
                    zygote.stop()

    def stop_all(self) -> None:
        """Stop every zygote (and the sandboxes they forked)."""
        with self.lock:
            for zygote in self.running.values():
                zygote.stop()
            self.running.clear()
