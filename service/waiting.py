"""Long-polling a job: `GET /api/v1/jobs/<id>?wait=S` with the ETag of the view last seen in
`If-None-Match` answers as soon as the job's view differs from it (or its wait is over), so a
client follows a job without polling it: the CLI while it waits, the job page while it is open.

The view is not rebuilt while it waits, and a waiting request reads nothing: one thread of the
API process (JobWatcher) watches every job its requests wait on through the job's revision
(an integer the store moves on in each write that changes the job's view: tvmrepro/store/base.py
`changed`), read for all of them in one query, and wakes the requests of a job whose revision
moved; only they build its view again. Where the broker is Redis, the store's writers announce
each change (tvmrepro/store/notices.py) and the watcher reads the revisions when a notice names
a waited job, and every NOTICED_CHECK_S anyway (a notice may be lost); elsewhere it reads them
every WAIT_TICK_S.

A client to which every answer is costly (a bisection's whole view, built and sent on the cores
its probes run on) asks with `every=S`: a change is then answered no sooner than S seconds after
the request came, unless every run of the job has ended (its end is never answered late). A
request that waits holds one of the API process's threads, so at most half of them wait at once:
another asking to wait is answered at once, as a plain GET (its client then polls as it would
without waiting). An API process told to stop answers those that wait at once.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import NamedTuple

from tvmrepro.api.pages import PageAsked
from tvmrepro.api.views import JobView
from tvmrepro.jobs.kinds import KINDS
from tvmrepro.store.notices import JobNotices

log = logging.getLogger(__name__)
MAX_WAIT_S = 30  # under the API's request timeout (service/server.py)
WAIT_TICK_S = 0.02  # how often the watcher reads the waited jobs' revisions without notices
# With notices, how often it reads them all the same: a notice lost (a Redis restart under the
# subscription, a publisher that died between its commit and its notice) is seen this late.
NOTICED_CHECK_S = 1.0
# Set when the API process is told to stop (service/server.py): what waits answers now, so a
# graceful stop does not wait for the long-polls' ends.
STOPPING = threading.Event()


class Shown(NamedTuple):
    """A job's view as answered: the view, its JSON (serialized once) and its ETag."""

    view: JobView
    body: str
    etag: str


def shown(view: JobView) -> Shown:
    """The view with its JSON and its entity tag (equal for equal views)."""
    body = view.model_dump_json()
    return Shown(view, body, '"' + hashlib.sha256(body.encode()).hexdigest()[:32] + '"')


class Watch:
    """One waiting request's hold on a job: the revision it saw, and `moved` once the watcher
    saw a newer one (or the API stops)."""

    def __init__(self, job_id: str, revision: int) -> None:
        self.job_id, self.revision = job_id, revision
        self.moved = threading.Event()

    def changed(self, timeout_s: float) -> bool:
        """Whether the job changed (or the API stops) within `timeout_s`; the change is taken."""
        if self.moved.wait(max(0.0, timeout_s)):
            self.moved.clear()
            return True
        return False


class JobWatcher:
    """The one thread of an API process that watches the jobs its requests wait on: it reads
    their revisions in one query when a notice names one of them, and every `check_s` anyway,
    and wakes each watch whose job's revision moved. Started by the first watch (after a fork:
    a gunicorn worker's own)."""

    def __init__(self, revisions_of: Callable[[Collection[str]], dict[str, int]],
                 notices: JobNotices | None = None) -> None:
        self.revisions_of, self.notices = revisions_of, notices
        self.check_s = NOTICED_CHECK_S if notices is not None else WAIT_TICK_S
        self.lock = threading.Condition()
        self.watches: dict[str, set[Watch]] = {}
        self.heard: set[str] = set()  # waited jobs that notices named since the last read
        self.started = False

    @contextmanager
    def watch(self, job_id: str) -> Iterator[Watch | None]:
        """The job watched while the caller's block runs (None: no such job). Its revision is
        read first: a change after it wakes the watch, however soon."""
        revision = self.revisions_of([job_id]).get(job_id)
        if revision is None:
            yield None
            return
        held = Watch(job_id, revision)
        with self.lock:
            self._start()
            self.watches.setdefault(job_id, set()).add(held)
            self.lock.notify_all()
        try:
            yield held
        finally:
            with self.lock:
                watching = self.watches.get(job_id, set())
                watching.discard(held)
                if not watching:
                    self.watches.pop(job_id, None)

    def hear(self, job_id: str) -> None:
        """A notice: the job changed (read at once if a request waits on it)."""
        with self.lock:
            if job_id in self.watches:
                self.heard.add(job_id)
                self.lock.notify_all()

    def _start(self) -> None:
        if not self.started:
            self.started = True
            threading.Thread(target=self._run, name="job-watcher", daemon=True).start()
            if self.notices is not None:
                threading.Thread(target=self.notices.listen, args=(self.hear,),
                                 name="job-notices", daemon=True).start()

    def _run(self) -> None:
        due = 0.0
        while True:
            with self.lock:
                while not self.watches:
                    self.lock.wait()
                self.lock.wait(WAIT_TICK_S)  # a notice or a new watch ends it early
                jobs, heard = set(self.watches), bool(self.heard & set(self.watches))
                self.heard.clear()
            if STOPPING.is_set():
                self._wake(None)
                continue
            if not jobs or (not heard and time.monotonic() < due):
                continue
            due = time.monotonic() + self.check_s
            try:
                self._wake(self.revisions_of(jobs))
            except Exception:  # a store away for a moment: the next check reads again
                log.exception("reading the revisions of %d waited jobs failed", len(jobs))

    def _wake(self, revisions: dict[str, int] | None) -> None:
        """Wake the watches whose job's revision moved (None: every watch, the API stops)."""
        with self.lock:
            for job_id, watching in self.watches.items():
                revision = revisions.get(job_id) if revisions is not None else None
                for held in watching:
                    if revisions is None or (revision is not None and revision > held.revision):
                        held.revision = revision if revision is not None else held.revision
                        held.moved.set()


class JobWaits:
    """The long-polls of one API process: how many may wait at once, and the wait itself."""

    def __init__(self, view_of: Callable[[str, PageAsked | None], JobView | None],
                 ended_of: Callable[[str], bool], watcher: JobWatcher, threads: int) -> None:
        self.view_of, self.ended_of, self.watcher = view_of, ended_of, watcher
        self.slots = threading.BoundedSemaphore(max(1, threads // 2))

    def _shown(self, job_id: str, page: PageAsked | None = None) -> Shown | None:
        view = self.view_of(job_id, page)
        return shown(view) if view is not None else None

    def view_after(self, job_id: str, seen: str | None, wait_s: float,
                   every_s: float = 0.0, page: PageAsked | None = None) -> Shown | None:
        """The job's view once its ETag is not `seen` (a change before `every_s` seconds is
        answered then, unless all its runs ended), or at the end of `wait_s` seconds (at once:
        no `seen`, no wait, a finished job, a triage or sweep, or no thread free to wait); None
        when there is no such job."""
        if not seen or wait_s <= 0:
            return self._shown(job_id, page)
        with self.watcher.watch(job_id) as watch:
            now = self._shown(job_id, page)  # a page of a triage's or sweep's parts
            if (now is None or watch is None or now.etag != seen or now.view.status.finished
                    or KINDS[now.view.kind].parts
                    or not self.slots.acquire(blocking=False)):
                return now
            try:
                return self._waited(job_id, seen, watch, now, wait_s, every_s)
            finally:
                self.slots.release()

    def _waited(self, job_id: str, seen: str, watch: Watch, now: Shown, wait_s: float,
                every_s: float) -> Shown | None:
        started = time.monotonic()
        # A pace longer than the wait ends with it: a change seen by then is answered.
        deadline, not_before = started + wait_s, started + min(every_s, wait_s)
        held = False  # a change seen that the pace holds back
        while not STOPPING.is_set():
            moved = watch.changed((not_before if held else deadline) - time.monotonic())
            if STOPPING.is_set():
                break
            ticked, held = time.monotonic(), held or moved
            if held and (ticked >= not_before or self.ended_of(job_id)):
                held, now_or_none = False, self._shown(job_id)
                if now_or_none is None or now_or_none.etag != seen:
                    return now_or_none
                now = now_or_none
            if ticked >= deadline:
                break
        return now
