"""Who owns a sandbox container: a process, named so that its death can be told from outside.

A token is "<host>:<pid>:<start time>" (the start time from /proc, so a reused
pid is not mistaken for the process that started the container). A runtime
labels its containers with its token; a runtime starting later removes the
containers of tokens from its own host whose process is gone.
"""

from __future__ import annotations

import os
import socket


def _start_time(pid: int) -> str | None:
    """The start time of a running process; None when it is gone (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            # After the command name (which may hold spaces): state, ..., start time (field 22).
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


def process_token(pid: int | None = None) -> str:
    """The token of process `pid` (this process by default)."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid) or '?'}"


def token_alive(token: str) -> bool | None:
    """Whether the token's process still runs: None when it is another host's (cannot tell)."""
    host, _, rest = token.partition(":")
    pid_text, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return None
    now = _start_time(int(pid_text))
    return now is not None and (started in ("?", now))
