"""Statuses that need evidence, on real runs (warm sandboxes, real TVM): a case that says the
service failed, or that it ran out of memory, is not believed on its word."""

from __future__ import annotations

import json

import pytest

from tests.conftest import NEW_ENV
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment
from tvmrepro.results import Result
from worker.runner import IR_NOT_KEPT, RUN_IR_CAP, run_variant
from worker.runtimes.local import LocalRuntime

pytestmark = pytest.mark.tvm

# The case writes its own `result` event to every descriptor it has (the harness's pipe among
# them), then exits 0 before the harness can write the true one: the last result is the claim.
CLAIM = ("import json, os\n"
         "line = json.dumps({'event': 'result', 'status': %r, 'stage': 'run',\n"
         "                   'error_type': 'Claimed', 'message': 'said by the case'}) + '\\n'\n"
         "for fd in range(3, 1600):\n"
         "    try:\n"
         "        os.write(fd, line.encode())\n"
         "    except OSError:\n"
         "        pass\n"
         "os._exit(0)\n")


def run(runtime: LocalRuntime, env: Environment, script: str, **limits: int) -> Result:
    """A script case run in a warm sandbox of the session's runtime."""
    return run_variant(parse_case({"script": script, "timeout_s": 30} | limits), "script", env,
                       runtime)


@pytest.mark.parametrize("claimed", ["infra_error", "oom"])
def test_a_claimed_status_that_needs_evidence_is_an_error(
        claimed: str, warm_runtime: LocalRuntime, tvm_envs: dict[str, Environment]) -> None:
    result = run(warm_runtime, tvm_envs[NEW_ENV], CLAIM % claimed)
    # The claim was read (its error type is the case's), but not its status.
    assert (result.status, result.error_type) == ("error", "Claimed"), result.log.stderr[-2000:]


def test_a_memory_error_far_below_the_limit_is_an_error(warm_runtime: LocalRuntime,
                                                        tvm_envs: dict[str, Environment]) -> None:
    bare = run(warm_runtime, tvm_envs[NEW_ENV], "raise MemoryError('nothing allocated')\n")
    assert (bare.status, bare.error_type) == ("error", "MemoryError"), bare.log.stderr[-2000:]
    assert "not counted as out of memory" in (bare.message or "")


def test_memory_that_grows_to_the_limit_is_oom(warm_runtime: LocalRuntime,
                                               tvm_envs: dict[str, Environment]) -> None:
    growth = "x = []\nwhile True:\n    x.append(bytearray(64 << 20))\n"
    result = run(warm_runtime, tvm_envs[NEW_ENV], growth, memory_mb=1024)
    assert result.status == "oom", (result.message, result.log.stderr[-2000:])


def test_a_claim_of_the_wrong_shape_is_the_case_s_error(warm_runtime: LocalRuntime,
                                                        tvm_envs: dict[str, Environment]) -> None:
    # An unknown status and a message that is no text: the result still validates, as an error.
    forged = CLAIM.replace("'message': 'said by the case'", "'message': 123") % "bogus"
    result = run(warm_runtime, tvm_envs[NEW_ENV], forged)
    assert (result.status, result.error_type, result.message) == ("error", "Claimed", None)


# The case writes FLOOD_MB pass events of 1 MiB of IR each to the harness's pipe (past every cap:
# the supervisor's relay budget and the runtime's 64 MiB read of the events), then ends its own
# way: its own result and exit must survive the flood.
FLOOD_MB = 80
FLOOD = ("import json, os, stat\n"
         "ir = 'x' * (1 << 20)\n"
         "pipes = [fd for fd in range(3, 1600) if _is_fifo(fd)]\n"
         f"for index in range({FLOOD_MB}):\n"
         "    line = json.dumps({'event': 'pass', 'index': index, 'name': 'Forged',\n"
         "                       'seconds': 0.0, 'functions': [{'name': 'f', 'kind': 'PrimFunc'}],\n"
         "                       'ir': ir}) + '\\n'\n"
         "    for fd in pipes:\n"
         "        os.write(fd, line.encode())\n")
IS_FIFO = ("import os, stat\n"
           "def _is_fifo(fd):\n"
           "    try:\n"
           "        return stat.S_ISFIFO(os.fstat(fd).st_mode)\n"
           "    except OSError:\n"
           "        return False\n")


def forging(events: str, ending: str) -> str:
    """A case that writes `events` (a Python list of event dicts) to the harness's pipe (every
    FIFO it holds), then ends with `ending`."""
    return (IS_FIFO + "import json\n"
            "for fd in range(3, 1600):\n"
            "    if _is_fifo(fd):\n"
            f"        for event in {events}:\n"
            "            os.write(fd, (json.dumps(event) + '\\n').encode())\n" + ending)


@pytest.mark.parametrize(("ending", "status", "error_type"), [
    ("raise RuntimeError('its own failure')\n", "error", "RuntimeError"),
    ("print('its own end')\n", "ok", None),
])
def test_a_run_that_floods_ir_snapshots_keeps_its_own_result(
        ending: str, status: str, error_type: str | None, warm_runtime: LocalRuntime,
        tvm_envs: dict[str, Environment]) -> None:
    result = run(warm_runtime, tvm_envs[NEW_ENV], IS_FIFO + FLOOD + ending, timeout_s=60)
    assert (result.status, result.error_type) == (status, error_type), (
        result.message, result.log.stderr[-2000:])
    stored_ir = sum(len(p.ir) for p in result.passes)
    assert 0 < stored_ir <= RUN_IR_CAP + len(result.passes) * len(IR_NOT_KEPT) + 200
    assert "IR not stored" in result.passes[-1].ir


def test_a_malformed_stage_before_a_death_is_still_the_case_s_crash(
        warm_runtime: LocalRuntime, tvm_envs: dict[str, Environment]) -> None:
    forged = forging("[{'event': 'stage', 'stage': 5, 'pass_path': 'not a list'}]",
                     "os.abort()\n")
    result = run(warm_runtime, tvm_envs[NEW_ENV], forged)
    assert (result.status, result.signal, result.stage, result.pass_path) == (
        "crash", "SIGABRT", None, None), (result.message, result.log.stderr[-2000:])


def test_what_json_cannot_hold_is_made_text_before_the_store(
        warm_runtime: LocalRuntime, tvm_envs: dict[str, Environment]) -> None:
    # NaN and infinity (which PostgreSQL refuses in JSON: the store's error would read as the
    # service's fault) in a forged pass's time (a required number: such a pass once made the
    # whole result fail to validate), attrs and the result's outputs (JSON's null, as pydantic
    # writes them).
    nan = "float('nan')"
    forged = forging(f"[{{'event': 'pass', 'index': 0, 'name': 'P', 'seconds': {nan}, 'ir': '', "
                     f"'functions': [{{'name': 'f', 'kind': 'PrimFunc', 'attrs': {{'x': {nan}}}}}]}},"
                     f" {{'event': 'result', 'status': 'ok', 'stage': 'run', "
                     f"'outputs': [{nan}, float('inf')]}}]", "os._exit(0)\n")
    result = run(warm_runtime, tvm_envs[NEW_ENV], forged)
    assert result.status == "ok", (result.message, result.log.stderr[-2000:])
    assert result.outputs == [None, None] and result.passes[0].seconds == 0.0
    json.dumps(result.to_json(), allow_nan=False)  # strict JSON: any store takes it
