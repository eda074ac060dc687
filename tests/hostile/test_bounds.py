"""`make hostile`, bounds and parsing: text made to cost, against a running service per runtime.

For each runtime (a service of its own on the suite's private Redis, as tests/hostile/
test_hostile.py has): a run whose message is 64 KiB made to make every pattern backtrack leaves
its bisection finished within FINISHED_S (the local runtime: its bisection needs a second
environment's worker, and the Docker part builds one image), the environment served all the
while; 1 MiB of IR made to defeat difflib leaves its comparison made within FINISHED_S and
served by GET .../compare within COMPARE_GET_S; what the API must refuse is 400, never 500 (a
NUL, digits of other scripts, issue numbers no tracker has, a sweep of an environment against
itself); and a cancelled job leaves no message in the queue of an environment no worker
serves. Each check is a row of the suite's table.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import NEW_ENV, OLD_ENV
from tests.fixtures.ledger import Ledger
from tests.hostile.cases import FORGED_MESSAGE
from tests.hostile.conftest import PrivateRedis, make_stack
from tests.service.stack import Stack
from tvmrepro.queue import queue_names

pytestmark = [pytest.mark.tvm, pytest.mark.timeout(1800)]
RUNTIMES = ("local", "docker")
FINISHED_S = 30.0  # from the last run stored to the job finished (its step, its comparisons)
COMPARE_GET_S = 1.0
UNSERVED_ENV = "tvm-0.26.0-cpu"  # no worker of these stacks serves it
# Bindings kept and dead in turn: about 1 MiB of IR after the pass, in more lines than the IR
# diff lets difflib match (tvmrepro/jobs/irdiff.py MAX_DIFF_LINES).
FORGED_PAIRS = 2400
FORGED_NAME_PAD = "x" * 80


@pytest.fixture(scope="module", params=RUNTIMES)
def stack(request: pytest.FixtureRequest, private_redis: PrivateRedis,
          tmp_path_factory: pytest.TempPathFactory, test_home: Path) -> Iterator[Stack]:
    """The runtime's service; the local one with a worker for OLD_ENV too (a bisection)."""
    running = make_stack(request.param, request, private_redis,
                         tmp_path_factory.mktemp(f"bounds-{request.param}"), test_home)
    running.runtime = request.param  # type: ignore[attr-defined]
    if request.param == "local":
        running.start_worker(OLD_ENV)
    yield running
    running.close(clean=True)


def runtime_of(stack: Stack) -> str:
    return str(stack.runtime)  # type: ignore[attr-defined]


def finished_after_last_run(stack: Stack, job_id: str, timeout: float) -> tuple[dict[str, Any],
                                                                                 float, bool]:
    """Wait for the job; it, the seconds from its last run stored to its answer complete, and
    whether its environments read served at every look meanwhile."""
    deadline, served = time.monotonic() + timeout, True
    while True:
        job = stack.http.get(f"/api/v1/jobs/{job_id}").json()
        envs = {e["id"]: e["state"] for e in stack.http.get("/api/v1/environments").json()[
            "environments"]}
        served &= all(envs.get(env) == "served" for env in job["environments"])
        if job["status"] in ("done", "failed"):
            break
        assert time.monotonic() < deadline, f"job {job_id} unfinished\n{stack.logs()}"
        time.sleep(0.2)
    row = stack.store.job(job_id)
    assert row is not None
    last = max(run.finished_at or 0.0 for run in row.runs)
    return job, time.time() - last, served


def test_a_forged_message_leaves_its_bisection_finished(stack: Stack, ledger: Ledger) -> None:
    if runtime_of(stack) != "local":
        pytest.skip("its second environment's image is not built for the Docker part")
    script = "import tvm\n" + FORGED_MESSAGE.format(when="tvm.__version__.startswith('0.27')")
    job = stack.submit({"kind": "bisect", "case": {"title": "hostile forged message",
                                                   "script": script, "timeout_s": 60},
                        "environments": [OLD_ENV, NEW_ENV], "bypass_cache": True})
    found, after_s, served = finished_after_last_run(stack, job["id"], 600)
    bisect = found["bisect"]
    transitions = [(t["before"], t["after"]) for t in bisect["transitions"]]
    messages = [len((run["result"] or {}).get("message") or "") for run in found["runs"]]
    got = (f"{transitions}, {after_s:.1f} s after its last run, message {max(messages)} "
           f"chars, {'served' if served else 'UNSERVED'} throughout")
    print(f"forged message [{runtime_of(stack)}]: {got}")
    assert ledger.add(runtime_of(stack), "forged 64 KiB message: bisection",
                      f"finished <= {FINISHED_S:g} s, served", got,
                      bisect["finished"] and transitions == [(OLD_ENV, NEW_ENV)]
                      and after_s <= FINISHED_S and served and max(messages) >= 60_000), \
        stack.logs()


def forged_ir_case() -> dict[str, Any]:
    """Bindings kept and dead in turn, with long names: DeadCodeElimination removes every other
    line of about 1 MiB of IR, more lines than the IR diff lets difflib match (the kind of diff
    that made it take minutes), from a module small enough to parse and print in seconds. The
    source runs in the harness's process, which keeps 512 KiB of a pass's IR: it lifts that cap
    (the worker's is 2 MiB)."""
    lines = ["import sys", "for name, module in list(sys.modules.items()):",
             "    if name.endswith('tracing') and hasattr(module, 'IR_CAP_CHARS'):",
             "        module.IR_CAP_CHARS = 4 << 20",
             "from tvm.script import ir as I", "from tvm.script import relax as R", "",
             "@I.ir_module", "class Module:", "    @R.function",
             '    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):',
             "        with R.dataflow():", f"            {_kept(0)} = R.add(x, x)"]
    for i in range(1, FORGED_PAIRS):
        lines += [f"            {_dead(i)} = R.multiply({_kept(i - 1)}, x)",
                  f"            {_kept(i)} = R.add({_kept(i - 1)}, x)"]
    last = _kept(FORGED_PAIRS - 1)
    lines += [f"            R.output({last})", f"        return {last}"]
    return {"title": "hostile forged IR", "source": "\n".join(lines) + "\n", "module": "Module",
            "variants": [{"name": "kept", "passes": ["Normalize"]},
                         {"name": "pruned", "passes": ["DeadCodeElimination"]}],
            "target": "llvm", "entry": None, "timeout_s": 600, "memory_mb": 4096}


def _kept(i: int) -> str:
    return f"kept_{i}_{FORGED_NAME_PAD}"


def _dead(i: int) -> str:
    return f"dead_{i}_{FORGED_NAME_PAD}"


def test_forged_ir_leaves_its_comparison_made_and_served(stack: Stack, ledger: Ledger) -> None:
    job = stack.submit({"kind": "run", "case": forged_ir_case(), "environments": [NEW_ENV],
                        "bypass_cache": True})
    found, after_s, served = finished_after_last_run(stack, job["id"], 1500)
    kept, pruned = found["runs"]
    ir = stack.http.get(f"/api/v1/jobs/{job['id']}/runs/{kept['id']}/ir").json()["passes"]
    started = time.monotonic()
    answer = stack.http.get(f"/api/v1/jobs/{job['id']}/compare",
                            params={"a": kept["id"], "b": pruned["id"]})
    get_s = time.monotonic() - started
    (compared,) = found["matrix"]["comparisons"]
    got = (f"IR {len(ir[0]['ir']) >> 10} KiB, made {after_s:.1f} s after its last run, "
           f"GET {get_s:.2f} s, {'served' if served else 'UNSERVED'}")
    print(f"forged IR [{runtime_of(stack)}]: {got}")
    assert ledger.add(runtime_of(stack), "forged 1 MiB IR: comparison",
                      f"made <= {FINISHED_S:g} s, GET <= {COMPARE_GET_S:g} s", got,
                      answer.status_code == 200 and answer.json() == compared
                      and len(ir[0]["ir"]) >= 1 << 20 and after_s <= FINISHED_S
                      and get_s <= COMPARE_GET_S and served), stack.logs()


def refusals(stack: Stack) -> dict[str, int]:
    """What the API answers to each input it must refuse."""
    job = stack.submit({"kind": "run", "case": {"title": "refusals", "script": "pass\n"},
                        "environments": [NEW_ENV]})
    post = stack.http.post
    asked = {
        "NUL in a title": post("/api/v1/jobs", json={"case": {"title": "a\x00b",
                                                              "script": "pass\n"}}),
        "?wait=²": stack.http.get(f"/api/v1/jobs/{job['id']}?wait=²"),
        "?limit=²": stack.http.get("/api/v1/jobs?limit=²"),
        "?offset=①": stack.http.get("/api/v1/jobs?offset=①"),
        "issue -1": post("/api/v1/jobs", json={"kind": "triage", "environments": [NEW_ENV],
                                               "reports": [{"body": "x", "number": -1}]}),
        "issue 10**30": post("/api/v1/jobs", json={
            "kind": "triage", "environments": [NEW_ENV],
            "reports": [{"body": "x", "number": 10 ** 30}]}),
        "sweep since == env": post("/api/v1/jobs", json={"kind": "sweep", "env": NEW_ENV,
                                                         "since": NEW_ENV}),
    }
    return {name: answer.status_code for name, answer in asked.items()}


def test_what_the_api_must_refuse_is_400(stack: Stack, ledger: Ledger) -> None:
    codes = refusals(stack)
    wrong = {name: code for name, code in codes.items() if code != 400}
    assert ledger.add(runtime_of(stack), f"{len(codes)} inputs to refuse", "400 each",
                      str(wrong) if wrong else "400 each", not wrong), stack.logs()


def test_a_cancelled_job_leaves_no_message_behind(stack: Stack, ledger: Ledger,
                                                  private_redis: PrivateRedis) -> None:
    jobs = [stack.submit({"kind": "run", "environments": [UNSERVED_ENV],
                          "case": {"title": f"hostile unserved {n}", "script": "pass\n"}})
            for n in range(3)]
    client, prefix = private_redis.client(), stack.backend.redis_prefix
    keys = [f"{prefix}{name}" for name in queue_names(UNSERVED_ENV)]
    before = sum(int(client.llen(key)) for key in keys)
    for job in jobs:
        answer = stack.http.delete(f"/api/v1/jobs/{job['id']}",
                                   headers={"X-Cancel-Token": job["cancel_token"]})
        assert answer.status_code == 200, answer.text
    after = sum(int(client.llen(key)) for key in keys)
    assert ledger.add(runtime_of(stack), "cancelled on an unserved environment",
                      "its messages gone", f"{before} messages, then {after}",
                      before == len(jobs) and after == 0), stack.logs()
