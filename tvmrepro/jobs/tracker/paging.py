"""A page of a triage's or sweep's view (tvmrepro.api.pages), and the whole views kept in this
process while their jobs do not change.

A part's line of the answer cannot be told apart from the others (a group is all the reports
that fail one way), so the whole answer is made from every part's runs. It is kept, by job,
with the store's stamp of its parts (Store.parts_stamp: one aggregate query); a read whose
stamp is unchanged slices the kept view, so that reading the first screen of a finished job of
10,000 reports costs what one of 10 does. At most MEMO_JOBS views are kept (least recently
read first out); each process keeps its own.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from tvmrepro.api.pages import PageAsked, page_shown
from tvmrepro.api.views import JobView
from tvmrepro.store import Store
from tvmrepro.store.rows import JobRow

MEMO_JOBS = 16


class ViewMemo:
    """The whole views of the parts jobs read last, each with its stamp; thread-safe."""

    def __init__(self, size: int = MEMO_JOBS) -> None:
        self.size = size
        self.kept: OrderedDict[str, tuple[tuple[int, ...], JobView]] = OrderedDict()
        self.lock = threading.Lock()

    def view(self, store: Store, job: JobRow,
             build: Callable[[Store, JobRow], JobView]) -> JobView:
        """The job's whole view: the kept one while its stamp holds, else built and kept."""
        # The store's address too: two stores (tests, or one process serving two) never share.
        key, stamp = f"{store.url}#{job.id}", store.parts_stamp(job.id)
        with self.lock:
            found = self.kept.get(key)
            if found is not None and found[0] == stamp:
                self.kept.move_to_end(key)
                return found[1]
        view = build(store, job)
        with self.lock:
            self.kept[key] = (stamp, view)
            self.kept.move_to_end(key)
            while len(self.kept) > self.size:
                self.kept.popitem(last=False)
        return view


MEMO = ViewMemo()


def triage_page(view: JobView, page: PageAsked) -> JobView:
    """A triage's view with `page` of its reports (and their jobs, titles and addresses)."""
    answer = view.triage
    if answer is None:
        return view
    start, end = page.window(len(answer.reports))
    paged = answer.model_copy(update={
        "reports": answer.reports[start:end], "jobs": answer.jobs[start:end],
        "titles": answer.titles[start:end], "urls": answer.urls[start:end],
        "page": page_shown(page, len(answer.reports))})
    return view.model_copy(update={"triage": paged})


def sweep_page(view: JobView, page: PageAsked) -> JobView:
    """A sweep's view with `page` of its stored cases (and their jobs)."""
    answer = view.sweep
    if answer is None:
        return view
    start, end = page.window(len(answer.cases))
    paged = answer.model_copy(update={
        "cases": answer.cases[start:end], "jobs": answer.jobs[start:end],
        "page": page_shown(page, len(answer.cases))})
    return view.model_copy(update={"sweep": paged})
