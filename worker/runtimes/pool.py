"""Warm sandboxes: started ahead with TVM imported, each used for exactly one run, then replaced.

A pool keeps up to `size` waiting sandboxes per key (an environment and the
limits the sandbox was started with). `take` hands one out (it is never given
back: the runtime ends it after its one run) and starts a replacement in the
background. A sandbox that died while waiting is dropped when found and never
handed out; one that waited longer than `idle_s` is stopped by the reaper.
Both runtimes use it through their warm-sandbox policy (warm.py): the local
runtime's sandbox is forked by its environment's zygote (zygote.py; a
bubblewrap process of its own where that does not work), Docker's is a
container. Sandboxes are started one at a time by one long-lived thread: a
zygote or a local sandbox dies with the thread that started it (bubblewrap's
--die-with-parent is the parent *thread*'s death signal). A replacement waits
until no run of this process has been going for QUIET_S (a container's or a
bubblewrap sandbox's TVM import would take the CPU of the runs that follow: a
bisection's next probes), unless a run needs that very sandbox, which then
starts at once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, Protocol, TypeVar

from tvmrepro.errors import RuntimeFault

log = logging.getLogger(__name__)
QUIET_S = 0.5  # between runs of one process less than this: a replacement waits for the end
STOP_POLL_S = 1.0  # how often a run waiting for a sandbox being started asks whether to stop


class WaitingSandbox(Protocol):
    """What the pool needs of a sandbox."""

    def alive(self) -> bool:
        """Whether it still waits for its case (it did not die)."""
        ...

    def discard(self) -> None:
        """Stop it and remove what it holds."""
        ...


S = TypeVar("S", bound=WaitingSandbox)


def _env_of(key: Hashable) -> object:
    """The environment of a pool key (environment, limits), for a log line."""
    return key[0] if isinstance(key, tuple) and key else key


class WarmPool(Generic[S]):
    """Single-use sandboxes started ahead, per key."""

    def __init__(self, start: Callable[[Hashable], S], size: int, idle_s: float,
                 after_reap: Callable[[], None] | None = None) -> None:
        self.start, self.size, self.idle_s = start, size, idle_s
        self.after_reap = after_reap  # what else the owner lets go when idle (its zygotes)
        self.waiting: dict[Hashable, list[tuple[float, S]]] = {}
        self.starting: dict[Hashable, int] = {}
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)  # a started sandbox joined `waiting`
        self.changed = threading.Condition(self.lock)  # requests, runs or wants changed
        self.closed = False
        self.requests: list[Hashable] = []  # sandboxes to start, oldest first
        self.wanted: dict[Hashable, int] = {}  # runs waiting for a requested sandbox
        self.active, self.last_run_end = 0, 0.0
        for target in (self._reap_forever, self._start_forever):
            threading.Thread(target=target, daemon=True).start()

    def take(self, key: Hashable, replace: bool = True,
             stop: Callable[[], bool] | None = None) -> S | None:
        """A live waiting sandbox for `key`, else the one being started, once ready (None when
        none waits or starts). A replacement is started now, or (replace=False) when the caller
        calls `fill` after its run: on few cores its TVM import then does not compete with the
        run, and a run that comes meanwhile waits for it rather than import TVM a second time.
        `stop` (the run was cancelled) is asked each STOP_POLL_S while it waits: None then."""
        found: S | None = None
        with self.lock:
            while True:
                queue = self.waiting.get(key, [])
                while queue and found is None:
                    _, sandbox = queue.pop(0)
                    if sandbox.alive():
                        found = sandbox
                    else:  # died while waiting: it costs no run
                        threading.Thread(target=sandbox.discard, daemon=True).start()
                if found is not None or self.closed or not self.starting.get(key, 0):
                    break
                # One is requested or being started: it is further on than a cold start would
                # be, and the starter takes a wanted one before any other.
                self.wanted[key] = self.wanted.get(key, 0) + 1
                self.changed.notify_all()
                self.arrived.wait(timeout=STOP_POLL_S if stop is not None else None)
                self.wanted[key] -= 1
                if stop is not None and self._unlocked(stop):
                    break
        if replace:
            self.fill(key)
        return found

    def _unlocked(self, ask: Callable[[], bool]) -> bool:
        """`ask` (a store read) with the pool's lock released: the other takers, the starter
        and the reaper do not wait on its round trip."""
        self.lock.release()
        try:
            return ask()
        finally:
            self.lock.acquire()

    def fill(self, key: Hashable) -> None:
        """Start, in the background, the sandboxes `key` lacks."""
        with self.lock:
            missing = self.size - len(self.waiting.get(key, [])) - self.starting.get(key, 0)
            if self.closed or missing <= 0:
                return
            self.starting[key] = self.starting.get(key, 0) + missing
            self.requests += [key] * missing
            self.changed.notify_all()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Around a run of this process: replacements wait until runs stop coming."""
        with self.lock:
            self.active += 1
        try:
            yield
        finally:
            with self.lock:
                self.active -= 1
                self.last_run_end = time.monotonic()
                self.changed.notify_all()

    def _next_request(self) -> Hashable | None:
        """The next key to start: one a run waits for, else the oldest once runs are quiet."""
        with self.lock:
            while not self.closed:
                wanted = [k for k in self.requests if self.wanted.get(k, 0) > 0]
                quiet_for = time.monotonic() - self.last_run_end
                if wanted or (self.requests and not self.active and quiet_for >= QUIET_S):
                    key = (wanted or self.requests)[0]
                    self.requests.remove(key)
                    return key
                waiting = self.requests and not self.active
                self.changed.wait(timeout=QUIET_S - quiet_for if waiting else None)
        return None

    def _start_forever(self) -> None:
        while (key := self._next_request()) is not None:
            self._start_one(key)

    def _start_one(self, key: Hashable) -> None:
        sandbox: S | None = None
        try:
            sandbox = self.start(key)
        except RuntimeFault as exc:  # a known cause (an image still being built): one line
            log.warning("no warm sandbox for %s yet: %s", _env_of(key), exc)
        except Exception:  # the next take starts a cold one and reports the fault with the run
            log.exception("could not start a warm sandbox for %s", key)
        with self.lock:
            self.starting[key] -= 1
            if sandbox is not None and not self.closed:
                self.waiting.setdefault(key, []).append((time.monotonic(), sandbox))
                sandbox = None
            self.arrived.notify_all()
        if sandbox is not None:
            sandbox.discard()

    def count(self, key: Hashable) -> int:
        """How many sandboxes wait for `key` now."""
        with self.lock:
            return len(self.waiting.get(key, []))

    def reap(self) -> int:
        """Stop the sandboxes that waited longer than idle_s, or died; how many."""
        now = time.monotonic()
        gone: list[S] = []
        with self.lock:
            for key, queue in self.waiting.items():
                keep = [(t, s) for t, s in queue if now - t < self.idle_s and s.alive()]
                gone += [s for t, s in queue if (t, s) not in keep]
                self.waiting[key] = keep
        for sandbox in gone:
            sandbox.discard()
        return len(gone)

    def _reap_forever(self) -> None:
        while not self.closed:
            time.sleep(min(self.idle_s / 4, 30.0))
            with contextlib.suppress(Exception):
                self.reap()
                if self.after_reap is not None:
                    self.after_reap()

    def close(self) -> None:
        """Stop every waiting sandbox; none is started after."""
        with self.lock:
            self.closed = True
            gone = [s for queue in self.waiting.values() for _, s in queue]
            self.waiting.clear()
            self.arrived.notify_all()
            self.changed.notify_all()
        for sandbox in gone:
            sandbox.discard()


class Reserved(Generic[S]):
    """Sandboxes started at once for runs known ahead (a bisection's releases, a reducer's
    candidates): their TVM imports overlap, each is taken by one run and never replaced.

    The runtime starts them from the caller's thread (a local sandbox lives as long as the
    thread that started it: the caller's, which waits for the runs anyway).
    """

    def __init__(self) -> None:
        self.waiting: dict[Hashable, list[S]] = {}
        self.lock = threading.Lock()

    def put(self, key: Hashable, sandbox: S) -> None:
        """Keep `sandbox` for the next run of `key`."""
        with self.lock:
            self.waiting.setdefault(key, []).append(sandbox)

    def take(self, key: Hashable) -> S | None:
        """A reserved sandbox for `key` that still lives (None when there is none)."""
        while True:
            with self.lock:
                found = self.waiting.get(key, [])
                if not found:
                    return None
                sandbox = found.pop(0)
            if sandbox.alive():
                return sandbox
            sandbox.discard()  # died while waiting: it costs no run

    def count(self, key: Hashable) -> int:
        """How many wait for `key`."""
        with self.lock:
            return len(self.waiting.get(key, []))

    def close(self) -> None:
        """Stop the sandboxes no run took."""
        with self.lock:
            gone = [s for queue in self.waiting.values() for s in queue]
            self.waiting.clear()
        for sandbox in gone:
            sandbox.discard()
