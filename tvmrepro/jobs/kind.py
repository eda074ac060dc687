"""What a job kind is to the rest of the service: the handler that KINDS (tvmrepro.jobs.kinds)
maps the kind's name to, and what each of its hooks is given.

The API's submit calls `start` with the request (the union's member for the kind), its
read calls `read`; the worker calls `after_run` once a run of a job of the kind is stored, and
runs the job's one run as a narrowing where `narrowing` says so; the report puts `report`
(the kind's section) below the common part, or alone for a kind made of `parts` (run jobs of
its own); the page is `template`; the command line's `tvmrepro wait` calls `cli`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from tvmrepro.api.pages import PageAsked
from tvmrepro.api.views import JobView
from tvmrepro.environments import Catalog
from tvmrepro.store import Store
from tvmrepro.store.rows import JobRow, RunRow

if TYPE_CHECKING:
    from tvmrepro.jobs.submission import Submission

# Release runs stored as waiting (held) to their queues as room allows (tvmrepro.jobs.release).
Publish = Callable[[list[RunRow]], None]
Section = Callable[[JobView, Catalog], list[str]]  # a kind's lines of a job's report
Request = TypeVar("Request")  # the kind's member of the request union (tvmrepro.api.requests)


def nothing_after(store: Store, publish: Publish, job_id: str) -> None:
    """A kind whose jobs need nothing done after a run is stored."""


def no_section(job: JobView, catalog: Catalog) -> list[str]:
    """A kind whose report is the common part only."""
    return []


@dataclass(frozen=True)
class Kind(Generic[Request]):
    """One job kind: its name and its hooks."""

    name: str
    start: Callable[[Submission, Request], str]  # validate, store, publish: the job's id
    read: Callable[[Store, JobRow], JobView]  # the job's view, read only
    cli: str  # "module:function" that follows a job of the kind and prints it (cli/)
    after_run: Callable[[Store, Publish, str], None] = nothing_after
    report: Section = no_section
    template: str = "job.html"  # the job's page (service/templates/)
    parts: bool = False  # made of run jobs of its own: no runs, its answer read from theirs
    narrowing: bool = False  # its one run is a reduction or an extraction (worker/narrowing/)
    # A kind made of parts: its view with a page of them (tvmrepro.api.pages); `read` gives
    # every part (the report).
    read_page: Callable[[Store, JobRow, PageAsked], JobView] | None = None
