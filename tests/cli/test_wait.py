"""`tvmrepro wait JOB` for every kind of job: it follows the job to its end and prints what the
command that submitted it prints (with --json, that command's JSON).

Real API and worker processes on the embedded broker and store; the workers run the tests'
FakeRuntime (no TVM needed: what is tested is the command line and the service, not TVM), as
tests/service/test_wait.py's do.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli.cli import main
from tests.conftest import NEW_ENV, OLD_ENV, case_path
from tests.fakes.runtime import DIRECTIVE
from tests.service.stack import Backend, Stack
from tvmrepro.jobs.kinds import KINDS

pytestmark = [pytest.mark.timeout(300)]
# Fails on NEW_ENV only, with a signature of its own; passes on OLD_ENV.
FAILING_ON_NEW = {"environment": NEW_ENV, "status": "error", "stage": "build",
                  "error_type": "ValueError", "message": "a bug since 0.27",
                  "signature": "ValueError: a bug since 0.27"}
SCRIPT = f"{DIRECTIVE} {json.dumps(FAILING_ON_NEW)}\nimport tvm\nprint('hi')\n"


@pytest.fixture(scope="module")
def fake_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The API and a worker for each of OLD_ENV and NEW_ENV, whose runs the FakeRuntime plays."""
    home = tmp_path_factory.mktemp("home")
    running = Stack(Backend("embedded"), home, TVMREPRO_RUNTIME="fake")
    try:
        running.start_api()
        running.start_worker(OLD_ENV)
        running.start_worker(NEW_ENV)
        yield running
    finally:
        running.close()


def waited(stack: Stack, job: dict[str, Any], *flags: str) -> Result:
    """`tvmrepro wait JOB [flags]` against the stack's service, as a user runs it."""
    return CliRunner().invoke(main, ["wait", job["id"], *flags, "--server", stack.url])


def waited_json(stack: Stack, job: dict[str, Any]) -> Any:
    """What `tvmrepro wait JOB --json` prints, read back; the command succeeded."""
    ran = waited(stack, job, "--json")
    assert ran.exit_code == 0, (ran.output, ran.exception)
    return json.loads(ran.stdout)


def script_case(title: str) -> dict[str, Any]:
    """A script-mode case that fails on NEW_ENV only."""
    return {"title": title, "script": SCRIPT}


def module_case() -> dict[str, Any]:
    """apache/tvm#17357's module-mode case, its first variant failing on NEW_ENV as the
    FakeRuntime plays it."""
    case: dict[str, Any] = json.loads(case_path("tvm-17357/case.json").read_text())
    case["source"] = f"{DIRECTIVE} {json.dumps(FAILING_ON_NEW)}\n{case['source']}"
    case["variants"] = case["variants"][:1]
    return case


def test_every_kind_has_a_wait_test() -> None:
    assert set(KINDS) == {"run", "bisect", "reduce", "extract", "triage", "sweep"}


def test_wait_prints_a_run_jobs_matrix(fake_stack: Stack) -> None:
    job = fake_stack.submit({"case": script_case("run"), "environments": [OLD_ENV, NEW_ENV]})
    answer = waited_json(fake_stack, job)
    assert answer["job"]["id"] == job["id"] and answer["job"]["status"] == "done"
    assert [(r["environment"], r["status"]) for r in answer["runs"]] == [
        (OLD_ENV, "ok"), (NEW_ENV, "error")]
    table = waited(fake_stack, job)
    assert table.exit_code == 0, table.output
    assert "ValueError: a bug since 0.27" in table.stdout


def test_wait_prints_a_bisections_probes(fake_stack: Stack) -> None:
    job = fake_stack.submit({"kind": "bisect", "case": script_case("bisect"),
                             "environments": [OLD_ENV, NEW_ENV], "bypass_cache": True})
    answer = waited_json(fake_stack, job)
    assert (answer["verdict"], answer["first_changed"], answer["last_before_change"]) == (
        "changed", NEW_ENV, OLD_ENV)
    table = waited(fake_stack, job)
    assert table.exit_code == 0, table.output
    assert f"{OLD_ENV} (good) -> {NEW_ENV} (bad)" in table.stdout


def test_wait_prints_a_reductions_answer(fake_stack: Stack) -> None:
    case = module_case()
    job = fake_stack.submit({"kind": "reduce", "case": case, "environments": [NEW_ENV],
                             "budget_s": 10})
    answer = waited_json(fake_stack, job)
    assert answer["job"] == job["id"]
    assert answer["signature"] == "ValueError: a bug since 0.27"
    assert answer["after"]["lines"] <= answer["before"]["lines"]


def test_wait_says_why_an_extraction_has_no_answer(fake_stack: Stack) -> None:
    # The FakeRuntime records no step of a script: the job ends saying so, and so does `wait`
    # (as `tvmrepro extract` does: exit code 2, the reason).
    job = fake_stack.submit({"kind": "extract", "case": script_case("extract"),
                             "environments": [NEW_ENV]})
    ran = waited(fake_stack, job, "--json")
    extract = fake_stack.http.get(f"/api/v1/jobs/{job['id']}").json()["extract"]
    assert extract["state"] == "failed" and "was not recorded" in extract["error"], extract
    assert ran.exit_code == 2 and extract["error"] in ran.output, ran.output


def test_wait_prints_a_triages_verdicts(fake_stack: Stack) -> None:
    report = {"number": 12345, "title": "a bug", "state": "OPEN",
              "body": f"### Steps\n\n```python\n{SCRIPT}```\n"}
    job = fake_stack.submit({"kind": "triage", "environments": [OLD_ENV, NEW_ENV],
                             "reports": [report]})
    answer = waited_json(fake_stack, job)
    [line] = answer["reports"]
    assert (line["number"], line["verdict"]) == (12345, "reproduces"), answer
    assert [group["signature"] for group in answer["groups"]] == [FAILING_ON_NEW["signature"]]
    table = waited(fake_stack, job)
    assert table.exit_code == 0, table.output
    assert "#12345" in table.stdout and "reproduces" in table.stdout


def test_wait_prints_a_sweeps_changes(fake_stack: Stack) -> None:
    # A case of its own (the sweep counts a case that other jobs ran too once).
    case = {"title": "swept", "script": f"{SCRIPT}# swept\n"}
    stored = fake_stack.submit({"case": case, "environments": [OLD_ENV]})
    fake_stack.wait(stored["id"])
    job = fake_stack.submit({"kind": "sweep", "env": NEW_ENV, "since": OLD_ENV})
    answer = waited_json(fake_stack, job)
    assert (answer["since"], answer["env"]) == (OLD_ENV, NEW_ENV)
    swept = [line for line in answer["cases"] if line["job"] == stored["id"]]
    assert [(line["change"], line["old"]["status"], line["new"]["status"])
            for line in swept] == [("regressed", "ok", "error")], answer
    table = waited(fake_stack, job)
    assert table.exit_code == 0, table.output
    assert f"{OLD_ENV} -> {NEW_ENV}:" in table.stdout and "regressed" in table.stdout
    # Its report is the sweep's own section: what changed, with the counts.
    report = fake_stack.http.get(f"/api/v1/jobs/{job['id']}/report.md").text
    assert f"- regressed: `swept` (`script`): `ok` → `error`, `{FAILING_ON_NEW['signature']}`" \
        in report, report
    assert "Changes: " in report and "regressed" in report.split("Changes: ")[1], report
