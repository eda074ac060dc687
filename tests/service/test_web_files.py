"""The case page's files in a real browser, against a real service (the API and a worker, real
TVM): a file chosen on the page reaches the run, and the job's page shows it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import NEW_ENV
from tests.service.browser import (
    artifacts_dir,
    grant_clipboard,
    script_errors,
    start_browser,
    wait_for,
)
from tests.service.stack import Backend, Stack, make_home, serving
from tests.service.test_web import by_css, one, paste_into_editor, pick_environments
from tvmrepro.environments import Environment

pytestmark = [pytest.mark.tvm, pytest.mark.timeout(600)]
NOTES = b"read beside the script\n"
SCRIPT = "print(open('notes.txt').read().strip())\n"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, test_home: Path,
          tvm_envs: dict[str, Environment]) -> Iterator[Stack]:
    """The API and a worker of NEW_ENV."""
    with serving(Backend("embedded"), make_home(tmp_path_factory.mktemp("web-files"), test_home),
                 (NEW_ENV,)) as running:
        yield running


@pytest.fixture(scope="module")
def browser(stack: Stack) -> Iterator[Any]:
    driver = start_browser()
    try:
        grant_clipboard(driver, stack.url)
        yield driver
    finally:
        driver.quit()


def test_a_file_chosen_on_the_page_reaches_the_run(browser: Any, stack: Stack,
                                                   tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_bytes(NOTES)
    browser.get(stack.url + "/")
    one(browser, f"#environments input[value='{NEW_ENV}']")
    one(browser, "input[name=mode][value=script]").click()
    paste_into_editor(browser, SCRIPT)
    by_css(browser, "#attach-files")[0].send_keys(str(tmp_path / "notes.txt"))
    wait_for(browser, lambda d: "notes.txt" in one(d, "#file-list").text, "the file listed")
    shots = artifacts_dir(tmp_path)
    browser.save_screenshot(str(shots / "case-page-files.png"))
    pick_environments(browser, {NEW_ENV})
    one(browser, "#submit").click()
    wait_for(browser, lambda d: "/jobs/" in d.current_url, "the job's page")
    job_id = browser.current_url.rstrip("/").split("/")[-1]
    shown = wait_for(browser, lambda d: one(d, "#job-files").text, "the job's files")
    digest = hashlib.sha256(NOTES).hexdigest()
    assert shown == f"Files: notes.txt ({len(NOTES)} B, sha256 {digest[:12]})"
    browser.save_screenshot(str(shots / "job-page-files.png"))
    done = stack.wait(job_id)
    (run,) = done["runs"]
    assert run["result"]["status"] == "ok", run["result"]
    assert done["files"] == [{"name": "notes.txt", "sha256": digest, "size": len(NOTES)}]
    log = stack.http.get(f"/api/v1/jobs/{job_id}/runs/{run['id']}/log").json()
    assert log["stdout"] == NOTES.decode()
    assert script_errors(browser) == []
