"""Getting back to a job: a command that stops waiting names the job and the command that waits
for it again, `tvmrepro wait JOB`, which prints what `run` prints at the end.

Real API and worker processes on the embedded broker and store; the worker runs the tests'
FakeRuntime (no TVM needed: what is tested is the client and the service, not TVM).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import NEW_ENV, REPO
from tests.fakes.runtime import DIRECTIVE
from tests.service.stack import Backend, Stack

pytestmark = [pytest.mark.timeout(180)]


@pytest.fixture
def fake_stack(tmp_path: Path) -> Iterator[Stack]:
    """The API and a worker for NEW_ENV whose runs the FakeRuntime plays."""
    home = tmp_path / "home"
    home.mkdir()
    running = Stack(Backend("embedded"), home, TVMREPRO_RUNTIME="fake")
    try:
        running.start_api()
        running.start_worker(NEW_ENV)
        yield running
    finally:
        running.close()


def tvmrepro(stack: Stack, *args: str) -> subprocess.Popen[str]:
    """The command line as its own process, talking to the stack's service."""
    # Ctrl-C reaches it as it would a user's command: an xdist worker ignores SIGINT, and a
    # child would inherit that (Python leaves an ignored SIGINT ignored).
    return subprocess.Popen([sys.executable, "-m", "cli", *args], env=stack.environ, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def read_until(proc: subprocess.Popen[str], text: str, seen: list[str]) -> str:
    """stderr lines up to (and with) the first that contains `text`; all of them in `seen`."""
    assert proc.stderr is not None
    for line in proc.stderr:
        seen.append(line)
        if text in line:
            return line
    raise AssertionError(f"{text!r} never said; stderr:\n{''.join(seen)}")


def test_a_command_that_stops_waiting_says_how_to_get_back(fake_stack: Stack,
                                                           tmp_path: Path) -> None:
    case = tmp_path / "slow.py"
    case.write_text(f"{DIRECTIVE} {json.dumps({'sleep': 6, 'stdout': 'slept'})}\nprint('hi')\n")
    run = tvmrepro(fake_stack, "run", str(case), "--env", NEW_ENV, "--server", fake_stack.url)
    seen: list[str] = []
    job_id = read_until(run, f" at {fake_stack.url}", seen).split()[1]

    # The API goes away while the command waits: it says that it keeps asking, and for how long.
    assert fake_stack.api is not None
    fake_stack.kill(fake_stack.api)
    read_until(run, f"no answer from the service at {fake_stack.url}", seen)
    run.send_signal(signal.SIGINT)  # the user gives up: Ctrl-C
    _, rest = run.communicate(timeout=30)
    stderr = " ".join(("".join(seen) + rest).split())
    assert run.returncode == 1, stderr
    assert (f"stopped waiting for job {job_id}; to wait for it again: tvmrepro wait {job_id} "
            f"--server {fake_stack.url} (or to cancel it: tvmrepro cancel {job_id} --server "
            f"{fake_stack.url})") in stderr
    # What that cancel needs: the job's cancel token, kept when `run` submitted it.
    assert len((fake_stack.home / "cancel-tokens" / job_id).read_text()) >= 32

    # The API is back: `wait` follows the job to its end and prints what `run` would.
    fake_stack.start_api()
    waited = tvmrepro(fake_stack, "wait", job_id, "--json", "--server", fake_stack.url)
    out, err = waited.communicate(timeout=60)
    assert waited.returncode == 0, err
    answer = json.loads(out)
    assert answer["job"]["id"] == job_id and answer["job"]["status"] == "done"
    assert [(r["environment"], r["status"]) for r in answer["runs"]] == [(NEW_ENV, "ok")]
    assert answer["runs"] == [fake_stack.http.get(f"/api/v1/jobs/{job_id}/runs/{r['id']}").json()
                              for r in answer["job"]["runs"]]

    table = tvmrepro(fake_stack, "wait", job_id, "--server", fake_stack.url)
    out, err = table.communicate(timeout=60)
    assert table.returncode == 0, err
    assert NEW_ENV in out and "ok" in out.split(NEW_ENV)[-1], out

    unknown = tvmrepro(fake_stack, "wait", "no-such-job", "--server", fake_stack.url)
    _, err = unknown.communicate(timeout=60)
    assert unknown.returncode == 1 and "no-such-job" in err, err


def test_a_long_poll_answers_when_the_job_changes_and_waits_while_it_does_not(
        tmp_path: Path) -> None:
    from tests.service.test_recovery import fake_sleep

    home = tmp_path / "home"
    home.mkdir()
    # One API process of two threads: one of them may wait.
    stack = Stack(Backend("embedded"), home, TVMREPRO_RUNTIME="fake", TVMREPRO_API_WORKERS="1",
                  TVMREPRO_API_THREADS="2")
    try:
        stack.start_api()
        stack.start_worker(NEW_ENV)
        job_id = stack.submit({"kind": "run", "case": fake_sleep(4, "long-poll"),
                               "environments": [NEW_ENV], "bypass_cache": True})["id"]
        path = f"/api/v1/jobs/{job_id}"
        stack.wait_running(job_id)
        running = stack.http.get(path)
        etag = running.headers["ETag"]
        assert running.json()["status"] == "running" and stack.http.get(path).headers["ETag"] == etag

        def long_poll(seen: str, wait_s: int, path: str = path) -> tuple[httpx.Response, float]:
            started = time.monotonic()
            answer = stack.http.get(path, params={"wait": wait_s},
                                    headers={"If-None-Match": seen})
            return answer, time.monotonic() - started

        # Nothing changes for a second: a 304 after the wait, not before.
        same, waited = long_poll(etag, 1)
        assert same.status_code == 304 and same.headers["ETag"] == etag and waited >= 1.0
        # While one request waits (the one slot), another is answered at once, unchanged.
        with ThreadPoolExecutor(max_workers=1) as pool:
            holding = pool.submit(long_poll, etag, 20)
            time.sleep(0.5)
            other, waited = long_poll(etag, 20)
            assert other.status_code == 304 and waited < 0.5, waited
            # The one that waits answers when the run ends, with the new view and its ETag.
            ended, waited = holding.result(timeout=30)
        assert ended.status_code == 200 and ended.json()["runs"][0]["state"] == "done", ended.text
        assert ended.headers["ETag"] != etag and waited < 15, waited
        # The job settles just after its last run (its comparisons): one more change, or none.
        done = ended
        for _ in range(3):
            if done.json()["status"] == "done":
                break
            done, _ = long_poll(done.headers["ETag"], 20)
            assert done.status_code == 200, "a change was not answered"
        assert done.json()["status"] == "done", done.text
        # A finished job does not wait: what was seen is what it is.
        last, waited = long_poll(done.headers["ETag"], 20)
        assert last.status_code == 304 and waited < 1.0, waited
        # A bad wait names the parameter.
        bad = stack.http.get(path, params={"wait": "forever"})
        assert bad.status_code == 400 and "wait" in bad.json()["error"]["message"], bad.text
        # A clean stop of the API does not wait for the long-polls' ends: they answer at once.
        slow = stack.submit({"kind": "run", "case": fake_sleep(60, "stop"),
                             "environments": [NEW_ENV], "bypass_cache": True})["id"]
        stack.wait_running(slow)
        slow_path = f"/api/v1/jobs/{slow}"
        seen = stack.http.get(slow_path).headers["ETag"]
        with ThreadPoolExecutor(max_workers=1) as pool:
            waiting = pool.submit(long_poll, seen, 30, slow_path)
            time.sleep(0.5)
            started = time.monotonic()
            stack.stop(stack.api)
            stopped = time.monotonic() - started
            answer, _ = waiting.result(timeout=30)
        assert answer.status_code == 304 and stopped < 10, stopped
    finally:
        stack.close()


def test_a_paced_long_poll_holds_a_change_until_its_time_but_never_the_end(
        fake_stack: Stack, founding_case: dict[str, Any]) -> None:
    # Two runs: fusetir-once ends after 1 s, fusetir-twice after 5 s.
    directives = "".join(f"{DIRECTIVE} {json.dumps(d)}\n" for d in (
        {"variant": "fusetir-once", "sleep": 1}, {"variant": "fusetir-twice", "sleep": 5}))
    case = {**founding_case, "source": directives + founding_case["source"]}
    job_id = fake_stack.submit({"kind": "run", "case": case, "environments": [NEW_ENV],
                                "bypass_cache": True})["id"]
    path = f"/api/v1/jobs/{job_id}"
    fake_stack.wait_running(job_id)
    seen = fake_stack.http.get(path)

    def paced(etag: str, every_s: float) -> tuple[httpx.Response, float]:
        started = time.monotonic()
        answer = fake_stack.http.get(path, params={"wait": 20, "every": every_s},
                                     headers={"If-None-Match": etag})
        return answer, time.monotonic() - started

    # The job changes within a second (a run ends, the other starts): answered at 3 s, not
    # before, with what it is then, one run still running.
    held, waited = paced(seen.headers["ETag"], 3)
    assert held.status_code == 200 and 3.0 <= waited < 4.5, waited
    assert {r["state"] for r in held.json()["runs"]} == {"done", "running"}, held.text
    # Its last run's end comes at once, however long the pace asked.
    ended, waited = paced(held.headers["ETag"], 20)
    assert ended.status_code == 200 and waited < 10, waited
    assert {r["state"] for r in ended.json()["runs"]} == {"done"}, ended.text
    # A bad pace names the parameter.
    for bad in ("-1", "soon", "nan", "31"):
        answer = fake_stack.http.get(path, params={"wait": 1, "every": bad})
        assert answer.status_code == 400 and "every" in answer.json()["error"]["message"], bad
