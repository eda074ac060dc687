"""Reduce and extract jobs through the real service: API, Celery workers, real TVM.

The reduced and the extracted cases are checked by running them again through the service
(a run job, cache bypassed), not by the reducer's or the extractor's word.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.founding_reduction import PASSES_STEP, founding_steps
from tests.conftest import NEW_ENV, OLD_ENV, REPO
from tests.service.stack import Stack, dump
from tvmrepro.jobs.narrow.steps import narrowing
from worker.narrowing.reduction import CANCELLED, source_lines

pytestmark = [pytest.mark.tvm, pytest.mark.timeout(900)]
ONE_BACKEND = pytest.mark.parametrize("backend", ["redis+postgres"], indirect=True)
EMBEDDED = pytest.mark.parametrize("backend", ["embedded"], indirect=True)
# Enough for the pass list, which is what is checked (the module's edits are checked by
# tests/cli/test_extract_reduce.py): with a load of 9 on these 2 cores its last batch of runs
# started at 35 s and ended at 42 s.
BUDGET_S = 60
# The least a reduce job's budget may be: the tests that only need a reduce job's answer.
LEAST_BUDGET_S = 10
FOUNDING_PASSES = ["FuseTIR", "LambdaLift", "AllocateWorkspace"]
CASES = REPO / "tests" / "cases"


def pass_names(case: dict[str, Any]) -> list[str]:
    """The one variant's pass names."""
    return [p if isinstance(p, str) else p["name"] for p in case["variants"][0]["passes"]]


def founding_reduction(found: dict[str, Any]) -> list[str]:
    """Check a founding-case reduction however far its budget let it go: its steps are the first
    of those measured, its passes and lines those its last step left. Its steps."""
    steps = founding_steps(found)
    assert found["before"] == {"passes": 3, "lines": 146}
    assert found["steps"] == len(steps) - 1  # the reference is no step
    passes = pass_names(found["case"])
    assert passes == (["LambdaLift", "AllocateWorkspace"] if PASSES_STEP in steps
                      else FOUNDING_PASSES)
    assert found["after"] == {"passes": len(passes), "lines": source_lines(found["case"]["source"])}
    return steps


def rerun(stack: Stack, case: dict[str, Any], env: str) -> dict[str, Any]:
    """The case run as it is through the service (no cache): its one run's result."""
    job = stack.submit({"kind": "run", "case": case, "environments": [env],
                        "bypass_cache": True})
    done = stack.wait(job["id"], timeout=300)
    assert done["status"] == "done" and len(done["runs"]) == 1, dump(done)
    result: dict[str, Any] = done["runs"][0]["result"]
    return result


def follow(stack: Stack, job_id: str, key: str, timeout: float) -> tuple[dict[str, Any],
                                                                          list[dict[str, Any]]]:
    """Poll a job until it is done; it, and every `key` object seen while it was running."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = stack.http.get(f"/api/v1/jobs/{job_id}").json()
        if job["status"] in ("done", "failed"):
            return job, seen
        if job[key]["state"] == "running" and job[key]["progress"]:
            seen.append(job[key])
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} unfinished after {timeout} s\n{stack.logs()}")


@ONE_BACKEND
def test_the_founding_case_reduces_over_http_and_the_reduced_case_still_fails_alike(
        stack: Stack, founding_case: dict[str, Any]) -> None:
    stack.start_api()
    stack.start_worker(NEW_ENV)
    started = time.monotonic()
    job = stack.submit({"kind": "reduce", "case": founding_case, "environments": [NEW_ENV],
                        "variant": "fusetir-once", "budget_s": BUDGET_S})
    assert job["kind"] == "reduce" and job["reduce"]["state"] == "queued", dump(job)
    assert job["reduce"]["oracle"] == "signature"  # the default
    done, seen = follow(stack, job["id"], "reduce", timeout=600)
    found = done["reduce"]
    print(f"reduce job: {time.monotonic() - started:.1f} s, {found['runs']} runs, "
          f"{found['before']} -> {found['after']}, finished: {found['finished']}")
    assert done["status"] == "done" and found["state"] == "done", dump(done)
    # Progress was shown while it ran: phases, and a best case so far that only shrank.
    assert seen and {s["progress"]["phase"] for s in seen} - {"baseline"}, dump(seen)
    sizes = [s["progress"]["lines"] for s in seen if s["progress"].get("lines")]
    assert sizes == sorted(sizes, reverse=True), sizes
    # FuseTIR went; the module's edits, if the budget let any be taken, are the measured ones.
    assert len(founding_reduction(found)) >= 2, found["log"]
    # The job's one run is the original variant's run: the signature the reduction kept.
    original = done["runs"][0]["result"]
    assert original["status"] == "error" and original["signature"] == found["signature"]
    # Checked by running the reduced case again, not by the reducer's word.
    again = rerun(stack, found["case"], NEW_ENV)
    assert again["status"] == "error" and again["signature"] == original["signature"], \
        dump(again)
    # The report: the reduced module, passes and lines before and after, the command.
    report = stack.http.get(f"/api/v1/jobs/{job['id']}/report.md")
    assert report.status_code == 200, report.text
    text = report.text
    assert "#### Reduced" in text
    assert f"tvmrepro run reduced.json --local --env {NEW_ENV}" in text
    assert (f"| before | 3: `FuseTIR`, `LambdaLift`, `AllocateWorkspace` | "
            f"{found['before']['lines']} |") in text
    # The passes its budget left (a loaded host may end it before the pass list's step).
    kept = pass_names(found["case"])
    assert (f"| after | {len(kept)}: {', '.join(f'`{name}`' for name in kept)} | "
            f"{found['after']['lines']} |") in text
    assert found["case"]["source"].strip().splitlines()[-1] in text


@EMBEDDED
def test_a_real_report_extracts_over_http_into_a_case_with_the_scripts_signature(
        stack: Stack) -> None:
    stack.start_api()
    stack.start_worker(NEW_ENV)
    script = (CASES / "tvm-20192" / "original.py").read_text()
    started = time.monotonic()
    job = stack.submit({"kind": "extract", "case": {"title": "apache/tvm#20192",
                                                    "script": script},
                        "environments": [NEW_ENV]})
    done = stack.wait(job["id"], timeout=400)
    found = done["extract"]
    print(f"extract job: {time.monotonic() - started:.1f} s")
    assert done["status"] == "done" and found["state"] == "done", dump(done)
    script_run = done["runs"][0]["result"]
    assert script_run["status"] == "error" and script_run["stage"] == "build", dump(script_run)
    assert found["signature"] == script_run["signature"] and found["stage"] == "build"
    assert found["reproduces"] is True
    case = found["case"]
    assert case["source"] and case.get("script") is None  # module mode
    again = rerun(stack, case, NEW_ENV)
    assert again["status"] == "error" and again["signature"] == script_run["signature"], \
        dump(again)
    report = stack.http.get(f"/api/v1/jobs/{job['id']}/report.md").text
    assert "#### Extracted" in report and "tvmrepro run extracted.json --local" in report


@EMBEDDED
def test_the_command_line_reduces_and_extracts_through_the_service(
        stack: Stack, tmp_path: Path) -> None:
    stack.start_api()
    stack.start_worker(NEW_ENV)
    environ = {**os.environ, "TVMREPRO_SERVER": stack.url}
    script = tmp_path / "early.py"
    script.write_text("import tvm\nraise RuntimeError('the model file is missing')\n")
    proc = subprocess.run([sys.executable, "-m", "cli", "extract", str(script), "--env", NEW_ENV],
                          capture_output=True, text=True, env=environ, cwd=REPO, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "before any TVM pass, build or VM creation" in proc.stderr
    case = tmp_path / "case.json"
    case.write_text(json.dumps(json.loads((CASES / "tvm-17357" / "case.json").read_text())))
    reduce = [sys.executable, "-m", "cli", "reduce", str(case), "--env", NEW_ENV, "--budget-s",
              str(LEAST_BUDGET_S), "--json", "-o", str(tmp_path / "reduced.json")]
    # fusetir-twice runs to the end on this release: nothing to reduce, said as bad input.
    proc = subprocess.run([*reduce, "--variant", "fusetir-twice"], capture_output=True,
                          text=True, env=environ, cwd=REPO, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "does not show the bug by the oracle signature" in proc.stderr
    proc = subprocess.run([*reduce, "--variant", "fusetir-once"], capture_output=True,
                          text=True, env=environ, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    founding_reduction(found)
    assert json.loads((tmp_path / "reduced.json").read_text()) == found["case"]
    assert "[baseline] running the case as it is" in proc.stderr  # progress while it ran
    job = stack.http.get(f"/api/v1/jobs/{found['job']}").json()
    assert job["kind"] == "reduce" and job["reduce"]["case"] == found["case"]


@EMBEDDED
def test_bad_reduce_and_extract_requests_name_the_field(stack: Stack,
                                                        founding_case: dict[str, Any]) -> None:
    stack.start_api()
    script = {"script": "import tvm\n"}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"kind": "reduce", "case": founding_case, "environments": [OLD_ENV, NEW_ENV],
          "variant": "fusetir-once"}, "environments"),
        ({"kind": "reduce", "case": founding_case, "environments": [NEW_ENV]}, "variant"),
        ({"kind": "reduce", "case": script, "environments": [NEW_ENV]}, "case"),
        ({"kind": "reduce", "case": founding_case, "environments": [NEW_ENV],
          "variant": "fusetir-once", "budget_s": 5}, "budget_s"),
        ({"kind": "reduce", "case": founding_case, "environments": [NEW_ENV],
          "variant": "fusetir-once", "oracle": "output"}, "oracle"),
        ({"kind": "extract", "case": founding_case, "environments": [NEW_ENV]}, "case"),
        ({"kind": "extract", "case": script, "environments": [NEW_ENV],
          "variant": "script"}, "variant"),
        ({"kind": "extract", "case": script, "environments": [NEW_ENV], "at": "x"}, "at"),
        ({"kind": "run", "case": founding_case, "environments": [NEW_ENV],
          "budget_s": 60}, "budget_s"),
    ]
    for body, field in cases:
        response = stack.http.post("/api/v1/jobs", json={"wait": True, **body})
        assert response.status_code == 400, (field, response.text)
        assert response.json()["error"]["field"] == field, (field, response.text)


@EMBEDDED
def test_the_page_reduces_a_failing_cell_and_shows_a_reduction(
        stack: Stack, founding_case: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    from tests.service.browser import start_browser, wait_for

    browser = start_browser()
    try:
        stack.start_api()
        stack.start_worker(NEW_ENV)
        ran = stack.wait(stack.submit({"kind": "run", "case": founding_case,
                                       "environments": [NEW_ENV]})["id"])
        cells = {c["variant"]: c for row in ran["matrix"]["cells"] for c in row}
        assert cells["fusetir-once"]["status"] == "error" and cells["fusetir-twice"]["status"] == "ok"
        browser.get(f"{stack.url}/jobs/{ran['id']}")
        # Only the failing cell offers a reduction.
        button = wait_for(browser, lambda d: d.find_elements(
            By.CSS_SELECTOR, f"td[data-run='{cells['fusetir-once']['run']}'] button.narrow"),
            "the reduce button")[0]
        assert not browser.find_elements(
            By.CSS_SELECTOR, f"td[data-run='{cells['fusetir-twice']['run']}'] button.narrow")
        button.click()
        wait_for(browser, lambda d: ran["id"] not in d.current_url, "the reduce job's page")
        reduce_id = browser.current_url.rstrip("/").split("/")[-1]
        job = stack.http.get(f"/api/v1/jobs/{reduce_id}").json()
        assert (job["kind"], job["reduce"]["variant"], job["environments"]) == \
            ("reduce", "fusetir-once", [NEW_ENV]), dump(job)
        wait_for(browser, lambda d: "passes" in d.find_element(By.ID, "narrow-summary").text,
                 "the reduction's progress", timeout=120)
        # Cancelled from its page (this browser submitted it: it holds the cancel token): the
        # worker stops the reduction before its next sandbox (its budget is 900 s), storing the best
        # case so far (or, still at its baseline, that it was cancelled).
        wait_for(browser, lambda d: d.find_element(By.ID, "cancel-job").is_displayed(),
                 "the cancel button")
        browser.find_element(By.ID, "cancel-job").click()
        wait_for(browser, lambda d: d.find_element(By.ID, "cancel-status").text.startswith(
            "cancelled "), "the cancel's answer")
        stack._until(lambda: (row := narrowing(stack.store, reduce_id)) is not None
                     and bool(row.result or row.error),
                     "the cancelled reduction to stop", timeout=120)
        wait_for(browser, lambda d: "ancelled" in d.find_element(By.ID, "narrow-summary").text,
                 "the cancelled reduction")
        # Cancelled at its baseline: no case; after a step: its best case, said to be cancelled.
        cancelled = stack.http.get(f"/api/v1/jobs/{reduce_id}").json()["reduce"]
        assert cancelled["state"] == "failed" or (
            cancelled["state"] == "done" and not cancelled["finished"]
            and cancelled["log"][-1] == CANCELLED), cancelled
        # A finished reduction: the sizes before and after, and the reduced module.
        done = stack.wait(stack.submit({"kind": "reduce", "case": founding_case,
                                        "environments": [NEW_ENV], "variant": "fusetir-once",
                                        "budget_s": LEAST_BUDGET_S})["id"], timeout=300)
        found = done["reduce"]
        browser.get(f"{stack.url}/jobs/{done['id']}")
        wait_for(browser, lambda d: d.find_element(By.ID, "narrow-heading").text == "Reduced",
                 "the finished reduction")
        rows = {r.get_attribute("data-row"): r.text
                for r in browser.find_elements(By.CSS_SELECTOR, "#narrow-sizes tbody tr")}
        assert rows["before"].endswith(str(found["before"]["lines"])), rows
        assert rows["after"].endswith(str(found["after"]["lines"])), rows
        shown = browser.find_element(By.ID, "narrow-case").get_attribute("textContent")
        assert shown == found["case"]["source"]
    finally:
        browser.quit()


@EMBEDDED
def test_a_reduce_job_survives_kill_9_of_the_process_reducing_it(
        stack: Stack, founding_case: dict[str, Any]) -> None:
    stack.start_api()
    stack.start_worker(NEW_ENV)
    job = stack.submit({"kind": "reduce", "case": founding_case, "environments": [NEW_ENV],
                        "variant": "fusetir-once", "budget_s": LEAST_BUDGET_S})
    run = stack.wait_running(job["id"])
    os.kill(int(run["claimed_by"].split(":")[1]), signal.SIGKILL)  # the pool process
    done = stack.wait(job["id"], timeout=300)
    found = done["reduce"]
    assert done["status"] == "done" and found["state"] == "done", dump(done)
    assert done["runs"][0]["deliveries"] == 2  # reduced again by another process
    founding_reduction(found)
    assert found["signature"] == done["runs"][0]["result"]["signature"]
