"""Whether a process is still alive, told from outside: the one check for claims and containers.

A process is named by a token "<host>:<pid>:<create time>", so that a pid the
kernel reused for another process is not mistaken for the one that made the
token. The create time is the boot's id and the process's start in clock ticks
since that boot, not psutil's wall-clock create time: that one adds the kernel's
`btime`, which moves by a second when the clock is adjusted, and a live process
then read as gone. Runs claimed in the store and sandbox containers
carry the token of the process that owns them; recovery and the container
sweep ask `token_alive` before taking them over. A process of another host cannot be
seen from here: its claims are held while its host has a live worker (`host_lost`, the
lease of the workers' heartbeats).
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Collection
from pathlib import Path

# How far a wall-clock create time (older releases' tokens) may be from psutil's now.
WALL_CLOCK_SLACK_S = 1.5


@functools.cache
def _boot() -> str:
    """This boot's id, shortened (a token of an earlier boot names no live process)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
    except OSError:
        return "boot"


def _create_time(pid: int) -> str | None:
    """The process's create time as text; None when it is gone (a zombie counts as gone)."""
    try:
        # /proc/<pid>/stat: the fields after the command's ")" start at the state (field 3);
        # field 22 is the start in clock ticks since boot.
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    if fields[0] in ("Z", "X"):
        return None
    return f"{_boot()}+{fields[19]}"


def pid_alive(pid: int) -> bool:
    """True while `pid` runs on this host."""
    return _create_time(pid) is not None


def process_token(pid: int | None = None) -> str:
    """The token of process `pid` (this process by default)."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_create_time(pid) or '?'}"


def token_host(token: str | None) -> str | None:
    """The host a process token names (None for no token, or one without a host)."""
    return token.partition(":")[0] or None if token else None


def token_alive(token: str) -> bool | None:
    """Whether the token's process still runs: None when it belongs to another host (cannot tell).

    Tokens of older releases: one without a create time ("<host>:<pid>") is judged by its
    pid alone; one with psutil's wall-clock create time by that time, give or take the
    second by which the kernel's btime may have moved since.
    """
    host, _, rest = token.partition(":")
    pid_text, _, created = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return None
    now = _create_time(int(pid_text))
    if now is None or created in ("", "?", now):
        return now is not None
    import psutil  # only for an older release's token: 30 ms of every command's start otherwise

    try:
        return abs(float(created) - psutil.Process(int(pid_text)).create_time()) < WALL_CLOCK_SLACK_S
    except (ValueError, psutil.Error):
        return False


def host_lost(token: str, live_hosts: Collection[str]) -> bool:
    """True when the token names another host that has no live worker (`live_hosts`: those
    with a worker's heartbeat within worker_stale_s): its lease on what it claimed is over.
    This host is never lost: its own processes are told dead or alive by their pids."""
    host = token_host(token)
    return host is not None and host != socket.gethostname() and host not in live_hosts


def claimer_gone(token: str, live_hosts: Collection[str] | None = None) -> bool:
    """True when a run's claimer is provably dead, or is this very process (an earlier attempt),
    or, given the hosts that have a live worker, runs on a host that has none."""
    return (token == process_token() or token_alive(token) is False
            or (live_hosts is not None and host_lost(token, live_hosts)))
