"""A shutdown signal that finds the worker's main thread waiting in a broker poll ends the wait at
once (worker/stopping.py), on a real kombu virtual transport (the in-memory one polls as the
embedded SQL broker does)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from types import FrameType

import pytest
from celery.exceptions import WorkerShutdown
from celery.worker import state
from kombu import Connection, Queue

from worker.stopping import prompt, waiting_for_the_broker


@pytest.fixture
def shutdown_flag() -> Iterator[None]:
    yield
    state.should_stop = None  # the flag is the worker's global state: leave none behind


def _flag(signum: int, frame: FrameType | None) -> None:
    """What Celery's warm-shutdown handler does that matters here: set its flag."""
    state.should_stop = 0


# Long beside the 0.2 s of the signal: a busy host's delay in handling it stays far below it.
DRAIN_S = 6.0


def _drain_until_signal(handler: signal.Handlers | object) -> float:
    """Seconds a DRAIN_S drain of an empty queue lasted, SIGALRM (handled by `handler`) at 0.2 s."""
    previous = signal.signal(signal.SIGALRM, handler)  # type: ignore[arg-type]
    with Connection("memory://", transport_options={"polling_interval": 0.1}) as conn:
        queue = Queue("tvmrepro-stopping-test")
        with conn.Consumer(queue, callbacks=[lambda body, message: None]):
            started = time.monotonic()
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            try:
                conn.drain_events(timeout=DRAIN_S)
            except TimeoutError:
                pass
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
            return time.monotonic() - started


def test_a_shutdown_in_a_broker_poll_leaves_it_at_once(shutdown_flag: None) -> None:
    started = time.monotonic()
    with pytest.raises(WorkerShutdown):
        _drain_until_signal(prompt(_flag))
    assert time.monotonic() - started < DRAIN_S / 2  # left at the signal, not the drain's end
    # Celery's handler alone: the flag is set, the drain goes on to its end.
    state.should_stop = None
    assert _drain_until_signal(_flag) >= DRAIN_S - 0.1


def test_a_signal_elsewhere_is_left_to_celery(shutdown_flag: None) -> None:
    assert not waiting_for_the_broker(None)
    handler = prompt(_flag)
    handler(signal.SIGTERM, None)  # not in a poll: only Celery's flag, nothing raised
    assert state.should_stop == 0
