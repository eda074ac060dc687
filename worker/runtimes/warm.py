"""The warm-sandbox policy both runtimes follow: how many, for which runs, from when, how long.

A worker process keeps TVMREPRO_WARM_SANDBOXES sandboxes waiting (none when 0) for each
environment it serves, each started with Limits.pooled: a run whose own limits that covers
takes one, and its replacement starts once the run is over. They are started when the process
starts if all the worker's fit in memory (warm_at_start), else from each environment's first
run; one that waited TVMREPRO_WARM_IDLE_S is stopped (the local runtime's zygotes, and a warm
container's own time limit, count from the same setting). Sandboxes reserved for runs known
ahead (a bisection's releases, a reducer's candidates) come first. The pool (pool.py) does the
starting, waiting and reaping; the runtime starts each sandbox its own way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable
from typing import Generic, cast

from tvmrepro.environments import Environment
from tvmrepro.settings import Settings
from worker.runtimes.base import Limits
from worker.runtimes.pool import Reserved, S, WarmPool

# A worker warms every environment it serves when its processes start if all those sandboxes fit
# in this share of the memory available; else each environment from its first run on.
WARM_AT_START_SHARE = 0.5
WARM_SANDBOX_MIB = 220  # one environment kept warm, proportional: a local zygote and its
# waiting sandbox (measured 210 MiB), or a waiting Docker container (about 130)
ALWAYS_AT_START = 2  # environments a worker warms at start whatever the memory


def warm_at_start(environments: int, processes: int) -> bool:
    """Whether a worker of `processes` pool processes, each keeping one sandbox per served
    environment, warms them all when it starts (else from each environment's first run)."""
    if environments <= ALWAYS_AT_START:
        return True
    try:
        with open("/proc/meminfo") as meminfo:
            fields = dict(line.split(":", 1) for line in meminfo)
        available_mib = int(fields["MemAvailable"].split()[0]) / 1024
    except (OSError, KeyError, ValueError):
        return False
    return processes * environments * WARM_SANDBOX_MIB <= WARM_AT_START_SHARE * available_mib


class WarmSandboxes(Generic[S]):
    """A runtime's warm sandboxes: the pool of the environments it serves, and those reserved."""

    def __init__(self, settings: Settings, start: Callable[[Environment, Limits], S],
                 after_reap: Callable[[], None] | None = None) -> None:
        self.settings = settings
        self.start = start  # the runtime's own start of a sandbox, ready for a case
        self.after_reap = after_reap  # what else the runtime lets go when idle (its zygotes)
        self.pool: WarmPool[S] | None = None
        self.served: dict[str, Environment] = {}  # the pool's environments, by id
        self.reserved: Reserved[S] = Reserved()

    @property
    def idle_s(self) -> float:
        """How long a warm sandbox (or what forks them) waits before it is stopped."""
        return self.settings.warm_idle_s

    def prewarm(self, envs: list[Environment], processes: int = 1,
                serves: Callable[[Environment], bool] = lambda env: True) -> None:
        """Keep sandboxes waiting for each of `envs` that the runtime `serves`: from now on if
        those of the worker's `processes` fit in memory (warm_at_start), else from each one's
        first run."""
        if self.settings.warm_sandboxes <= 0:
            return
        if self.pool is None:
            self.pool = WarmPool(self._start_pooled, self.settings.warm_sandboxes, self.idle_s,
                                 after_reap=self.after_reap)
        at_start = warm_at_start(len(envs), processes)
        for env in envs:
            if serves(env):
                self.served[env.key] = env
                if at_start:
                    self.pool.fill(self._key(env))

    def serve(self, env: Environment) -> None:
        """Keep sandboxes waiting for env too, from after its run now (a frontend flavour made
        for that run: its first run is cold, the next ones take a warm sandbox)."""
        if self.pool is not None:
            self.served.setdefault(env.key, env)

    def _key(self, env: Environment) -> tuple[str, Limits]:
        """The pool's key of env's warm sandboxes."""
        return env.key, Limits.pooled(self.settings, env)

    def _start_pooled(self, key: Hashable) -> S:
        env_id, limits = cast(tuple[str, Limits], key)
        return self.start(self.served[env_id], limits)

    def reserve(self, env: Environment, limits: Limits, sandbox: S) -> None:
        """Keep `sandbox` for the next run of env with these limits."""
        self.reserved.put((env.key, limits), sandbox)

    def take(self, env: Environment, limits: Limits, stop: Callable[[], bool]) -> S | None:
        """A sandbox reserved for these limits, else a warm one whose limits cover them (once
        ready, when one is being started: `stop` is asked meanwhile); None when there is none.
        The warm one is replaced by `refill`, after the run."""
        reserved = self.reserved.take((env.key, limits))
        if reserved is not None:
            return reserved
        key = self._key(env)
        if self.pool is None or env.key not in self.served or not key[1].covers(limits):
            return None
        return self.pool.take(key, replace=False, stop=stop)

    def refill(self, env: Environment) -> None:
        """Start what env's pool lacks, once a run is over (its CPU is the run's meanwhile)."""
        if self.pool is not None and env.key in self.served:
            self.pool.fill(self._key(env))

    def running(self) -> contextlib.AbstractContextManager[None]:
        """Around a run: while it runs (and shortly after) the pool's replacements wait."""
        return self.pool.running() if self.pool is not None else contextlib.nullcontext()

    def close(self) -> None:
        """Stop every waiting sandbox, reserved or warm."""
        self.reserved.close()
        if self.pool is not None:
            self.pool.close()

