"""Long-polling a job: `GET /api/v1/jobs/<id>?wait=S` with the ETag of the view last seen in
`If-None-Match` answers as soon as the job's view differs from it (or its wait is over), so a
client follows a job without polling it: the CLI while it waits, the job page while it is open.

The view is not rebuilt while it waits: the store's stamp of the job (its runs' states and
times, its bisection's and narrowing's rows; tvmrepro/store/jobs.py `job_stamp`, one cheap query)
is read every WAIT_TICK_S, and the view only once that changes. A client to which every answer
is costly (a bisection's whole view, built and sent on the cores its probes run on) asks with
`every=S`: a change is then answered no sooner than S seconds after the request came, unless
every run of the job has ended (its end is never answered late). A request that waits holds one
of the API process's threads, so at most half of them wait at once: another asking to wait is
answered at once, as a plain GET (its client then polls as it would without waiting). An API
process told to stop answers those that wait at once.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from tvmrepro.api.pages import PageAsked
from tvmrepro.api.views import JobView
from tvmrepro.jobs.kinds import KINDS
from tvmrepro.store import JobStamp

MAX_WAIT_S = 30  # under the API's request timeout (service/server.py)
WAIT_TICK_S = 0.02
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


class JobWaits:
    """The long-polls of one API process: how many may wait at once, and the wait itself."""

    def __init__(self, view_of: Callable[[str, PageAsked | None], JobView | None],
                 stamp_of: Callable[[str], JobStamp], threads: int) -> None:
        self.view_of, self.stamp_of = view_of, stamp_of
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
        stamp = self.stamp_of(job_id) if seen and wait_s > 0 else None
        now = self._shown(job_id, page)  # a page of a triage's or sweep's parts
        if (now is None or stamp is None or now.etag != seen or now.view.status.finished
                or KINDS[now.view.kind].parts
                or not self.slots.acquire(blocking=False)):
            return now
        try:
            started = time.monotonic()
            # A pace longer than the wait ends with it: a change seen by then is answered.
            deadline, not_before = started + wait_s, started + min(every_s, wait_s)
            while not STOPPING.wait(WAIT_TICK_S):
                ticked, changed = time.monotonic(), self.stamp_of(job_id)
                if changed != stamp and (ticked >= not_before or changed.runs_ended):
                    stamp, now = changed, self._shown(job_id)
                    if now is None or now.etag != seen:
                        return now
                if ticked >= deadline:
                    break
            return now
        finally:
            self.slots.release()
