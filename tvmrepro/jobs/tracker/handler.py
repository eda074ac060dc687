"""The triage and sweep kinds: a run job per part (a triage's report with code, a sweep's
stored case), all admitted at once (docs/contract.md, "Tracker"); a view whose answer is read
from those runs, and which has none of its own."""

from __future__ import annotations

import uuid
from typing import Any

from tvmrepro.api.pages import PageAsked
from tvmrepro.api.requests import SweepRequest, TriageRequest
from tvmrepro.api.views import JobView
from tvmrepro.cases import Case
from tvmrepro.choice import over_fields
from tvmrepro.environments import Catalog, Environment
from tvmrepro.errors import BadInput, NotServed
from tvmrepro.jobs.fanout import fan_out
from tvmrepro.jobs.kind import Kind
from tvmrepro.jobs.matrix import build_matrix, job_status
from tvmrepro.jobs.run import RUN
from tvmrepro.jobs.submission import Submission
from tvmrepro.jobs.tracker import SWEEP, TRIAGE
from tvmrepro.jobs.tracker.importing import ImportedReport
from tvmrepro.jobs.tracker.links import tracker_link
from tvmrepro.jobs.tracker.paging import MEMO, sweep_page, triage_page
from tvmrepro.jobs.tracker.report import render_sweep, render_triage
from tvmrepro.jobs.tracker.steps import (
    MakeRuns,
    part_runs,
    read_sweep,
    read_triage,
    records_known_issues,
    store_sweep,
    store_triage,
)
from tvmrepro.jobs.tracker.sweep import previous_environment, stored_cases
from tvmrepro.jobs.tracker.triage_job import REPORTS_FIELD, reports_of_request
from tvmrepro.jobs.views import iso
from tvmrepro.lifecycle import RunState
from tvmrepro.results import Status
from tvmrepro.settings import variable_name
from tvmrepro.store import Store
from tvmrepro.store.rows import JobRow, RunRow


def part_maker(sub: Submission, bypass_cache: bool) -> MakeRuns:
    """How a triage or sweep makes a part's runs: as a run job's, from the cache."""
    def make_runs(job_id: str, case: Case, envs: list[Environment],
                  now: float) -> list[RunRow]:
        return sub.runs(job_id, case, fan_out(case, envs, {}, case_field="case"), bypass_cache)
    return make_runs


def sweep_maker(sub: Submission) -> MakeRuns:
    """How a sweep makes a stored case's runs: from the cache, and a stored timeout of the
    case on an environment served as one too (run again, it would spend its time limit to say
    the same: once is enough; a run that was cut short by a kill is no timeout)."""
    made = part_maker(sub, False)

    def make_runs(job_id: str, case: Case, envs: list[Environment],
                  now: float) -> list[RunRow]:
        runs = made(job_id, case, envs, now)
        timeouts = sub.store.cached_results([run.cache_key for run in runs if not run.done],
                                            (Status.TIMEOUT,))
        return [run.model_copy(update={
            "state": RunState.DONE, "cached": True, "result_id": timeouts[run.cache_key],
            "published_at": None, "finished_at": now}) if run.cache_key in timeouts and
            not run.done else run for run in runs]
    return make_runs


def report_case(report: ImportedReport, index: int) -> Case:
    """A report's script case; a script that is no case is bad input naming the report."""
    try:
        return report.case()
    except BadInput as exc:
        raise BadInput(f"{REPORTS_FIELD}[{index}].script", exc.problem) from exc


def triage_title(reports: list[ImportedReport]) -> str:
    """How a triage job is named in the job list."""
    numbers = [report.number for report in reports if report.number is not None]
    shown = ", ".join(f"#{n}" for n in numbers[:3]) + (", ..." if len(numbers) > 3 else "")
    return f"triage of {len(reports)} report{'s' * (len(reports) != 1)}" + \
        (f" ({shown})" if shown else "")


def start_triage(sub: Submission, request: TriageRequest) -> str:
    """A triage job: a run job per report with code, its runs on every environment (oldest
    first), all admitted at once; its id. At most TVMREPRO_MAX_TRIAGE_REPORTS reports; a
    report's address only where it is on the tracker (tvmrepro.jobs.tracker.links)."""
    cap = sub.settings.max_triage_reports
    if len(request.reports) > cap:  # before any is read: refusing costs little
        raise BadInput(REPORTS_FIELD, f"a triage takes at most {cap} reports "
                                      f"({variable_name('max_triage_reports')}), got "
                                      f"{len(request.reports)}: triage them in parts")
    tracker = sub.settings.tracker_url
    reports = [report.model_copy(update={"url": tracker_link(report.url, tracker)})
               for report in reports_of_request(request.reports)]
    chosen = sub.choose(request)
    envs = sorted(chosen.environments, key=lambda env: env.version)
    sub.check_served(envs, request)
    # A report's files (`import --attachments`) are stored as a run job's are.
    cases = [sub.stored_files(report_case(report, index), f"{REPORTS_FIELD}[{index}]")
             if report.script is not None else None for index, report in enumerate(reports)]
    parent = JobRow(id=uuid.uuid4().hex, kind=TRIAGE, title=triage_title(reports), case={},
                    environments=[env.id for env in envs], variants=[],
                    bypass_cache=request.bypass_cache, created_at=sub.now,
                    environments_why=chosen.why)
    sub.published(store_triage(sub.store, parent, reports, cases, envs,
                               part_maker(sub, request.bypass_cache), sub.cap, tracker))
    return parent.id


def sweep_environments(sub: Submission, request: SweepRequest) -> tuple[Environment, Environment]:
    """A sweep's old and new environments, each served by a live worker unless it waits."""
    new = sub.catalog.get(request.env, "env")
    old = (sub.catalog.get(request.since, "since") if request.since
           else previous_environment(sub.catalog, new, "since"))
    if old.id == new.id:
        raise BadInput("since", f"is {old.id}, the environment the sweep runs on: a sweep "
                                "compares two environments (leave `since` out for the release "
                                "before `env`)")
    served = sub.served()
    for field, env in (("since", old), ("env", new)):
        if not request.wait and env.id not in served:
            raise NotServed([env.id], field)
    return old, new


def start_sweep(sub: Submission, request: SweepRequest) -> str:
    """A sweep job: every stored case's variant on `since` and `env`, the results the store
    holds read from the cache, the rest run; its id."""
    old, new = sweep_environments(sub, request)
    cases = stored_cases(sub.store.jobs_of_kind(RUN))
    if request.offset and request.offset >= len(cases):
        raise BadInput("offset", f"the store holds {len(cases)} stored cases: an offset is "
                                 f"from 0 to {max(0, len(cases) - 1)}")
    # At most TVMREPRO_MAX_SWEEP_CASES of them: a store holding more is swept in parts.
    chosen = cases[request.offset:request.offset + sub.settings.max_sweep_cases]
    job_id, runs = store_sweep(sub.store, chosen, old, new, sweep_maker(sub), sub.cap,
                               sub.now, (request.offset, len(cases)))
    sub.published(runs)
    return job_id


def parts_view(store: Store, job: JobRow, **answer: Any) -> JobView:
    """A triage or sweep job with its answer so far (`answer`); its runs are its run jobs'
    (each on its own page), so it has none of its own."""
    runs = part_runs(store, job.id)
    return JobView(
        id=job.id, kind=job.kind, title=job.title, status=job_status(runs),
        created_at=iso(job.created_at), environments=job.environments,
        **over_fields(job.environments, job.environments_why), variants=[],
        bypass_cache=job.bypass_cache, cached_runs=sum(run.cached for run in runs), runs=[],
        matrix=build_matrix(job, []), case={}, **answer)


def triage_view(store: Store, job: JobRow) -> JobView:
    """A triage job's view: its answer over the reports whose runs are all done."""
    answer = read_triage(store, job).model_copy(
        update={"records_known_issues": records_known_issues(job)})
    return parts_view(store, job, triage=answer)


def sweep_view(store: Store, job: JobRow) -> JobView:
    """A sweep job's view: its answer over the stored cases whose two runs are done."""
    return parts_view(store, job, sweep=read_sweep(store, job))


def triage_view_page(store: Store, job: JobRow, page: PageAsked) -> JobView:
    """A triage job's view with a page of its reports (tvmrepro.jobs.tracker.paging)."""
    return triage_page(MEMO.view(store, job, triage_view), page)


def sweep_view_page(store: Store, job: JobRow, page: PageAsked) -> JobView:
    """A sweep job's view with a page of its stored cases."""
    return sweep_page(MEMO.view(store, job, sweep_view), page)


def triage_section(job: JobView, catalog: Catalog) -> list[str]:
    """A triage job's report: a row per report (its runs are its run jobs' reports)."""
    return render_triage(job.triage, job.id, job.title).split("\n") if job.triage else []


def sweep_section(job: JobView, catalog: Catalog) -> list[str]:
    """A sweep job's report: each stored case whose outcome changed."""
    return render_sweep(job.sweep, job.id, job.title) if job.sweep else []


TRIAGE_KIND = Kind(
    name=TRIAGE, start=start_triage, read=triage_view, cli="cli.commands.tracker:wait_triage",
    report=triage_section, template="triage.html", parts=True, read_page=triage_view_page)
SWEEP_KIND = Kind(
    name=SWEEP, start=start_sweep, read=sweep_view, cli="cli.commands.sweep:wait_sweep",
    report=sweep_section, template="sweep.html", parts=True, read_page=sweep_view_page)
