"""A worker on the embedded broker stops when told to, not at the end of its broker poll.

On a broker that kombu polls (SQL: the embedded broker of `tvmrepro up`), Celery's loop waits
for messages in a blocking drain of up to 2 s of polls, and checks for a shutdown only between
drains: a SIGTERM or SIGQUIT that lands in a drain waited for it (about 2 s of every stop,
measured). The main process's shutdown handlers are wrapped here so that a signal that finds
the main thread in that drain's wait between two polls leaves it at once, the way the loop
would have after the drain (Celery's own shutdown flag, raised as the loop raises it). A
signal anywhere else is left to Celery, as before.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType
from typing import Any

from celery.signals import worker_ready
from celery.worker import state
from kombu.transport.virtual.base import Transport

# Celery's shutdown signals in its main process (warm, cold, Ctrl-C).
SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGQUIT, signal.SIGINT)
_POLL_WAIT = Transport.drain_events.__code__  # the polling drain of kombu's virtual transports

Handler = Callable[[int, FrameType | None], Any]


def waiting_for_the_broker(frame: FrameType | None) -> bool:
    """Whether the interrupted frame is kombu's polling drain (between polls: nothing of a
    message is half done there)."""
    return frame is not None and frame.f_code is _POLL_WAIT


def prompt(handler: Handler) -> Handler:
    """`handler`, then, when it set Celery's shutdown flag while the main thread waited in a
    broker poll, the shutdown now instead of at the poll's end."""
    def handle(signum: int, frame: FrameType | None) -> Any:
        handler(signum, frame)
        if waiting_for_the_broker(frame):
            state.maybe_shutdown()  # raises WorkerShutdown or WorkerTerminate when flagged

    handle.__name__ = getattr(handler, "__name__", "handler")
    handle.prompt = True  # type: ignore[attr-defined]  # wrapped once (a consumer restart readies again)
    return handle


def _wrap_handlers(**_: object) -> None:
    for sig in SHUTDOWN_SIGNALS:
        current = signal.getsignal(sig)
        if callable(current) and not getattr(current, "prompt", False):
            signal.signal(sig, prompt(current))


def install() -> None:
    """Wrap the shutdown handlers once the worker is ready (Celery has installed its own)."""
    worker_ready.connect(_wrap_handlers, weak=False)
