"""The pages in a real browser, against a real service: the API, one worker per environment, real TVM.

Screenshots of the case page, a finished job and an IR diff are saved under
$TVMREPRO_ARTIFACTS/web (else the test session's tmp folder) to be looked at.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import NEW_ENV, OLD_ENV, REPO, case_path
from tests.service.browser import (
    artifacts_dir,
    clipboard_read,
    clipboard_write,
    grant_clipboard,
    load_ms,
    requested_urls,
    script_errors,
    start_browser,
    wait_for,
)
from tests.service.stack import Backend, Stack, make_home, serving
from tvmrepro.environments import Environment, default_catalog

pytestmark = [pytest.mark.tvm, pytest.mark.timeout(600)]
MISSING = "fused_relax_nn_attention_cutlass_gv"
FINAL = {"ok", "error", "crash", "timeout", "oom", "incompatible", "infra_error"}
EVIL = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, test_home: Path,
          tvm_envs: dict[str, Environment]) -> Iterator[Stack]:
    """One service for the module: the API and a worker for each founding-case environment."""
    with serving(Backend("embedded"), make_home(tmp_path_factory.mktemp("web"), test_home),
                 (OLD_ENV, NEW_ENV)) as running:
        yield running


@pytest.fixture(scope="module")
def browser(stack: Stack) -> Iterator[Any]:
    """Headless Chromium, allowed to use the clipboard on the service's pages."""
    driver = start_browser()
    try:
        grant_clipboard(driver, stack.url)
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder for screenshots."""
    return artifacts_dir(tmp_path_factory.mktemp("artifacts"))


def by_css(driver: Any, selector: str) -> list[Any]:
    """Elements matching a CSS selector."""
    from selenium.webdriver.common.by import By

    found: list[Any] = driver.find_elements(By.CSS_SELECTOR, selector)
    return found


def one(driver: Any, selector: str) -> Any:
    """The element matching a selector, waited for until it is shown."""
    return wait_for(driver, lambda d: next((e for e in by_css(d, selector) if e.is_displayed()),
                                           None), selector)


def only_to(driver: Any, origin: str) -> None:
    """Every request the page made went to the service."""
    urls = requested_urls(driver)
    assert urls and all(url.startswith(origin + "/") for url in urls), urls


def matrix(driver: Any) -> dict[tuple[str, str], str]:
    """(variant, environment) -> the status shown in the cell, once every cell is final."""
    def final() -> dict[tuple[str, str], str] | None:
        cells: list[tuple[str, str, str, str]] = driver.execute_script("""
            const envs = [...document.querySelectorAll('#matrix thead th code')].map(c => c.textContent);
            return [...document.querySelectorAll('#matrix tbody tr')].flatMap(tr =>
              [...tr.querySelectorAll('td.cell')].map((td, j) =>
                [tr.querySelector('th code').textContent, envs[j], td.dataset.status,
                 td.querySelector('.label').textContent]));""")
        found = {(v, e): label for v, e, status, label in cells if status in FINAL}
        return found if cells and len(found) == len(cells) else None

    return wait_for(driver, lambda d: final(), "every cell of the matrix to finish", 240)


def paste_into_editor(driver: Any, text: str) -> None:
    """Paste text into the CodeMirror editor as a person would (clipboard, Ctrl+V)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    clipboard_write(driver, text)
    one(driver, "#editor .cm-content").click()
    ActionChains(driver).key_down(Keys.CONTROL).send_keys("v").key_up(Keys.CONTROL).perform()


def pick_environments(driver: Any, chosen: set[str]) -> None:
    """Tick exactly these environments on the case page."""
    for box in by_css(driver, "#environments input"):
        if box.is_selected() != (box.get_attribute("value") in chosen):
            box.click()


def open_case_page(driver: Any, stack: Stack) -> float:
    """Load / and wait until its environments are listed; the load time in ms."""
    driver.get(stack.url + "/")
    one(driver, f"#environments input[value='{OLD_ENV}']")
    return load_ms(driver)


def test_founding_case_from_the_page(browser: Any, stack: Stack, artifacts: Path) -> None:
    loads = [open_case_page(browser, stack) for _ in range(5)]
    only_to(browser, stack.url)
    case_text = case_path("tvm-17357/case.json").read_text()
    paste_into_editor(browser, case_text)
    case = json.loads(case_text)
    wait_for(browser, lambda d: one(d, "#title").get_attribute("value") == case["title"],
             "the pasted case to fill the form")
    passes = [[i.get_attribute("value") for i in by_css(row, "input.pass")]
              for row in by_css(browser, "#variants .variant")]
    assert passes == [v["passes"] for v in case["variants"]]
    pick_environments(browser, {OLD_ENV, NEW_ENV})
    assert by_css(browser, "#pass-names option"), "no pass names offered"
    browser.save_screenshot(str(artifacts / "case-page.png"))

    one(browser, "#submit").click()
    wait_for(browser, lambda d: "/jobs/" in d.current_url, "the job's page")
    job_url = browser.current_url
    found = matrix(browser)
    assert found == {("fusetir-once", OLD_ENV): "error \u00b7 vm_init",
                     ("fusetir-once", NEW_ENV): "error \u00b7 vm_init",
                     ("fusetir-twice", OLD_ENV): "ok \u00b7 vm_init",
                     ("fusetir-twice", NEW_ENV): "ok \u00b7 vm_init"}
    one(browser, "#job-status.job-done")
    browser.save_screenshot(str(artifacts / "job-page.png"))

    # The failing cell's log names the function that is missing.
    one(browser, "#matrix td.st-error[data-run] .cell-open").click()
    one(browser, "#cell-panel .tab[data-tab=log]").click()
    assert MISSING in one(browser, "pre.log-stderr").text

    # The diff of the two variants at the first pass where they differ.
    one(browser, "#comparisons .show-diff").click()
    head = one(browser, "#diff-head").text
    assert "after pass 2: AllocateWorkspace / FuseTIR" in head, head
    sides = by_css(browser, "#diff .d2h-file-side-diff")
    assert len(sides) == 2 and MISSING in sides[1].text
    browser.save_screenshot(str(artifacts / "diff.png"))

    one(browser, "#copy-report").click()
    wait_for(browser, lambda d: one(d, "#copy-status").text == "copied", "the report copied")
    report = clipboard_read(browser)
    assert "| `fusetir-once` | `error` at `vm_init` | `error` at `vm_init` |" in report, report
    assert "```diff" in report and MISSING in report
    only_to(browser, stack.url)  # the diff library, loaded when first needed, included

    # The job's link shows the same job again.
    link = one(browser, "#job-link").get_attribute("href")
    assert link == job_url
    job_loads = []
    for _ in range(5):
        browser.get(link)
        assert matrix(browser) == found
        job_loads.append(load_ms(browser))
    only_to(browser, stack.url)
    assert script_errors(browser) == []
    # How long the pages take is bench/page_load.py's to measure; printed here to be seen.
    print(f"page loads (ms): / {[round(x) for x in loads]}, job {[round(x) for x in job_loads]}; "
          f"screenshots in {artifacts}")


def test_user_text_is_shown_as_text(browser: Any, stack: Stack) -> None:
    script = ("import sys\nprint('<img src=x onerror=alert(2)>', file=sys.stderr)\n"
              "raise RuntimeError('<script>alert(3)</script>')\n")
    # A whole script, through the page.
    open_case_page(browser, stack)
    one(browser, "input[name=mode][value=script]").click()
    assert not by_css(browser, "#variants-panel")[0].is_displayed()  # a script has no variants
    paste_into_editor(browser, script)
    one(browser, "#title").send_keys(EVIL)
    pick_environments(browser, {NEW_ENV})
    one(browser, "#submit").click()
    wait_for(browser, lambda d: "/jobs/" in d.current_url, "the job's page")
    job = stack.http.get(f"/api/v1/jobs/{browser.current_url.split('/')[-1]}").json()
    assert job["case"]["title"] == EVIL and job["case"]["script"] == script
    assert one(browser, "#job-title").text == EVIL
    assert browser.execute_script("return document.querySelector('#job-title').children.length") == 0
    assert EVIL in browser.title
    matrix(browser)
    one(browser, "#matrix td.cell .cell-open").click()
    assert "<script>alert(3)</script>" in one(browser, "#cell-body dl.summary").text
    one(browser, "#cell-panel .tab[data-tab=log]").click()
    assert "<img src=x onerror=alert(2)>" in one(browser, "pre.log-stderr").text
    assert by_css(browser, "#cell-body img") == []
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018  # no script of the case ran
    assert script_errors(browser) == []


def test_bad_input_names_the_field(browser: Any, stack: Stack) -> None:
    open_case_page(browser, stack)
    select = one(browser, "#example")
    from selenium.webdriver.support.ui import Select

    Select(select).select_by_value("cuda-matmul-relu")
    wait_for(browser, lambda d: one(d, "#target").get_attribute("value") == "cuda", "the example")
    Select(select).select_by_value("tvm-17357")
    wait_for(browser, lambda d: len(by_css(d, "#variants .variant")) == 2, "the founding case")
    second = by_css(browser, "#variants .variant")[0]
    typo = by_css(second, "input.pass")[1]
    typo.clear()
    typo.send_keys("LambdaLfit")
    one(browser, "#submit").click()
    message = one(browser, "#form-error").text
    assert "case.variants[0].passes[1]" in message and "LambdaLfit" in message, message
    assert "invalid" in typo.get_attribute("class")
    assert "/jobs/" not in browser.current_url


def test_since_when_posts_a_bisect_job(browser: Any, stack: Stack) -> None:
    case = json.loads(case_path("tvm-17357/case.json").read_text())
    job = stack.submit({"kind": "run", "case": case, "environments": [OLD_ENV, NEW_ENV]})
    browser.get(f"{stack.url}/jobs/{job['id']}")
    one(browser, "#since-when").click()
    # Accepted: the page moves on to the new job's page (a refusal stays here, in #bisect-error).
    wait_for(browser, lambda d: d.current_url.rstrip("/").split("/")[-1] != job["id"]
             or bool(by_css(d, "#bisect-error:not([hidden])")), "the bisect job's page")
    assert not by_css(browser, "#bisect-error:not([hidden])"), one(browser, "#bisect-error").text
    bisect_id = browser.current_url.rstrip("/").split("/")[-1]
    one(browser, "#bisect-panel")
    wait_for(browser, lambda d: len(by_css(d, "#timeline li.probe.v-bad")) == 2,
             "both releases probed bad")
    summary = one(browser, "#bisect-summary").text
    assert "no change" in summary
    # Only the served releases were probed: the answer names the others between them.
    cpu = [e.id for e in default_catalog().environments if e.device == "cpu"]
    left_out = cpu[cpu.index(OLD_ENV) + 1:cpu.index(NEW_ENV)]
    assert left_out[0] == "tvm-0.25.0.post1-cpu" and left_out[-1] == "tvm-0.27.0-cpu"
    assert f"Not probed (no worker serves them): {', '.join(left_out)}." in summary, summary
    # What the button asked for: the job's first variant, any failure, every served release.
    found = stack.wait(bisect_id)
    assert found["kind"] == "bisect" and found["status"] == "done", found
    assert found["bisect"]["variant"] == "fusetir-once" and found["bisect"]["oracle"] == "failure"
    assert found["bisect"]["environments"] == [OLD_ENV, NEW_ENV]
    assert found["bisect"]["verdict"] == "unchanged"
    assert [p["verdict"] for p in found["bisect"]["probes"]] == ["bad", "bad"]


def test_the_submitting_browser_cancels_its_job(browser: Any, stack: Stack) -> None:
    open_case_page(browser, stack)
    one(browser, "input[name=mode][value=script]").click()
    paste_into_editor(browser, "import time\ntime.sleep(15)\n")
    pick_environments(browser, {NEW_ENV})
    one(browser, "#submit").click()
    wait_for(browser, lambda d: "/jobs/" in d.current_url, "the job's page")
    job_id = browser.current_url.rstrip("/").split("/")[-1]
    key = f"tvmrepro.cancel-token.{job_id}"
    token = browser.execute_script("return localStorage.getItem(arguments[0])", key)
    assert token and len(token) >= 32  # kept from the answer to the page's POST
    # Another browser (one without the token) is offered no cancel button.
    browser.execute_script("localStorage.removeItem(arguments[0])", key)
    browser.refresh()
    wait_for(browser, lambda d: one(d, "#job-status").text != "loading\u2026", "the job")
    assert not by_css(browser, "#cancel-job")[0].is_displayed()
    browser.execute_script("localStorage.setItem(arguments[0], arguments[1])", key, token)
    browser.refresh()
    wait_for(browser, lambda d: one(d, "#cancel-job").is_displayed(), "the cancel button")
    one(browser, "#cancel-job").click()
    wait_for(browser, lambda d: one(d, "#cancel-status").text == "cancelled 1 run",
             "the cancel's answer")
    job = stack.http.get(f"/api/v1/jobs/{job_id}").json()
    assert job["status"] == "failed" and job["runs"][0]["result"]["error_type"] == "Cancelled"
    wait_for(browser, lambda d: not by_css(d, "#cancel-job")[0].is_displayed(), "the button gone")
    assert script_errors(browser) == []


def test_pages_answer_without_a_browser(stack: Stack) -> None:
    missing = stack.http.get("/jobs/no-such-job")
    assert missing.status_code == 404 and "No job" in missing.text
    page = stack.http.get("/")
    assert page.status_code == 200 and "script-src" not in page.headers["Content-Security-Policy"]
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    names = stack.http.get("/api/v1/passes").json()["environments"]
    assert "FuseTIR" in names[OLD_ENV] and "FuseTIR" in names[NEW_ENV]


@pytest.mark.parametrize("name", ["tvm-17357", "cuda-matmul-relu"])
def test_examples_are_the_test_cases(name: str) -> None:
    """The page's examples ship in the package: copies of the cases the tests run."""
    shipped = REPO / "service" / "static" / "examples" / f"{name}.json"
    assert json.loads(shipped.read_text()) == json.loads(
        (REPO / "tests" / "cases" / name / "case.json").read_text())


def test_a_bisection_shows_its_commit_window_under_the_timeline(browser: Any, stack: Stack) -> None:
    import time

    from tests.bisect_support import fixed_in_027

    job = stack.submit({"kind": "bisect", "case": fixed_in_027(0, f"window {time.time()}"),
                        "environments": [OLD_ENV, NEW_ENV]})
    change = stack.wait(job["id"])["bisect"]["transitions"][0]
    span = change["window"]  # the stack's history: the shipped index
    assert span["open_ended"]  # 0.27.0.post1's commit is newer than the history
    browser.get(f"{stack.url}/jobs/{job['id']}")
    wait_for(browser, lambda d: by_css(d, "div.windows section.window"), "the commit window")
    text = one(browser, "div.windows section.window").text
    assert f"{OLD_ENV} \u2192 {NEW_ENV}: {span['commits']} commits" in text
    assert f"Open-ended: {span['missing']}" in text
    link = one(browser, "div.windows section.window a")
    assert link.get_attribute("href") == span["compare_url"]
    shown = by_css(browser, "ol.suspects > li")
    assert len(shown) == len(change["suspects"])
    # Which history, how fresh; and what the job is over, why, and what it left out.
    assert f"History: {span['history']}, newest commit {span['history_newest'][:10]}" in text
    over = one(browser, "#job-over").text
    assert over.startswith(f"On {OLD_ENV}, {NEW_ENV} (named by the request); not probed: "
                           "tvm-0.25.0rc0-cpu, "), over


def test_the_case_page_ticks_the_default_set_and_says_so(browser: Any, stack: Stack) -> None:
    open_case_page(browser, stack)  # the stack serves OLD_ENV and NEW_ENV; only NEW_ENV is one
    ticked = {box.get_attribute("value") for box in by_css(browser, "#environments input")
              if box.is_selected()}
    assert ticked == {NEW_ENV}
    assert one(browser, "#environments-why").text == ("Ticked: the default: the newest release "
                                                      "of each minor version (those a worker "
                                                      "serves).")
