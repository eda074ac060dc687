"""Known issues: a triage keeps each failing issue's signature in the store; a job failing with
one names the issue a likely duplicate, in its JSON and its report. The corpus's runs as
recorded (EXPECTED.json) make the known issues; the new reports run on real TVM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.cli import main
from cli.commands.tracker import known_here, record_known_issues
from tests.conftest import NEW_ENV
from tests.service.stack import Backend, Stack, make_home
from tests.tracker.conftest import founding_case, segfault_case
from tests.tracker.stored_jobs import job_view, stored_job
from tvmrepro.api.issues import KnownIssue
from tvmrepro.jobs.report import render_report
from tvmrepro.jobs.tracker.importing import ImportedReport, import_file
from tvmrepro.jobs.tracker.known import known_issues, likely_duplicates
from tvmrepro.jobs.tracker.triage import TriageAnswer, TriageRun, triage
from tvmrepro.results import Result
from tvmrepro.settings import Settings
from tvmrepro.store import Store, open_store

CORPUS = Path(__file__).parent / "corpus"
# The segfault of #17348 and #20191 (one bug), as their runs sign it on every release.
SEGFAULT = "crash: SIGSEGV at StorageObj::AllocTensor at run"
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
    assert found[17348].signature == found[20191].signature == SEGFAULT
    assert found[17357].url == "https://github.com/apache/tvm/issues/17357"
    store = _corpus_store(tmp_path)
    kept = store.known_issues_failing_with([SEGFAULT, "no such signature"])
    assert [issue.number for issue in kept] == [17348, 20191]
    # Triaged again, #17348 no longer fails: it is known no more; #20191 stays.
    store.record_known_issues([], [17348])
    kept = store.known_issues_failing_with([SEGFAULT])
    assert [issue.number for issue in kept] == [20191]
    store.dispose()


def test_an_issues_own_report_is_no_duplicate_of_it() -> None:
    known = [KnownIssue(number=n, url=None, title="t", state="OPEN", signature="s")
             for n in (20191, 17348)]
    assert [i.number for i in likely_duplicates(["s", "s"], known)] == [17348, 20191]
    assert [i.number for i in likely_duplicates(["s"], known, "#20191")] == [17348]
    # The file import wrote for an issue, run as it is: titled by its name.
    assert [i.number for i in likely_duplicates(["s"], known, "20191.py")] == [17348]
    assert [i.number for i in likely_duplicates(["s"], known, "#2019")] == [17348, 20191]
    assert likely_duplicates(["other"], known) == []


@pytest.mark.tvm
def test_a_new_report_failing_as_an_issue_did_is_its_likely_duplicate(
        tmp_path: Path, new_failures: dict[str, Result]) -> None:
    store = _corpus_store(tmp_path)
    # The founding case, a report of its own, fails as #17357's script did when triaged.
    view = job_view(tmp_path, store, stored_job(store, founding_case(), [new_failures["error"]]))
    assert [(i.number, i.url) for i in view.likely_duplicates] == [
        (17357, "https://github.com/apache/tvm/issues/17357")]
    assert view.model_dump(mode="json")["likely_duplicates"][0]["number"] == 17357
    report = render_report(view)
    assert ("- **Likely duplicate of [#17357](https://github.com/apache/tvm/issues/17357)**"
            in report.split("| variant |")[0])  # on the first screen
    # #20191's script (a segfault in the VM) is a likely duplicate of both reports of that bug,
    # but not of itself when the job is that issue's own report (titled "#20191").
    crashed = new_failures["crash"]
    assert crashed.status.value == "crash"
    view = job_view(tmp_path, store, stored_job(store, segfault_case(), [crashed]))
    assert [i.number for i in view.likely_duplicates] == [17348]
    renamed = segfault_case().model_copy(update={"title": "a new report"})
    view = job_view(tmp_path, store, stored_job(store, renamed, [crashed]))
    assert [i.number for i in view.likely_duplicates] == [17348, 20191]
    store.dispose()


@pytest.mark.tvm
def test_a_local_run_names_its_likely_duplicates(tmp_path: Path,
                                                 new_failures: dict[str, Result]) -> None:
    runs = [new_failures["error"].to_json()]
    bare = Settings.from_env({"TVMREPRO_HOME": str(tmp_path / "bare")})
    assert known_here(runs, "a new report", bare) == []
    assert not (tmp_path / "bare").exists()  # a read makes no store
    _corpus_store(tmp_path).dispose()
    here = Settings.from_env({"TVMREPRO_HOME": str(tmp_path)})
    assert [i.number for i in known_here(runs, "a new report", here)] == [17357]
    assert known_here(runs, "#17357", here) == []


@pytest.mark.tvm
def test_the_command_line_names_a_jobs_likely_duplicates(
        tmp_path: Path, test_home: Path, new_failures: dict[str, Result]) -> None:
    stack = Stack(Backend("embedded"), make_home(tmp_path, test_home))
    try:
        reports, answer = _corpus_triaged()
        stack.store.record_known_issues(known_issues(reports, answer), [17357])
        job_id = stored_job(stack.store, founding_case(), [new_failures["error"]])
        stack.start_api()
        ran = CliRunner().invoke(main, ["wait", job_id, "--server", stack.url])
    finally:
        stack.close()
    assert ran.exit_code == 0, ran.output
    assert ("likely duplicate of #17357 ([Bug] Missing PackedFunc with Specific Transformation "
            "Sequence in Relax Module) https://github.com/apache/tvm/issues/17357") in ran.output


@pytest.mark.tvm
def test_a_store_that_cannot_be_read_loses_no_local_run(tmp_path: Path, test_home: Path,
                                                        tvm_envs: dict[str, object]) -> None:
    script = tmp_path / "repro.py"
    script.write_text("raise ValueError('measured')\n")  # a signature: the store is asked
    home = make_home(tmp_path, test_home)
    answer = CliRunner().invoke(main, ["run", str(script), "--local", "--cold", "--env", NEW_ENV,
                                       "--json"],
                                env={"TVMREPRO_HOME": str(home),
                                     "DATABASE_URL": "postgresql://127.0.0.1:1/nowhere"},
                                catch_exceptions=False)
    assert answer.exit_code == 0, answer.output
    assert [run["status"] for run in json.loads(answer.stdout)["runs"]] == ["error"]
    assert "likely duplicates not read" in answer.stderr
