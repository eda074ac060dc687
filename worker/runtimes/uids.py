"""Sandbox uids: each live sandbox on this host has one no other live sandbox has.

RLIMIT_NPROC counts the processes of a uid across the whole host, so two sandboxes sharing
one would share its process limit: one case's fork bomb would leave another (another user's,
in another worker) unable to start a thread. A uid is drawn at random and claimed by an
exclusive lock on a file named after it, in a directory every worker on the host shares; the
lock is held for the sandbox's life and the kernel lets it go when its holder closes it or
dies, so a crashed worker leaves no uid taken. The file goes with a clean release; one left by
a crash is taken over by the next draw of its uid.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import tempfile
from pathlib import Path

SANDBOX_UID_RANGE = (200_000, 260_000)
CLAIM_ATTEMPTS = 64  # at 1,000 live sandboxes one draw in 60 is taken: 64 misses in a row is a fault


def uid_locks_dir() -> Path:
    """Where the claims lie: /run's (only root writes there, and sandboxes run as root's
    children) when this is root, else the temporary directory's."""
    base = Path("/run/lock") if os.geteuid() == 0 and os.path.isdir("/run/lock") else Path(
        tempfile.gettempdir())
    path = base / "tvmrepro-sandbox-uids"
    path.mkdir(mode=0o755, exist_ok=True)
    return path


def claim_uid(hold: contextlib.ExitStack) -> int:
    """A uid no live sandbox on this host has, claimed until `hold` closes."""
    directory = uid_locks_dir()
    for _ in range(CLAIM_ATTEMPTS):
        uid = SANDBOX_UID_RANGE[0] + secrets.randbelow(SANDBOX_UID_RANGE[1] - SANDBOX_UID_RANGE[0])
        path = directory / str(uid)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # Locked, but perhaps a file its releaser unlinked meanwhile: then not a claim.
            claimed = os.stat(path).st_ino == os.fstat(fd).st_ino
        except (BlockingIOError, FileNotFoundError):
            claimed = False
        if not claimed:
            os.close(fd)
            continue
        hold.callback(_release, path, fd)
        return uid
    raise OSError(f"no free sandbox uid in {CLAIM_ATTEMPTS} draws: {directory} holds the claims")


def _release(path: Path, fd: int) -> None:
    """Let the uid go: its file removed while still locked (a claim racing for it sees the
    unlinked file and draws again), then the lock."""
    with contextlib.suppress(OSError):
        os.unlink(path)
    os.close(fd)
