"""Many jobs at once: none lost, none doubled; past the queue cap a 429 that stores nothing.

Real API and worker processes, broker and store. Fifty jobs, and the queue cap, run on
the tests' FakeRuntime (TVMREPRO_RUNTIME=fake, workers started by tests/fakes/cli.py):
what is under load there is the service, not TVM. A smaller load runs real TVM in the
local runtime's sandboxes, so that the same proof holds with real runs.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.conftest import NEW_ENV, OLD_ENV
from tests.fakes.runtime import DIRECTIVE
from tests.service.stack import Backend, Stack, dump, founding_body
from tvmrepro.store import schema

pytestmark = [pytest.mark.timeout(400)]
JOBS = 50
RUN_S = 0.2  # how long each fake run takes
REAL_JOBS = 8  # each variant on each environment twice: two rounds of two workers' two runs


@pytest.fixture
def fake_stack(backend: Backend, tmp_path: Path) -> Iterator[Stack]:
    """A stack whose workers run cases with the FakeRuntime (no TVM needed)."""
    home = tmp_path / "home"
    home.mkdir()
    running = Stack(backend, home, TVMREPRO_RUNTIME="fake")
    yield running
    running.close()


def one_run_case(case: dict[str, Any], variant: str, scripted: bool = True) -> dict[str, Any]:
    """The founding case with only one of its variants; `scripted`: for the FakeRuntime, to end
    as it does on TVM."""
    once = {"variant": "fusetir-once", "status": "error", "stage": "vm_init", "sleep": RUN_S}
    source = f"{DIRECTIVE} {json.dumps(once)}\n{DIRECTIVE} {json.dumps({'sleep': RUN_S})}\n"
    return {**case, "source": (source if scripted else "") + case["source"],
            "variants": [v for v in case["variants"] if v["name"] == variant]}


def post_all(stack: Stack, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    """POST every body at the same time, each from its own thread."""
    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(lambda body: stack.http.post("/api/v1/jobs", json=body), bodies))


def result_data(stack: Stack) -> list[dict[str, Any]]:
    """Every stored result row."""
    with stack.store.engine.connect() as conn:
        return [dict(row) for row in conn.execute(sa.select(schema.results)).mappings()]


def counts(stack: Stack) -> dict[str, int]:
    """Rows in the jobs, runs and results tables."""
    with stack.store.engine.connect() as conn:
        return {table.name: conn.execute(sa.select(sa.func.count()).select_from(table))
                .scalar_one() for table in (schema.jobs, schema.runs, schema.results)}


def each_run_stored_once(stack: Stack, job_ids: list[str]) -> None:
    """Counted in the store: every accepted job has its one run, done after one delivery, with
    exactly one result row of its own (not served from another run's)."""
    with stack.store.engine.connect() as conn:
        runs = conn.execute(sa.select(schema.runs).where(schema.runs.c.job_id.in_(job_ids))
                            ).mappings().all()
        results: dict[str, int] = {run_id: count for run_id, count in conn.execute(
            sa.select(schema.results.c.run_id, sa.func.count()).group_by(schema.results.c.run_id)
            .where(schema.results.c.run_id.in_([run["id"] for run in runs])))}
    assert sorted(run["job_id"] for run in runs) == sorted(job_ids)  # one run a job, none lost
    for run in runs:
        assert (run["state"], run["deliveries"], run["result_id"]) == ("done", 1, run["id"]), \
            dump(dict(run))
        assert results.get(run["id"]) == 1, run["id"]


def load(stack: Stack, case: dict[str, Any], jobs: int, timeout: float, scripted: bool) -> None:
    """Post `jobs` one-run jobs at once (each variant on each environment in turn); each must
    be accepted and end as the founding case does on TVM (fusetir-once fails at vm_init)."""
    for env_id in (OLD_ENV, NEW_ENV):
        stack.start_worker(env_id)
    bodies = [founding_body(one_run_case(case, ("fusetir-once", "fusetir-twice")[n % 2], scripted),
                            [(OLD_ENV, NEW_ENV)[n // 2 % 2]], bypass_cache=True)
              for n in range(jobs)]
    responses = post_all(stack, bodies)
    refused = [f"{n}: {r.status_code} {r.text}" for n, r in enumerate(responses) if r.status_code != 202]
    assert not refused, "\n".join(refused) + "\n" + stack.logs()
    ids = [r.json()["id"] for r in responses]
    assert len(set(ids)) == jobs
    finished = [stack.wait(job_id, timeout=timeout) for job_id in ids]
    for n, job in enumerate(finished):
        (run,) = job["runs"]
        assert job["status"] == "done" and not run["cached"], dump(job)
        assert run["variant"] == bodies[n]["case"]["variants"][0]["name"]
        assert run["environment"] == bodies[n]["environments"][0]
        assert run["host"] == socket.gethostname()  # the one host whose workers took them
        once = run["variant"] == "fusetir-once"
        assert run["result"]["status"] == ("error" if once else "ok"), dump(run)
        assert not once or run["result"]["stage"] == "vm_init", dump(run)
    each_run_stored_once(stack, ids)
    assert counts(stack) == {"jobs": jobs, "runs": jobs, "results": jobs}


def test_fifty_jobs_at_once(fake_stack: Stack, founding_case: dict[str, Any]) -> None:
    fake_stack.start_api()
    load(fake_stack, founding_case, JOBS, timeout=300, scripted=True)
    assert {r["data"]["isolation"]["runtime"] for r in result_data(fake_stack)} == {"fake"}


@pytest.mark.tvm
@pytest.mark.parametrize("backend", ["redis+postgres"], indirect=True)  # the fake covers both
def test_jobs_at_once_on_real_tvm(stack: Stack, founding_case: dict[str, Any]) -> None:
    stack.start_api()
    load(stack, founding_case, REAL_JOBS, timeout=300, scripted=False)
    assert {r["data"]["isolation"]["runtime"] for r in result_data(stack)} == {"local"}


def test_past_the_queue_cap_429_and_nothing_half_stored(fake_stack: Stack,
                                                        founding_case: dict[str, Any]) -> None:
    stack = fake_stack
    stack.configure(TVMREPRO_MAX_QUEUED_RUNS="10")
    stack.start_api()  # no worker yet: nothing leaves the queue while we submit
    body = founding_body(one_run_case(founding_case, "fusetir-once"), [OLD_ENV, NEW_ENV],
                         bypass_cache=True)  # two runs a job
    responses = post_all(stack, [body] * 20)
    codes = sorted(r.status_code for r in responses)
    # The cap is per environment: 10 jobs x 1 run in each of the two fill both queues of 10.
    assert codes == [202] * 10 + [429] * 10, codes
    refused = next(r for r in responses if r.status_code == 429)
    assert refused.json()["error"]["status"] == 429
    assert "(cap 10 per environment)" in refused.json()["error"]["message"]
    assert refused.headers["Retry-After"]
    assert counts(stack) == {"jobs": 10, "runs": 20, "results": 0}

    too_big = founding_body(founding_case, [OLD_ENV, NEW_ENV], bypass_cache=True)
    too_big["case"] = {**founding_case, "variants": [
        {**founding_case["variants"][0], "name": f"v{n}"} for n in range(11)]}
    answer = stack.http.post("/api/v1/jobs", json=too_big)  # 11 runs on each: past the cap
    assert answer.status_code == 400 and answer.json()["error"]["field"] == "variants", \
        answer.text
    assert "11 runs on each environment" in answer.json()["error"]["message"]

    for env_id in (OLD_ENV, NEW_ENV):
        stack.start_worker(env_id)
    accepted = [r.json()["id"] for r in responses if r.status_code == 202]
    for job_id in accepted:
        assert stack.wait(job_id)["status"] == "done"
    assert counts(stack) == {"jobs": 10, "runs": 20, "results": 20}
    room = stack.http.post("/api/v1/jobs", json=body)  # room again
    assert room.status_code == 202
    assert stack.wait(room.json()["id"])["status"] == "done"
