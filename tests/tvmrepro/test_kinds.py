"""KINDS (tvmrepro.jobs.kinds): every kind is found there, by every dispatch point.

A small kind of the tests' own, "echo" (a run job that says it was there at each hook), is
added to KINDS and reached from every place that dispatches on a job's kind: the API's submit
and read, the worker's run task (its claim carries the kind), the report, the page and
`tvmrepro wait`. Only what needs more than KINDS is left out: the request union's member (its
model is here, EchoRequest, but the API's body parser knows the union's members only, so the
request is made here as it would parse) and a migration (the jobs table takes any kind's name
already).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import click
import httpx
import pytest
from click.testing import CliRunner

from cli.cli import main
from cli.client import ApiClient
from service.jobs import JobService
from tests.conftest import NEW_ENV
from tests.fakes.runtime import DIRECTIVE, FakeRuntime
from tests.service.stack import api_in_thread
from tests.worker.task_runs import run_task
from tvmrepro.api.requests import CaseRequest
from tvmrepro.api.views import JobView
from tvmrepro.environments import Catalog, default_catalog
from tvmrepro.jobs.fanout import fan_out
from tvmrepro.jobs.kind import Kind, Publish
from tvmrepro.jobs.kinds import KINDS
from tvmrepro.jobs.matrix import job_status
from tvmrepro.jobs.report import render_report
from tvmrepro.jobs.settling import submit
from tvmrepro.jobs.submission import Submission
from tvmrepro.jobs.views import job_view
from tvmrepro.queue import make_celery
from tvmrepro.store import Store
from tvmrepro.store.rows import JobRow
from worker.runtimes import RUNTIMES

ECHO = "echo"


class EchoRequest(CaseRequest):
    """The echo kind's member of the request union: a case and its environments."""

    kind: Literal["echo"]


AFTER_RUN: list[str] = []  # the jobs whose runs the echo kind's after_run was told of
CASE = {"title": "hello", "script": f"{DIRECTIVE} {{\"status\": \"ok\"}}\nprint('hi')\n"}


def start_echo(sub: Submission, request: EchoRequest) -> str:
    """A run job's runs, under the echo kind."""
    case = sub.case(request)
    envs = sub.environments(request.environments)
    job = JobRow(id=uuid.uuid4().hex, kind=ECHO, title=f"echo of {case.title}",
                 case=case.model_dump(mode="json", exclude_defaults=True),
                 environments=[env.id for env in envs], variants=case.variant_names,
                 created_at=sub.now)
    runs = sub.runs(job.id, case, fan_out(case, envs, {}), bypass_cache=True)
    submit(sub.store, job, runs, sub.cap)
    sub.published(runs)
    return job.id


def read_echo(store: Store, job: JobRow) -> JobView:
    """The common view, its title saying the echo kind read it."""
    view = job_view(store, job, job_status(job.runs, settled=job.comparisons is not None))
    return view.model_copy(update={"title": f"{view.title} (read by echo)"})


def after_echo(store: Store, publish: Publish, job_id: str) -> None:
    """Note the job whose run was stored."""
    AFTER_RUN.append(job_id)


def echo_section(job: JobView, catalog: Catalog) -> list[str]:
    """The echo kind's part of the report."""
    return ["#### Echo", "", f"{len(job.runs)} run(s) echoed.", ""]


def wait_echo(client: ApiClient, job: JobView, as_json: bool) -> None:
    """`tvmrepro wait` on an echo job."""
    click.echo(f"echo job {job.id}: {job.status.value}")


ECHO_KIND = Kind(name=ECHO, start=start_echo, read=read_echo, cli=f"{__name__}:wait_echo",
                 after_run=after_echo, report=echo_section, template="sweep.html")


@pytest.fixture
def echoing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, JobService]]:
    """An API in this process whose KINDS has the echo kind; its URL and its job service."""
    monkeypatch.setitem(KINDS, ECHO, ECHO_KIND)
    monkeypatch.setitem(RUNTIMES, "fake", FakeRuntime)  # the product has none (tests/fakes)
    AFTER_RUN.clear()
    with api_in_thread(tmp_path, TVMREPRO_RUNTIME="fake") as (url, service):
        fake = FakeRuntime(service.settings)
        service.store.save_fingerprint(NEW_ENV, fake.fingerprint(default_catalog().get(NEW_ENV)))
        yield url, service


def test_a_kind_added_to_kinds_is_reached_by_every_dispatch_point(
        echoing: tuple[str, JobService]) -> None:
    url, service = echoing
    request = EchoRequest(kind=ECHO, case=CASE, environments=[NEW_ENV], wait=True)
    # The API's submit: the kind's start called; its read gives the view.
    view = service.start(request)
    assert (view.kind, view.title, view.status.value) == (ECHO, "echo of hello (read by echo)",
                                                          "queued")
    # The worker's task: its claim carries the kind, and the kind's after_run is called.
    [run] = view.runs
    assert run_task(make_celery(service.settings), run.id) == "stored"
    assert [view.id] == AFTER_RUN
    done = service.job(view.id)
    assert done is not None and done.status.value == "done"
    # The report: the common part, then the kind's section.
    report = render_report(done)
    assert "Run with tvm-repro (nothing failed)" in report and "1 run(s) echoed." in report
    # The page: the kind's template (the sweep's page, here).
    html = httpx.get(f"{url}/jobs/{view.id}").text
    assert 'id="sweep-counts"' in html and 'id="bisect-actions"' not in html, html[:2000]
    # `tvmrepro wait`: the kind's cli function.
    waited = CliRunner().invoke(main, ["wait", view.id, "--server", url])
    assert waited.exit_code == 0, waited.output
    assert waited.stdout == f"echo job {view.id}: done\n"


def test_kinds_names_each_kind_once_and_its_own_handler() -> None:
    assert list(KINDS) == ["run", "bisect", "reduce", "extract", "triage", "sweep"]
    assert all(name == kind.name for name, kind in KINDS.items())
