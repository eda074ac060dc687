"""A triage larger than a page through a real API (no worker: its reports have no code): the
command line reads every page (`wait --json`, `report`), and the triage's page shows one page
of reports with "previous" and "next"."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import NEW_ENV, REPO
from tests.service.browser import script_errors, start_browser, wait_for
from tests.service.stack import Backend, Stack, make_home

REPORTS = 120  # two full pages of 50 and a part


@pytest.fixture(scope="module")
def triage_job(tmp_path_factory: pytest.TempPathFactory,
               test_home: Path) -> Iterator[tuple[Stack, str]]:
    """An API of its own, and a finished triage of REPORTS issues without code."""
    stack = Stack(Backend("embedded"), make_home(tmp_path_factory.mktemp("pages"), test_home))
    stack.start_api()
    reports = [{"number": 500 + n, "title": f"report {n}", "state": "OPEN", "body": "word"}
               for n in range(REPORTS)]
    job = stack.submit({"kind": "triage", "environments": [NEW_ENV], "reports": reports})
    yield stack, job["id"]
    stack.close()


def cli(stack: Stack, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", *args, "--server", stack.url],
                          env={**stack.environ, "TVMREPRO_HOME": str(home)}, cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_the_command_line_reads_every_page(triage_job: tuple[Stack, str],
                                           tmp_path: Path) -> None:
    stack, job_id = triage_job
    first = stack.http.get(f"/api/v1/jobs/{job_id}").json()["triage"]
    assert len(first["reports"]) == 50 and first["page"]["next_offset"] == 50
    waited = cli(stack, tmp_path, "wait", job_id, "--json")
    assert waited.returncode == 0, waited.stderr
    numbers = [line["number"] for line in json.loads(waited.stdout)["reports"]]
    assert numbers == [500 + n for n in range(REPORTS)]
    report = cli(stack, tmp_path, "report", job_id, "--markdown")
    assert report.returncode == 0, report.stderr
    assert f"#{500 + REPORTS - 1}" in report.stdout


ROWS = "return [...document.querySelectorAll('#verdicts tbody tr')].map(tr => tr.dataset.number)"


def test_the_page_shows_a_page_of_reports(triage_job: tuple[Stack, str]) -> None:
    stack, job_id = triage_job
    driver = start_browser()
    try:
        driver.get(f"{stack.url}/jobs/{job_id}")
        for start, count in ((0, 50), (50, 50), (100, 20)):
            wanted = [str(500 + n) for n in range(start, start + count)]
            wait_for(driver, lambda d, w=wanted: d.execute_script(ROWS) == w,  # type: ignore[misc]
                     f"reports {start + 1} to {start + count}")
            pages = driver.find_element("id", "report-pages")
            assert pages.text.startswith(f"reports {start + 1}\u2013{start + count} of {REPORTS}")
            more = pages.find_elements("css selector", "button")[1]
            if start + count < REPORTS:
                more.click()
        assert not more.is_enabled()
        pages.find_elements("css selector", "button")[0].click()  # previous
        wanted = [str(500 + n) for n in range(50, 100)]
        wait_for(driver, lambda d: d.execute_script(ROWS) == wanted, "the page before")
        assert script_errors(driver) == []
    finally:
        driver.quit()
