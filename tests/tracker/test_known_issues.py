"""Known issues: a triage keeps each failing issue's signature in the store; a job failing with
one names the issue a likely duplicate, in its JSON and its report. The corpus's runs as
recorded (EXPECTED.json) make the known issues; the new reports run on real TVM."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cli.tracker import record_known_issues
from tests.conftest import NEW_ENV, shared_case
from tvmrepro.cases import Case, load_case_file
from tvmrepro.lifecycle import RunState, cache_key
from tvmrepro.queue import make_celery
from tvmrepro.report import render_report
from tvmrepro.results import Result
from tvmrepro.rows import JobRow, RunRow
from tvmrepro.settings import Settings
from tvmrepro.store import Store, open_store
from tvmrepro.tracker.importing import ImportedReport, import_file
from tvmrepro.tracker.known import KnownIssue, known_issues, likely_duplicates
from tvmrepro.tracker.triage import TriageAnswer, TriageRun, triage

if TYPE_CHECKING:
    from tvmrepro.environments import Environment
    from worker.runtimes.local import LocalRuntime

CORPUS = Path(__file__).parent / "corpus"
MEASURED_ENVS = ("tvm-0.25.0-cpu", "tvm-0.26.0-cpu", NEW_ENV)


def _corpus_triaged() -> tuple[list[ImportedReport], TriageAnswer]:
    """The whole corpus triaged from its recorded runs (no TVM)."""
    reports = import_file(CORPUS / "issues.json")
    expected = json.loads((CORPUS / "EXPECTED.json").read_text())["reports"]
    runs = [[TriageRun(env=env, **expected[str(r.number)][env]["tvmrepro"],
                       error=expected[str(r.number)][env]["error"]) for env in MEASURED_ENVS]
            if r.script else [] for r in reports]
    return reports, triage(reports, runs)


def _corpus_store(tmp_path: Path) -> Store:
    settings = Settings.from_env({"TVMREPRO_HOME": str(tmp_path)})
    record_known_issues(*_corpus_triaged(), settings)
    return open_store(settings.store_url, pooled=False)


def test_a_triage_keeps_each_failing_issue_with_its_signature(tmp_path: Path) -> None:
    reports, answer = _corpus_triaged()
    found = {issue.number: issue for issue in known_issues(reports, answer)}
    # The fixed #20200 is known by the signature it had; never-failing and no-code ones are not.
    assert sorted(found) == [17348, 17357, 17406, 20191, 20192, 20195, 20200]
    assert found[17348].signature == found[20191].signature == "crash: SIGSEGV at run"
    assert found[17357].url == "https://github.com/apache/tvm/issues/17357"
    store = _corpus_store(tmp_path)
    kept = store.known_issues_failing_with(["crash: SIGSEGV at run", "no such signature"])
    assert [issue.number for issue in kept] == [17348, 20191]
    # Triaged again, #17348 no longer fails: it is known no more; #20191 stays.
    store.record_known_issues([], [17348])
    kept = store.known_issues_failing_with(["crash: SIGSEGV at run"])
    assert [issue.number for issue in kept] == [20191]
    store.dispose()


def test_an_issues_own_report_is_no_duplicate_of_it() -> None:
    known = [KnownIssue(number=n, url=None, title="t", state="OPEN", signature="s")
             for n in (20191, 17348)]
    assert [i.number for i in likely_duplicates(["s", "s"], known)] == [17348, 20191]
    assert [i.number for i in likely_duplicates(["s"], known, "#20191")] == [17348]
    assert likely_duplicates(["other"], known) == []


def _stored_job(store: Store, case: Case, results: list[Result]) -> str:
    """A finished run job of `case` in `store`, its runs' results those given."""
    job_id, now = uuid.uuid4().hex, time.time()
    runs = [RunRow(id=uuid.uuid4().hex, job_id=job_id, ordinal=i, variant=r.variant,
                   environment=r.environment, state=RunState.QUEUED,
                   cache_key=cache_key(case, r.variant, _env(r.environment)),
                   timeout_s=case.timeout_s, created_at=now) for i, r in enumerate(results)]
    store.submit(JobRow(id=job_id, kind="run", title=case.title, case=case.model_dump(mode="json"),
                        environments=[NEW_ENV], variants=[r.variant for r in results],
                        created_at=now), runs, cap=100)
    for run, result in zip(runs, results, strict=True):
        assert store.finish(run.id, result)
    return job_id


def _env(env_id: str) -> Environment:
    from tvmrepro.environments import default_catalog

    return default_catalog().get(env_id)


def _job_view(tmp_path: Path, store: Store, job_id: str) -> Any:
    from service.jobs import JobService

    settings = Settings.from_env({"TVMREPRO_HOME": str(tmp_path)})
    view = JobService(settings, store, make_celery(settings)).job(job_id)
    assert view is not None
    return view


@pytest.mark.tvm
def test_a_new_report_failing_as_an_issue_did_is_its_likely_duplicate(
        tmp_path: Path, tvm_envs: dict[str, Environment], warm_runtime: LocalRuntime) -> None:
    from worker.runner import run_variant

    store = _corpus_store(tmp_path)
    # The founding case, a report of its own, fails as #17357's script did when triaged.
    founding = load_case_file(shared_case("tvm-17357/case.json"))
    results = [run_variant(founding, "fusetir-once", tvm_envs[NEW_ENV], warm_runtime)]
    view = _job_view(tmp_path, store, _stored_job(store, founding, results))
    assert [(i.number, i.url) for i in view.likely_duplicates] == [
        (17357, "https://github.com/apache/tvm/issues/17357")]
    assert view.model_dump(mode="json")["likely_duplicates"][0]["number"] == 17357
    report = render_report(view)
    assert ("- **Likely duplicate of [#17357](https://github.com/apache/tvm/issues/17357)**"
            in report.split("| variant |")[0])  # on the first screen
    # #20191's script (a segfault in the VM) is a likely duplicate of both reports of that bug,
    # but not of itself when the job is that issue's own report (titled "#20191").
    crash = next(r for r in import_file(CORPUS / "issues.json") if r.number == 20191).case()
    crashed = run_variant(crash, crash.variant_names[0], tvm_envs[NEW_ENV], warm_runtime)
    assert crashed.status.value == "crash"
    view = _job_view(tmp_path, store, _stored_job(store, crash, [crashed]))
    assert [i.number for i in view.likely_duplicates] == [17348]
    renamed = crash.model_copy(update={"title": "a new report"})
    view = _job_view(tmp_path, store, _stored_job(store, renamed, [crashed]))
    assert [i.number for i in view.likely_duplicates] == [17348, 20191]
    store.dispose()
