"""Many jobs at once: none lost, none doubled; past the queue cap a 429 that stores nothing.

Real API and worker processes, broker and store; the runs are the FakeRuntime's
(TVMREPRO_RUNTIME=fake): what is under load here is the service, not TVM.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.conftest import NEW_ENV, OLD_ENV
from tests.service.stack import Backend, Stack, dump, founding_body
from tvmrepro import schema
from worker.runtimes.fake import DIRECTIVE

pytestmark = [pytest.mark.timeout(400)]
JOBS = 50
RUN_S = 0.2  # how long each fake run takes


@pytest.fixture
def fake_stack(backend: Backend, tmp_path: Path) -> Iterator[Stack]:
    """A stack whose workers run cases with the FakeRuntime (no TVM needed)."""
    home = tmp_path / "home"
    home.mkdir()
    running = Stack(backend, home, TVMREPRO_RUNTIME="fake")
    yield running
    running.close()


def one_run_case(case: dict[str, Any], variant: str) -> dict[str, Any]:
    """The founding case with only one of its variants, scripted to end as it does on TVM."""
    once = {"variant": "fusetir-once", "status": "error", "stage": "vm_init", "sleep": RUN_S}
    source = f"{DIRECTIVE} {json.dumps(once)}\n{DIRECTIVE} {json.dumps({'sleep': RUN_S})}\n"
    return {**case, "source": source + case["source"],
            "variants": [v for v in case["variants"] if v["name"] == variant]}


def post_all(stack: Stack, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    """POST every body at the same time, each from its own thread."""
    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(lambda body: stack.http.post("/api/v1/jobs", json=body), bodies))


def counts(stack: Stack) -> dict[str, int]:
    """Rows in the jobs, runs and results tables."""
    with stack.store.engine.connect() as conn:
        return {table.name: conn.execute(sa.select(sa.func.count()).select_from(table))
                .scalar_one() for table in (schema.jobs, schema.runs, schema.results)}


def test_fifty_jobs_at_once(fake_stack: Stack, founding_case: dict[str, Any]) -> None:
    stack = fake_stack
    stack.start_api()
    for env_id in (OLD_ENV, NEW_ENV):
        stack.start_worker(env_id)
    bodies = [founding_body(one_run_case(founding_case, ("fusetir-once", "fusetir-twice")[n % 2]),
                            [(OLD_ENV, NEW_ENV)[n // 2 % 2]], bypass_cache=True)
              for n in range(JOBS)]
    responses = post_all(stack, bodies)
    assert [r.status_code for r in responses] == [202] * JOBS, [r.text for r in responses]
    ids = [r.json()["id"] for r in responses]
    assert len(set(ids)) == JOBS
    jobs = [stack.wait(job_id, timeout=300) for job_id in ids]
    for n, job in enumerate(jobs):
        (run,) = job["runs"]
        assert job["status"] == "done" and not run["cached"], dump(job)
        assert run["variant"] == bodies[n]["case"]["variants"][0]["name"]
        assert run["result"]["status"] == ("error" if run["variant"] == "fusetir-once" else "ok")
        assert run["result"]["isolation"]["runtime"] == "fake"
    assert counts(stack) == {"jobs": JOBS, "runs": JOBS, "results": JOBS}
    # Nothing was lost, so the recovery sweep published nothing again.
    assert "lost runs again" not in stack.logs(tail=1_000_000)


def test_past_the_queue_cap_429_and_nothing_half_stored(fake_stack: Stack,
                                                        founding_case: dict[str, Any]) -> None:
    stack = fake_stack
    stack.configure(TVMREPRO_MAX_QUEUED_RUNS="10")
    stack.start_api()  # no worker yet: nothing leaves the queue while we submit
    body = founding_body(one_run_case(founding_case, "fusetir-once"), [OLD_ENV, NEW_ENV],
                         bypass_cache=True)  # two runs a job
    responses = post_all(stack, [body] * 20)
    codes = sorted(r.status_code for r in responses)
    assert codes == [202] * 5 + [429] * 15, codes  # 5 jobs x 2 runs fill the cap of 10
    refused = next(r for r in responses if r.status_code == 429)
    assert refused.json()["error"]["status"] == 429 and "cap 10" in refused.json()["error"]["message"]
    assert refused.headers["Retry-After"]
    assert counts(stack) == {"jobs": 5, "runs": 10, "results": 0}

    too_big = founding_body(founding_case, [OLD_ENV, NEW_ENV] * 3, bypass_cache=True)
    too_big["case"] = {**founding_case, "variants": [
        {**founding_case["variants"][0], "name": f"v{n}"} for n in range(6)]}
    answer = stack.http.post("/api/v1/jobs", json=too_big)  # 12 runs: more than the cap
    assert answer.status_code == 400 and answer.json()["error"]["field"] == "environments"

    for env_id in (OLD_ENV, NEW_ENV):
        stack.start_worker(env_id)
    accepted = [r.json()["id"] for r in responses if r.status_code == 202]
    for job_id in accepted:
        assert stack.wait(job_id)["status"] == "done"
    assert counts(stack) == {"jobs": 5, "runs": 10, "results": 10}
    room = stack.http.post("/api/v1/jobs", json=body)  # room again
    assert room.status_code == 202
    assert stack.wait(room.json()["id"])["status"] == "done"
