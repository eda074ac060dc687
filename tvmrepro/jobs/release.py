"""Fair release between submitters: which waiting runs go to the broker, and when.

A run is stored held (waiting, `published_at` null) and published only when its lane (an
environment's short or long queue) has room: at most a window of runs in flight (published
and not done) per lane, `TVMREPRO_RELEASE_WINDOW`, or where that is 0 twice the slots of the
live workers serving the environment, at least MIN_WINDOW. The free slots go round robin
between submitters, each submitter's oldest run first: the submitter with the fewest runs in
flight in the lane takes the next slot, ties going to the one whose oldest held run is the
oldest. So a triage of thousands of runs keeps a window's worth in the queue, and a single run
of another submitter is published at the next free slot: it waits for about the window ahead
of it, not for the whole triage.

Releasers: the submission (after its transaction), the worker after each run it stores, a
cancellation, and each worker's recovery sweep for the environments it serves. The choice and
its marking are one write transaction (Store.release_held, under the admission lock); the
messages are sent after its commit, so a crash in between leaves a run marked published with
no message, which the recovery sweep publishes again (its queue found empty twice).
"""

from __future__ import annotations

import heapq
import logging
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence

from celery import Celery

from tvmrepro.jobs.kind import Publish
from tvmrepro.queue import SHORT_RUN_S, publish_runs
from tvmrepro.settings import Settings
from tvmrepro.store import Store
from tvmrepro.store.releases import Submitter
from tvmrepro.store.rows import RunRow

log = logging.getLogger(__name__)
MIN_WINDOW = 4  # runs in flight per lane where few slots are live (or none yet)
SLOTS_AHEAD = 2  # the automatic window: this many runs in flight per live slot
LATE_SEND_S = 0.5  # messages sent this long after their release are stamped again


def release_order(held: Sequence[tuple[Submitter, str]], in_flight: Mapping[Submitter, int],
                  free: int) -> list[str]:
    """The ids of up to `free` held runs to release, in order: round robin between
    submitters, each submitter's oldest first. `held` is (submitter, run id) oldest first
    (so each submitter's runs in their order, and the submitters by their oldest held run);
    `in_flight` counts each submitter's runs of the lane already in flight: the one with the
    fewest takes the next slot, ties by the oldest held run."""
    runs: dict[Submitter, deque[str]] = {}
    for submitter, run_id in held:
        runs.setdefault(submitter, deque()).append(run_id)
    # (runs in flight, rank by oldest held run): the rank is unique, so submitters (None
    # among them) are never compared.
    turns = [(in_flight.get(submitter, 0), rank, submitter)
             for rank, submitter in enumerate(runs)]
    heapq.heapify(turns)
    chosen: list[str] = []
    while turns and len(chosen) < free:
        flying, rank, submitter = heapq.heappop(turns)
        chosen.append(runs[submitter].popleft())
        if runs[submitter]:
            heapq.heappush(turns, (flying + 1, rank, submitter))
    return chosen


def window(settings: Settings, slots: int) -> int:
    """Runs in flight a lane may hold: the setting, else twice the live slots (at least
    MIN_WINDOW)."""
    return settings.release_window or max(MIN_WINDOW, SLOTS_AHEAD * slots)


def release(store: Store, app: Celery, environments: Iterable[str],
            settings: Settings | None = None) -> list[RunRow]:
    """Publish the held runs of these environments' lanes that fit their windows (the choice
    and its marking in one transaction, the messages after it); the runs published. A
    failure to send leaves the rest marked published: the recovery sweep publishes them."""
    settings = settings or app.conf.get("tvmrepro_settings") or Settings.from_env()
    envs = sorted(set(environments))
    if not envs:
        return []
    slots = store.live_slots(settings.worker_stale_s)
    windows = {env_id: window(settings, slots.get(env_id, 0)) for env_id in envs}
    marked = time.time()
    released = store.release_held(windows, SHORT_RUN_S, release_order, marked)
    publish_runs(app, released)
    if released and time.time() - marked > LATE_SEND_S:
        # The send waited for the broker (retrying while Redis restarts): the messages left
        # now, and a recovery sweep must not count their age from the release.
        store.published_late([run.id for run in released], marked, time.time())
    return released


def release_quietly(store: Store, app: Celery, environments: Iterable[str],
                    settings: Settings | None = None) -> None:
    """`release`, a failure logged: what it did not publish stays for the next releaser (or,
    marked and unsent, for the recovery sweep)."""
    try:
        release(store, app, environments, settings)
    except Exception:
        log.exception("releasing held runs failed; the next release or the recovery sweep "
                      "publishes them")


def releaser(store: Store, app: Celery, settings: Settings | None = None) -> Publish:
    """A kind's `Publish` (runs just stored as waiting): the release of their environments."""
    def publish(runs: list[RunRow]) -> None:
        release_quietly(store, app, {run.environment for run in runs}, settings)
    return publish
