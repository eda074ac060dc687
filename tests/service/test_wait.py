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
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.waiting import MAX_WAIT_S
from tests.conftest import NEW_ENV, REPO
from tests.fakes.runtime import DIRECTIVE, fake_sleep
from tests.service.stack import STOP_TIMEOUT_S, Backend, Stack

pytestmark = [pytest.mark.timeout(180)]
PACE_S = 5.0  # the paced long-poll's pace: past the first run's end (3 s into the job)


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
    # The table's row under its environment's column says ok (the caption names the releases).
    assert NEW_ENV in out and "ok" in out.split(NEW_ENV)[1].split("on ")[0], out

    unknown = tvmrepro(fake_stack, "wait", "no-such-job", "--server", fake_stack.url)
    _, err = unknown.communicate(timeout=60)
    assert unknown.returncode == 1 and "no-such-job" in err, err


Timed = tuple[httpx.Response, float]


def long_poll(stack: Stack, path: str, seen: str, wait_s: int = MAX_WAIT_S,
              every_s: float | None = None) -> Timed:
    """GET the job at `path` waiting up to `wait_s` for a change from `seen`; how long it took."""
    started = time.monotonic()
    params: dict[str, float] = {"wait": wait_s, **({"every": every_s} if every_s else {})}
    answer = stack.http.get(path, params=params, headers={"If-None-Match": seen})
    return answer, time.monotonic() - started


def two_long_polls(stack: Stack, path: str, seen: str) -> tuple[Timed, Future[Timed]]:
    """Two long-polls at once on an API with one waiting slot: the one answered at once, and
    the one still waiting in the API (whichever came first takes the slot)."""
    pool = ThreadPoolExecutor(max_workers=2)
    polls = [pool.submit(long_poll, stack, path, seen) for _ in range(2)]
    done, waiting = wait(polls, return_when=FIRST_COMPLETED)
    pool.shutdown(wait=False)
    assert len(done) == 1 and len(waiting) == 1, "both long-polls were answered at once"
    return done.pop().result(), waiting.pop()


def test_a_long_poll_answers_when_the_job_changes_and_waits_while_it_does_not(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # One API process of two threads: one of them may wait.
    stack = Stack(Backend("embedded"), home, TVMREPRO_RUNTIME="fake", TVMREPRO_API_WORKERS="1",
                  TVMREPRO_API_THREADS="2")
    try:
        stack.start_api()
        stack.start_worker(NEW_ENV)
        # Long enough that no change comes before the two long-polls below are in the API,
        # however loaded the machine: their answers tell the order, not a clock.
        job_id = stack.submit({"kind": "run", "case": fake_sleep(10, "long-poll"),
                               "environments": [NEW_ENV], "bypass_cache": True})["id"]
        path = f"/api/v1/jobs/{job_id}"
        stack.wait_running(job_id)
        running = stack.http.get(path)
        etag = running.headers["ETag"]
        assert running.json()["status"] == "running" and stack.http.get(path).headers["ETag"] == etag
        # Nothing changes for a second: a 304 after the wait, not before.
        same, waited = long_poll(stack, path, etag, wait_s=1)
        assert same.status_code == 304 and same.headers["ETag"] == etag and waited >= 1.0
        # While one request waits (the one slot), the other is answered at once, unchanged: a
        # 304 before the change (one that waited would have seen the change: a 200).
        (other, _), holding = two_long_polls(stack, path, etag)
        assert other.status_code == 304 and other.headers["ETag"] == etag, other.text
        # The one that waits answers when the run ends, with the new view and its ETag, before
        # its wait is over (one that missed the change answers at its end: MAX_WAIT_S or later).
        ended, waited = holding.result(timeout=MAX_WAIT_S + 30)
        assert ended.status_code == 200 and ended.json()["runs"][0]["state"] == "done", ended.text
        assert ended.headers["ETag"] != etag and waited < MAX_WAIT_S, waited
        done = settled(stack, path, ended)
        # A finished job does not wait (one that did would answer after MAX_WAIT_S): what was
        # seen is what it is.
        last, waited = long_poll(stack, path, done.headers["ETag"])
        assert last.status_code == 304 and waited < MAX_WAIT_S, waited
        # A bad wait names the parameter.
        bad = stack.http.get(path, params={"wait": "forever"})
        assert bad.status_code == 400 and "wait" in bad.json()["error"]["message"], bad.text
        stop_answers_the_long_polls(stack)
    finally:
        stack.close()


def settled(stack: Stack, path: str, answer: httpx.Response) -> httpx.Response:
    """The job settles just after its last run (its comparisons): one more change, or none."""
    for _ in range(3):
        if answer.json()["status"] == "done":
            break
        answer, _ = long_poll(stack, path, answer.headers["ETag"])
        assert answer.status_code == 200, "a change was not answered"
    assert answer.json()["status"] == "done", answer.text
    return answer


def stop_answers_the_long_polls(stack: Stack) -> None:
    """A clean stop of the API does not wait for the long-polls' ends: they answer at once."""
    slow = stack.submit({"kind": "run", "case": fake_sleep(60, "stop"),
                         "environments": [NEW_ENV], "bypass_cache": True})["id"]
    stack.wait_running(slow)
    slow_path = f"/api/v1/jobs/{slow}"
    (_, _), waiting = two_long_polls(stack, slow_path, stack.http.get(slow_path).headers["ETag"])
    started = time.monotonic()
    stack.stop(stack.api)
    stopped = time.monotonic() - started
    answer, _ = waiting.result(timeout=30)
    # Answered, and the API ended on its SIGTERM: a stop that waited for the long-poll's end
    # (MAX_WAIT_S) would have been killed after STOP_TIMEOUT_S, the long-poll with it.
    assert answer.status_code == 304 and stopped < STOP_TIMEOUT_S, stopped


def both_running(stack: Stack, path: str, timeout_s: float = 60.0) -> httpx.Response:
    """The job's view once both of its runs run: the view that stays until the first ends (a
    view seen earlier changes when the second starts, and a long-poll from it answers at once)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        seen = stack.http.get(path)
        if [r["state"] for r in seen.json()["runs"]] == ["running", "running"]:
            return seen
        time.sleep(0.05)
    raise AssertionError(f"the job's two runs never ran at once\n{stack.logs()}")


def test_a_paced_long_poll_holds_a_change_until_its_time_but_never_the_end(
        fake_stack: Stack, founding_case: dict[str, Any]) -> None:
    # Two runs at once: fusetir-once ends after 3 s, fusetir-twice after 15 s (room for a
    # loaded machine between the two changes).
    directives = "".join(f"{DIRECTIVE} {json.dumps(d)}\n" for d in (
        {"variant": "fusetir-once", "sleep": 3}, {"variant": "fusetir-twice", "sleep": 15}))
    case = {**founding_case, "source": directives + founding_case["source"]}
    job_id = fake_stack.submit({"kind": "run", "case": case, "environments": [NEW_ENV],
                                "bypass_cache": True})["id"]
    path = f"/api/v1/jobs/{job_id}"
    seen = both_running(fake_stack, path)
    # The job changes within the pace (a run ends): answered no sooner than the pace, with what
    # it is then, one run still running; a pace that held it to the wait's end would take 30 s.
    held, waited = long_poll(fake_stack, path, seen.headers["ETag"], every_s=PACE_S)
    assert held.status_code == 200 and PACE_S <= waited < MAX_WAIT_S, waited
    assert {r["state"] for r in held.json()["runs"]} == {"done", "running"}, held.text
    # Its last run's end comes at once, however long the pace asked: before the pace's end.
    ended, waited = long_poll(fake_stack, path, held.headers["ETag"], every_s=MAX_WAIT_S)
    assert ended.status_code == 200 and waited < MAX_WAIT_S, waited
    assert {r["state"] for r in ended.json()["runs"]} == {"done"}, ended.text
    # A bad pace names the parameter.
    for bad in ("-1", "soon", "nan", "31"):
        answer = fake_stack.http.get(path, params={"wait": 1, "every": bad})
        assert answer.status_code == 400 and "every" in answer.json()["error"]["message"], bad
