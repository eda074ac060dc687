"""Whether a process is still alive, told from outside: the one check for claims and containers.

A process is named by a token "<host>:<pid>:<create time>" (psutil's create
time, so a pid that the kernel reused for another process is not mistaken for
the one that made the token). Runs claimed in the store and sandbox containers
carry the token of the process that owns them; recovery and the container
sweep ask `token_alive` before taking them over.
"""

from __future__ import annotations

import os
import socket

import psutil


def _create_time(pid: int) -> str | None:
    """The process's create time as text; None when it is gone (a zombie counts as gone)."""
    try:
        process = psutil.Process(pid)
        if process.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            return None
        return f"{process.create_time():.2f}"
    except psutil.Error:
        return None


def pid_alive(pid: int) -> bool:
    """True while `pid` runs on this host."""
    return _create_time(pid) is not None


def process_token(pid: int | None = None) -> str:
    """The token of process `pid` (this process by default)."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_create_time(pid) or '?'}"


def token_alive(token: str) -> bool | None:
    """Whether the token's process still runs: None when it belongs to another host (cannot tell).

    A token without a create time (written by an older release: "<host>:<pid>") is
    judged by its pid alone.
    """
    host, _, rest = token.partition(":")
    pid_text, _, created = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return None
    now = _create_time(int(pid_text))
    return now is not None and created in ("", "?", now)


def claimer_gone(token: str) -> bool:
    """True when a run's claimer is provably dead, or is this very process (an earlier attempt)."""
    return token == process_token() or token_alive(token) is False
