"""A real browser for the page tests: Debian's Chromium, headless, driven by Selenium.

Nothing is downloaded at test time: the browser and its driver are the system's
(/usr/bin/chromium and /usr/bin/chromedriver, installed by scripts/bootstrap),
and Selenium is given the driver's path, so Selenium Manager never runs.
Without them the tests are skipped, except under CI, where they fail (tests/fixtures/ci.py).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fixtures.ci import cannot_run

CHROMIUM = os.environ.get("TVMREPRO_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("TVMREPRO_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
WAIT_S = 30.0
WINDOW = (1400, 1000)


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    for tool in (CHROMIUM, CHROMEDRIVER):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/bootstrap installs chromium and chromium-driver)"
    return None


def start_browser() -> Any:
    """A headless Chromium session (skipped where there is none; under CI: failed)."""
    missing = _missing()
    if missing:
        cannot_run(missing)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={WINDOW[0]},{WINDOW[1]}", "--no-first-run",
                "--disable-background-networking", "--disable-component-update"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # Chromium refuses its sandbox as root
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def wait_for(driver: Any, condition: Callable[[Any], Any], what: str,
             timeout: float = WAIT_S) -> Any:
    """Wait until condition(driver) is truthy; its value (AssertionError naming `what`)."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.1).until(condition)
    except TimeoutException:
        raise AssertionError(f"timed out waiting for {what} on {driver.current_url}") from None


def grant_clipboard(driver: Any, origin: str) -> None:
    """Let pages of `origin` read and write the clipboard (a person would be asked)."""
    driver.execute_cdp_cmd("Browser.grantPermissions", {
        "origin": origin, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})


def clipboard_write(driver: Any, text: str) -> None:
    """Put text on the browser's clipboard."""
    driver.execute_async_script(
        "navigator.clipboard.writeText(arguments[0]).then(arguments[1], "
        "e => arguments[1](String(e)))", text)


def clipboard_read(driver: Any) -> str:
    """The text on the browser's clipboard."""
    text: str = driver.execute_async_script(
        "navigator.clipboard.readText().then(arguments[0], e => arguments[0]('ERROR ' + e))")
    return text


def load_ms(driver: Any) -> float:
    """How long the current page took to load (navigation start to the end of its load event)."""
    wait_for(driver, lambda d: d.execute_script(
        "const n = performance.getEntriesByType('navigation')[0]; return n && n.loadEventEnd > 0"),
        "the load event")
    found: float = driver.execute_script(
        "return performance.getEntriesByType('navigation')[0].loadEventEnd")
    return found


def requested_urls(driver: Any) -> list[str]:
    """Every URL the current page has requested so far (navigation and resources)."""
    urls: list[str] = driver.execute_script(
        "return performance.getEntriesByType('navigation').concat("
        "performance.getEntriesByType('resource')).map(e => e.name)")
    return urls


def script_errors(driver: Any) -> list[str]:
    """Uncaught exceptions and CSP violations on the console since the last call.

    An HTTP error the page handles (a 400 it shows, a 404 it expects) is logged
    too, as a failed load; that is not a fault of the page.
    """
    return [e["message"] for e in driver.get_log("browser")
            if e["level"] == "SEVERE" and ("Uncaught" in e["message"]
                                           or "Content Security Policy" in e["message"])]


def artifacts_dir(tmp_root: Path) -> Path:
    """Where screenshots go: $TVMREPRO_ARTIFACTS/web, else `tmp_root`/web."""
    root = Path(os.environ.get("TVMREPRO_ARTIFACTS") or tmp_root)
    folder = root / "web"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
