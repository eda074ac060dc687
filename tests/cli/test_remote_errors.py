"""The command line against a real service over HTTP when things go wrong.

The service is the real API (Flask app on a werkzeug server in a thread, its
own home); no TVM is needed: the jobs are refused or only queued.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.cli import main
from cli.client import RECONNECT_S
from cli.discovery import announced
from tests.conftest import NEW_ENV, OLD_ENV, REPO
from tests.service.stack import api_in_thread, free_port
from tvmrepro.settings import Settings

MAX_BYTES = 4096


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """The URL of a real API that takes requests up to MAX_BYTES and queues one run at most."""
    with api_in_thread(tmp_path / "service", TVMREPRO_MAX_REQUEST_BYTES=str(MAX_BYTES),
                       TVMREPRO_MAX_QUEUED_RUNS="1") as (url, _):
        yield url


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
    assert said(result) == (f"error: the request is larger than {MAX_BYTES} bytes, the "
                            "service's TVMREPRO_MAX_REQUEST_BYTES; a case this large runs "
                            "without the service: tvmrepro run --local")


def test_a_job_gets_the_title_given(server: str, tmp_path: Path) -> None:
    result = tvmrepro("run", script(tmp_path, "repro.py", "print(1)\n"), "--title",
                      "FuseTIR once: VM cannot find the kernel", "--env", NEW_ENV, "--queue",
                      "--no-wait", "--server", server)
    assert result.exit_code == 0, result.output
    listed = tvmrepro("jobs", "--server", server)
    assert "FuseTIR once: VM cannot find the kernel" in listed.stdout
    assert "repro.py" not in listed.stdout


def test_a_full_queue_is_a_failure_to_retry_later(server: str, tmp_path: Path) -> None:
    first = tvmrepro("run", script(tmp_path, "a.py", "print('a')\n"), "--env", NEW_ENV,
                     "--queue", "--no-wait", "--server", server)
    assert first.exit_code == 0, first.output
    job_id = first.stdout.strip()
    second = tvmrepro("run", script(tmp_path, "b.py", "print('b')\n"), "--env", NEW_ENV,
                      "--queue", "--no-wait", "--server", server)
    assert second.exit_code == 1, second.output
    assert said(second) == (f"error: HTTP 429: the queue of {NEW_ENV} holds 1 waiting runs "
                            "(cap 1 per environment); retry later")
    listed = tvmrepro("jobs", "--server", server)
    assert [line.split()[0] for line in listed.stdout.splitlines()] == [job_id]  # none stored


def test_the_server_comes_from_tvmrepro_server(server: str, tmp_path: Path) -> None:
    submitted = tvmrepro("run", script(tmp_path, "a.py", "print('a')\n"), "--env", NEW_ENV,
                         "--queue", "--no-wait", env={"TVMREPRO_SERVER": server})
    assert submitted.exit_code == 0, submitted.output
    assert said(submitted).startswith(f"job {submitted.stdout.strip()} at {server}")
    listed = tvmrepro("jobs", env={"TVMREPRO_SERVER": server})
    assert [line.split()[0] for line in listed.stdout.splitlines()] == [submitted.stdout.strip()]


def test_an_unreachable_server_is_a_failure_naming_it() -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    result = tvmrepro("jobs", env={"TVMREPRO_SERVER": nobody})
    assert result.exit_code == 1, result.output
    # A few quick attempts, not the minute of silent retries (RECONNECT_S) that is for a service
    # that answered before and is restarting.
    assert time.monotonic() - started < RECONNECT_S / 2
    assert said(result).startswith(f"error: no answer from the service at {nobody}, "
                                   "from TVMREPRO_SERVER (")
    assert said(result).endswith("); is it running? (tvmrepro up)")


def test_without_a_server_the_port_of_up_and_serve_is_asked(server: str, tmp_path: Path) -> None:
    # No --server, no TVMREPRO_SERVER, no `tvmrepro up` on the home: TVMREPRO_PORT, which `make
    # up` and `serve` bind, says where.
    port = server.rsplit(":", 1)[1]
    environ = {"TVMREPRO_HOME": str(tmp_path / "client"), "TVMREPRO_SERVER": "",
               "TVMREPRO_PORT": port}
    listed = tvmrepro("jobs", env=environ)
    assert listed.exit_code == 0, listed.output
    assert said(listed).startswith(f"service http://127.0.0.1:{port} (from TVMREPRO_PORT;")

    nobody = str(free_port())
    started = time.monotonic()
    failed = tvmrepro("jobs", env={**environ, "TVMREPRO_PORT": nobody})
    assert failed.exit_code == 1, failed.output
    assert time.monotonic() - started < RECONNECT_S / 2
    assert (f"error: no answer from the service at http://127.0.0.1:{nobody}, from "
            "TVMREPRO_PORT (") in said(failed)


def test_without_a_server_a_live_up_on_the_home_is_asked(server: str, tmp_path: Path) -> None:
    home = tmp_path / "client"
    home.mkdir()
    environ = {"TVMREPRO_HOME": str(home), "TVMREPRO_SERVER": "",
               "TVMREPRO_PORT": str(free_port())}  # up.json comes first
    submitted = tvmrepro("run", script(tmp_path, "a.py", "print('a')\n"), "--env", NEW_ENV,
                         "--queue", "--no-wait", env=environ)
    assert submitted.exit_code == 1  # nobody on that port
    # This process announces the service as `tvmrepro up` does while it serves.
    with announced(Settings.from_env({"TVMREPRO_HOME": str(home)}), server, []):
        submitted = tvmrepro("run", script(tmp_path, "a.py", "print('a')\n"), "--env", NEW_ENV,
                             "--queue", "--no-wait", env=environ)
        assert submitted.exit_code == 0, submitted.output
        assert said(submitted).startswith(
            f"service {server} (announced by the `tvmrepro up` on this TVMREPRO_HOME "
            f"({home / 'up.json'}); --server or TVMREPRO_SERVER to choose another) "
            f"job {submitted.stdout.strip()} at {server}")


def test_cancel_uses_the_token_kept_at_submission(server: str, tmp_path: Path) -> None:
    mine = {"TVMREPRO_HOME": str(tmp_path / "mine")}
    submitted = tvmrepro("run", script(tmp_path, "a.py", "print('a')\n"), "--env", NEW_ENV,
                         "--queue", "--no-wait", "--server", server, env=mine)
    assert submitted.exit_code == 0, submitted.output
    job_id = submitted.stdout.strip()
    kept = tmp_path / "mine" / "cancel-tokens" / job_id
    assert (kept.stat().st_mode & 0o777) == 0o600 and len(kept.read_text()) >= 32
    # Another machine (another home) has no token: told what is missing; a wrong one is 403.
    other = tvmrepro("cancel", job_id, "--server", server,
                     env={"TVMREPRO_HOME": str(tmp_path / "other")})
    assert other.exit_code == 2 and said(other).startswith(
        f"error: --token: no cancel token of job {job_id} is kept here"), said(other)
    wrong = tvmrepro("cancel", job_id, "--token", "guessed", "--server", server, env=mine)
    assert wrong.exit_code == 1 and "HTTP 403" in said(wrong) and "X-Cancel-Token" in said(wrong)
    done = tvmrepro("cancel", job_id, "--server", server, env=mine)
    assert done.exit_code == 0 and done.stdout == f"job {job_id}: 1 run(s) cancelled\n", said(done)
    again = tvmrepro("cancel", job_id, "--token", kept.read_text(), "--server", server,
                     env={"TVMREPRO_HOME": str(tmp_path / "other")})
    assert again.exit_code == 0 and "0 run(s) cancelled" in again.stdout


def test_bisect_queues_probes_of_unserved_releases_only_when_asked(
        server: str, tmp_path: Path) -> None:
    case = script(tmp_path, "repro.py", "print(1)\n")
    refused = tvmrepro("bisect", case, "--env", OLD_ENV, "--env", NEW_ENV, "--server", server)
    assert refused.exit_code != 0, refused.output
    assert "no live worker serves" in said(refused) and "--queue" in said(refused)
    # With --queue the job is stored and waits (the command follows it: stopped here).
    command = [sys.executable, "-m", "cli", "bisect", case, "--env", OLD_ENV, "--env", NEW_ENV,
               "--queue", "--server", server]
    waiting = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (listed := tvmrepro("jobs", "--server", server).stdout.split()):
            assert waiting.poll() is None and time.monotonic() < deadline, \
                waiting.stderr and waiting.stderr.read()
            time.sleep(0.2)
    finally:
        waiting.kill()
        waiting.wait()
    assert "bisect" in listed
