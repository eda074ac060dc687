"""Triage and sweep jobs through the real service: the API, a Celery worker per environment,
real TVM, Redis and PostgreSQL.

Corpus reports (tests/tracker/corpus) triaged by `tvmrepro triage` without --local give what
plain TVM measured and what `triage --local` gives (tests/tracker/test_triage.py); a worker
killed with -9 mid-triage loses no report; the triage's page shows the answer; a sweep of the
stored cases reads what the store holds and runs (and stores) the rest.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import NEW_ENV, OLD_ENV, REPO
from tests.service.browser import script_errors, start_browser, wait_for
from tests.service.stack import Stack, dump, make_home, serving
from tests.tracker.conftest import CORPUS
from tvmrepro.environments import Environment
from tvmrepro.store import schema

pytestmark = [pytest.mark.tvm, pytest.mark.timeout(600)]
# Two reports of one bug (#17348 closed, #20191 open), one fixed in 0.27 but open (#20200),
# one whose quoted segfault is a clean error on both releases (#17239), one without code.
NUMBERS = (17348, 20191, 20200, 17239, 16774)
VERDICTS = {17348: ("reproduces", None, True), 20191: ("reproduces", None, True),
            20200: ("fixed", NEW_ENV, False), 17239: ("never_reproduced", None, False),
            16774: ("no_code", None, None)}
AUDIT = [{"number": 17239, "state": "OPEN", "finding": "open_but_fixed"},
         {"number": 17348, "state": "CLOSED", "finding": "closed_but_reproduces"},
         {"number": 20200, "state": "OPEN", "finding": "open_but_fixed", "since": NEW_ENV}]
MAINTAINER_TOKEN = "the-maintainer-token-of-this-module"
# A report whose script runs long enough to kill its worker mid-run.
SLEEPER = ("### Steps\n\n```python\nimport time\nimport tvm\n\ntime.sleep(6)\nprint('slept')\n"
           "```\n")


def corpus_issues() -> list[dict[str, Any]]:
    """The chosen issues as the export has them, in its order."""
    issues: list[dict[str, Any]] = json.loads((CORPUS / "issues.json").read_text())
    return [issue for issue in issues if issue["number"] in NUMBERS]


def measured() -> dict[int, dict[str, str]]:
    """Each chosen report's statuses as plain TVM measured them (EXPECTED.json)."""
    expected = json.loads((CORPUS / "EXPECTED.json").read_text())["reports"]
    return {n: {env: expected[str(n)][env]["status"] for env in (OLD_ENV, NEW_ENV)}
            for n in NUMBERS if expected[str(n)]["verdict"] != "no_code"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, test_home: Path,
          tvm_envs: dict[str, Environment]) -> Iterator[Stack]:
    """One service for the module, on Redis and PostgreSQL: the API and a worker for each of
    the two founding environments."""
    from tests.service.conftest import own_backend

    with own_backend("redis+postgres") as backend, \
            serving(backend, make_home(tmp_path_factory.mktemp("triage"), test_home),
                    (OLD_ENV, NEW_ENV), TVMREPRO_MAINTAINER_TOKEN=MAINTAINER_TOKEN) as running:
        # The maintainer's: its triages keep the known issues (the command line's too, as
        # it runs with the stack's variables).
        running.http.headers["Authorization"] = f"Bearer {MAINTAINER_TOKEN}"
        yield running


@pytest.fixture(scope="module")
def triaged(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    """The chosen reports triaged by `tvmrepro triage --json` through the service: the triage
    job's id and what the command printed."""
    folder = tmp_path_factory.mktemp("triage-cli")
    export = folder / "issues.json"
    export.write_text(json.dumps(corpus_issues()))
    done = subprocess.run(
        [sys.executable, "-m", "cli", "triage", str(export), "--env", OLD_ENV, "--env", NEW_ENV,
         "--server", stack.url, "--json"], env={**stack.environ, "TVMREPRO_HOME": str(folder)},
        cwd=REPO, capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, done.stderr + stack.logs()
    found = re.search(r"triage job ([0-9a-f]{32})", done.stderr)
    assert found, done.stderr
    return found.group(1), json.loads(done.stdout)


def check_answer(answer: dict[str, Any]) -> None:
    """The answer of the chosen reports: plain TVM's statuses, `triage --local`'s verdicts,
    groups and audit (tests/tracker/test_triage.py)."""
    by_number = {line["number"]: line for line in answer["reports"]}
    assert list(by_number) == [issue["number"] for issue in corpus_issues()], dump(answer)
    for number, statuses in measured().items():
        assert by_number[number]["statuses"] == statuses, dump(by_number[number])
    assert {n: (line["verdict"], line["since"], line["quoted_error_reproduced"])
            for n, line in by_number.items()} == VERDICTS
    assert [(g["reports"], g["representative"]) for g in answer["groups"]] == [
        ([17348, 20191], 20191), ([20200], 20200)]
    assert by_number[17348]["group"] == by_number[20191]["group"] != by_number[20200]["group"]
    assert answer["audit"] == AUDIT
    assert by_number[16774]["statuses"] == {} and by_number[16774]["no_code"]


def test_triage_through_the_command_is_what_plain_tvm_measured(
        stack: Stack, triaged: tuple[str, dict[str, Any]]) -> None:
    job_id, printed = triaged
    # What `triage --local --json` prints: the answer, and on which releases and why.
    assert set(printed) == {"reports", "groups", "audit", "environments", "environments_why",
                            "not_probed"}
    check_answer(printed)
    job = stack.http.get(f"/api/v1/jobs/{job_id}").json()
    assert (job["kind"], job["status"], job["environments"]) == \
        ("triage", "done", [OLD_ENV, NEW_ENV])
    assert job["triage"]["finished"] and job["triage"]["progress"] == {
        "reports": 5, "reports_done": 5, "runs": 8, "runs_done": 8}
    check_answer(job["triage"])
    # Each report with code is a run job of its own, with its runs, under its issue's label.
    jobs = dict(zip([line["number"] for line in job["triage"]["reports"]], job["triage"]["jobs"],
                    strict=True))
    assert jobs[16774] is None
    run_job = stack.http.get(f"/api/v1/jobs/{jobs[20191]}").json()
    assert (run_job["kind"], run_job["title"]) == ("run", "#20191")
    assert [run["result"]["status"] for run in run_job["runs"]] == ["crash", "crash"]
    # The job list shows the triage with its runs, not its run jobs.
    listed = stack.http.get("/api/v1/jobs", params={"limit": 100}).json()["jobs"]
    (line,) = [found for found in listed if found["id"] == job_id]
    assert (line["kind"], line["runs"], line["done"]) == ("triage", 8, 8)
    assert not {found["id"] for found in listed} & set(jobs.values())


def test_wait_and_the_report_of_a_triage(stack: Stack, triaged: tuple[str, dict[str, Any]],
                                         tmp_path: Path) -> None:
    job_id, printed = triaged
    waited = subprocess.run([sys.executable, "-m", "cli", "wait", job_id, "--json", "--server",
                             stack.url], env={**stack.environ, "TVMREPRO_HOME": str(tmp_path)},
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert waited.returncode == 0, waited.stderr
    assert json.loads(waited.stdout) == printed
    report = stack.http.get(f"/api/v1/jobs/{job_id}/report.md").text
    rows = {line.split(" ", 2)[1]: line for line in report.splitlines()
            if line.startswith("| [#") or line.startswith("| #")}
    assert len(rows) == 5, report
    assert "| fixed since `tvm-0.27.0.post1-cpu` |" in rows["[#20200](https://github.com/apache/"
                                                           "tvm/issues/20200)"], report
    assert ("- group 1: #17348, #20191; representative #20191: "
            "`crash: SIGSEGV at StorageObj::AllocTensor at run`") in report
    assert "- #17348 `CLOSED`: closed but reproduces" in report


def test_a_finished_triage_names_its_issues_as_likely_duplicates(
        stack: Stack, triaged: tuple[str, dict[str, Any]]) -> None:
    """The worker that stored the triage's last run kept its known issues: a new report with
    #20191's segfault is a likely duplicate of both reports of that bug."""
    (issue,) = [issue for issue in corpus_issues() if issue["number"] == 20191]
    script = re.search(r"```python\n(.*?)```", issue["body"], re.DOTALL)
    assert script
    job = stack.submit({"case": {"title": "a segfault again", "script": script.group(1)},
                        "environments": [NEW_ENV]})
    done = stack.wait(job["id"], timeout=300)
    assert [i["number"] for i in done["likely_duplicates"]] == [17348, 20191], dump(done)


def test_a_triage_served_whole_from_the_cache_keeps_its_known_issues(stack: Stack) -> None:
    """No worker stores a run of it, so its submission records what it saw."""
    script = "import tvm\nraise ValueError('a bug reported once as #99999')\n"
    first = stack.submit({"case": {"title": "before the report", "script": script},
                          "environments": [NEW_ENV]})
    assert stack.wait(first["id"])["likely_duplicates"] == []
    body = f"### Steps\n\n```python\n{script}```\n"
    triage = stack.submit({"kind": "triage", "environments": [NEW_ENV], "reports": [
        {"number": 99999, "title": "a bug", "state": "OPEN", "body": body}]})
    assert triage["status"] == "done" and triage["cached_runs"] == 1, dump(triage)
    again = stack.submit({"case": {"title": "after the report", "script": script},
                          "environments": [NEW_ENV]})
    assert [i["number"] for i in stack.wait(again["id"])["likely_duplicates"]] == [99999]


@pytest.mark.parametrize("body, field", [
    ({"kind": "triage"}, "reports"),
    ({"kind": "triage", "reports": []}, "reports"),
    ({"kind": "triage", "reports": [3]}, "reports[0]"),
    ({"kind": "triage", "reports": ["x", {"number": "7", "title": "t"}]}, "reports[1].number"),
    ({"kind": "triage", "reports": [{"body": "x", "number": 1}, {"body": "y", "number": 1}]},
     "reports"),
    ({"kind": "triage", "reports": [{"body": 5}]}, "reports[0].body"),
    ({"kind": "triage", "reports": [{"body": "x", "state": "MERGED"}]}, "reports[0].state"),
    ({"kind": "triage", "reports": ["x"], "case": {"script": "print(1)"}}, "case"),
    ({"kind": "triage", "reports": ["x"], "variant": "script"}, "variant"),
    ({"kind": "run"}, "case"),
    ({"kind": "run", "case": {"script": "print(1)"}, "reports": ["x"]}, "reports"),
    ({"kind": "sweep"}, "env"),
    ({"kind": "sweep", "env": "tvm-9.9.9-cpu"}, "env"),
    ({"kind": "sweep", "env": NEW_ENV, "since": "nope"}, "since"),
    ({"kind": "sweep", "env": NEW_ENV, "environments": [OLD_ENV]}, "environments"),
    ({"kind": "sweep", "env": NEW_ENV, "reports": ["x"]}, "reports"),
    ({"kind": "triage", "reports": ["```python\nimport tvm\n```\n"],
      "environments": ["tvm-9.9.9-cpu"]}, "environments[0]"),
])
def test_a_bad_triage_request_is_a_400_naming_the_field(stack: Stack, body: dict[str, Any],
                                                         field: str) -> None:
    before = stack.http.get("/api/v1/jobs").json()["total"]
    sent = body if body["kind"] == "sweep" else {"environments": [OLD_ENV], **body}
    response = stack.http.post("/api/v1/jobs", json=sent)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["field"] == field, response.text
    assert stack.http.get("/api/v1/jobs").json()["total"] == before  # nothing stored


def results_of(stack: Stack, run_ids: list[str]) -> dict[str, int]:
    """run id -> how many result rows it has."""
    with stack.store.engine.connect() as conn:
        rows = conn.execute(schema.results.select().where(schema.results.c.run_id.in_(run_ids)))
        found = [row.run_id for row in rows]
    return {run_id: found.count(run_id) for run_id in run_ids}


def test_kill_9_of_a_worker_mid_triage_loses_no_report(stack: Stack) -> None:
    issues = [*corpus_issues(), {"number": 1, "title": "sleeps", "state": "CLOSED",
                                 "body": SLEEPER}]
    job = stack.submit({"kind": "triage", "reports": issues, "environments": [OLD_ENV, NEW_ENV],
                        "bypass_cache": True})
    run_jobs = stack.store.triage_run_jobs(job["id"])
    sleeper = stack.store.job(run_jobs[-1])
    assert sleeper is not None and sleeper.title == "#1"
    # Killed while the sleeper runs on the newest environment: main process, pool, sandboxes.
    deadline = time.monotonic() + 300
    while not any(run.environment == NEW_ENV and run.state == "running"
                  for run in stack.store.job(run_jobs[-1]).runs):  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the sleeping report never ran\n" + stack.logs()
        time.sleep(0.1)
    stack.kill(stack.workers[NEW_ENV])
    stack.start_worker(NEW_ENV)  # its recovery sweep finds the runs' claimer gone
    done = stack.wait(job["id"], timeout=400)
    answer = done["triage"]
    assert answer["finished"] and answer["progress"]["reports_done"] == 6, dump(answer)
    by_number = {line["number"]: line for line in answer["reports"]}
    assert by_number.pop(1)["statuses"] == {OLD_ENV: "ok", NEW_ENV: "ok"}
    check_answer({**answer, "reports": list(by_number.values())})
    runs = [run for run_job in run_jobs for run in stack.store.job(run_job).runs]  # type: ignore[union-attr]
    assert len(runs) == 10 and not any(run.cached for run in runs)
    assert set(results_of(stack, [run.id for run in runs]).values()) == {1}  # one result each
    (killed,) = [run for run in stack.store.job(run_jobs[-1]).runs  # type: ignore[union-attr]
                 if run.environment == NEW_ENV]
    assert killed.deliveries == 2


def test_the_triage_page_shows_verdicts_groups_and_audit(
        stack: Stack, triaged: tuple[str, dict[str, Any]]) -> None:
    job_id, printed = triaged
    driver = start_browser()
    try:
        driver.get(f"{stack.url}/jobs/{job_id}")
        rows = wait_for(driver, lambda d: d.execute_script("""
            const rows = [...document.querySelectorAll('#verdicts tbody tr')];
            return rows.length === 5 ? rows.map(tr => [tr.dataset.number, tr.dataset.verdict,
              [...tr.querySelectorAll('td.cell')].map(td => td.textContent)]) : null;"""),
            "the five reports' verdicts")
        assert {int(n): verdict for n, verdict, _ in rows} == \
            {n: verdict for n, (verdict, _, _) in VERDICTS.items()}
        statuses = {int(n): cells for n, _, cells in rows}
        assert statuses[20200] == ["error", "ok"] and statuses[16774] == ["", ""]
        groups = driver.execute_script(
            "return [...document.querySelectorAll('#triage-groups li[data-group]')]"
            ".map(li => li.textContent)")
        assert len(groups) == 1 and groups[0].startswith("group 1: #17348, #20191, "
                                                          "representative #20191")
        findings = driver.execute_script(
            "return [...document.querySelectorAll('#audit li')].map(li => li.dataset.finding)")
        assert findings == [entry["finding"] for entry in printed["audit"]]
        assert "job-done" in driver.find_element("id", "job-status").get_attribute("class")
        # A report's runs are on its run job's page, its matrix there.
        driver.find_element("css selector", "#verdicts tr[data-number='20191'] a[href^='/jobs/']"
                            ).click()
        wait_for(driver, lambda d: d.find_elements("css selector", "#matrix td.st-crash"),
                 "the report's matrix")
        assert script_errors(driver) == []
    finally:
        driver.quit()


def test_a_sweep_job_runs_what_the_store_lacks_and_stores_it(
        stack: Stack, triaged: tuple[str, dict[str, Any]], tmp_path: Path) -> None:
    """`tvmrepro sweep` through the service: every stored case on both environments, the
    results the store holds served from the cache, the one it lacks run and stored."""
    fresh = {"title": "fresh on the newest only", "script": "import tvm\nprint('fresh')\n"}
    stack.wait(stack.submit({"case": fresh, "environments": [NEW_ENV]})["id"], timeout=300)
    done = subprocess.run(
        [sys.executable, "-m", "cli", "sweep", "--env", NEW_ENV, "--since", OLD_ENV,
         "--server", stack.url, "--json"], env={**stack.environ, "TVMREPRO_HOME": str(tmp_path)},
        cwd=REPO, capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, done.stderr + stack.logs()
    answer = json.loads(done.stdout)
    assert (answer["env"], answer["since"]) == (NEW_ENV, OLD_ENV)
    by_title = {line["title"]: line for line in answer["cases"]}
    assert (by_title["#20200"]["old"]["status"], by_title["#20200"]["new"]["status"],
            by_title["#20200"]["change"]) == ("error", "ok", "fixed")
    assert by_title["#20191"]["change"] == "same" and \
        by_title["#20191"]["new"]["signature"] == "crash: SIGSEGV at StorageObj::AllocTensor at run"
    assert by_title[fresh["title"]]["change"] == "same"
    assert answer["changed"]["fixed"] >= 1
    found = re.search(r"sweep job ([0-9a-f]{32})", done.stderr)
    assert found, done.stderr
    job = stack.http.get(f"/api/v1/jobs/{found.group(1)}").json()
    assert (job["kind"], job["status"], job["sweep"]["finished"]) == ("sweep", "done", True)
    assert job["sweep"]["progress"]["cases"] == len(answer["cases"])
    runs = {line["title"]: stack.http.get(f"/api/v1/jobs/{run_job}").json()["runs"]
            for line, run_job in zip(job["sweep"]["cases"], job["sweep"]["jobs"], strict=True)}
    # What the store held is read, not run again; the fresh case's older run is run and stored.
    assert [run["cached"] for run in runs["#20200"]] == [True, True]
    assert [(run["environment"], run["cached"]) for run in runs[fresh["title"]]] == \
        [(OLD_ENV, False), (NEW_ENV, True)]
    assert "js/sweep.js" in stack.http.get(f"/jobs/{job['id']}").text
