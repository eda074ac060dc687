"""The command line against a real service over HTTP when things go wrong.

The service is the real API (Flask app on a werkzeug server in a thread, its
own home); no TVM is needed: the jobs are refused or only queued.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from werkzeug.serving import make_server

from cli.cli import main
from cli.remote import ApiClient
from service.app import create_app
from service.jobs import JobService
from tests.conftest import NEW_ENV
from tests.service.stack import free_port
from tvmrepro.settings import Settings

MAX_BYTES = 4096


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """The URL of a real API that takes requests up to MAX_BYTES and queues one run at most."""
    settings = Settings.from_env({"TVMREPRO_HOME": str(tmp_path / "service"),
                                  "TVMREPRO_MAX_REQUEST_BYTES": str(MAX_BYTES),
                                  "TVMREPRO_MAX_QUEUED_RUNS": "1"})
    app = create_app(settings)
    http = make_server("127.0.0.1", free_port(), app, threaded=True)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{http.server_port}"
    http.shutdown()
    thread.join()
    service: JobService = app.extensions["tvmrepro"]
    service.store.dispose()


def tvmrepro(*args: str, env: dict[str, str] | None = None) -> Result:
    """The command line, in this process, with stderr apart."""
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def said(result: Result) -> str:
    """stderr with rich's line wrapping undone."""
    return " ".join(result.stderr.split())


def script(tmp_path: Path, name: str, body: str) -> str:
    """A repro script file."""
    path = tmp_path / name
    path.write_text(body)
    return str(path)


def test_a_request_over_the_service_limit_is_bad_input(server: str, tmp_path: Path) -> None:
    big = script(tmp_path, "big.py", "x = 1\n" + "# padding\n" * MAX_BYTES)
    result = tvmrepro("run", big, "--env", NEW_ENV, "--queue", "--no-wait", "--server", server)
    assert result.exit_code == 2, result.output
    assert said(result) == f"error: the request is larger than {MAX_BYTES} bytes"


def test_a_full_queue_is_a_failure_to_retry_later(server: str, tmp_path: Path) -> None:
    first = tvmrepro("run", script(tmp_path, "a.py", "print('a')\n"), "--env", NEW_ENV,
                     "--queue", "--no-wait", "--server", server)
    assert first.exit_code == 0, first.output
    job_id = first.stdout.strip()
    second = tvmrepro("run", script(tmp_path, "b.py", "print('b')\n"), "--env", NEW_ENV,
                      "--queue", "--no-wait", "--server", server)
    assert second.exit_code == 1, second.output
    assert said(second) == ("error: HTTP 429: the queue holds 1 waiting runs (cap 1); "
                            "retry later")
    listed = tvmrepro("jobs", "--server", server)
    assert [line.split()[0] for line in listed.stdout.splitlines()] == [job_id]  # none stored


def test_the_server_comes_from_tvmrepro_server(server: str, tmp_path: Path) -> None:
    submitted = tvmrepro("run", script(tmp_path, "a.py", "print('a')\n"), "--env", NEW_ENV,
                         "--queue", "--no-wait", env={"TVMREPRO_SERVER": server})
    assert submitted.exit_code == 0, submitted.output
    assert said(submitted).startswith(f"job {submitted.stdout.strip()} at {server}")
    listed = tvmrepro("jobs", env={"TVMREPRO_SERVER": server})
    assert [line.split()[0] for line in listed.stdout.splitlines()] == [submitted.stdout.strip()]


def test_an_unreachable_server_is_a_failure_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # The client keeps asking for a minute while an API restarts; here it asks once.
    monkeypatch.setattr(ApiClient.__init__, "__defaults__", (0.0,))
    nobody = f"http://127.0.0.1:{free_port()}"
    result = tvmrepro("jobs", env={"TVMREPRO_SERVER": nobody})
    assert result.exit_code == 1, result.output
    assert said(result).startswith(f"error: no answer from the service at {nobody} (")
    assert said(result).endswith("); is it running? (tvmrepro up)")
