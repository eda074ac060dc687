"""Module mode with an entry call, and the sandbox's fallback, on real TVM."""

from __future__ import annotations

import errno
import json
import os

import numpy as np
import pytest

from tests.conftest import NEW_ENV, OLD_ENV, case_path
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment
from tvmrepro.settings import Settings
from worker.runner import run_variant
from worker.runtimes.local import LocalRuntime

pytestmark = pytest.mark.tvm


def matmul_relu_case() -> dict:
    """The GPU smoke case (tests/cases/cuda-matmul-relu), built for the environment's own
    target (llvm here)."""
    data = json.loads(case_path("cuda-matmul-relu/case.json").read_text())
    data["target"] = None
    return data


def test_entry_is_called_with_seeded_inputs_and_outputs_summarized(
        tvm_envs: dict[str, Environment], warm_runtime: LocalRuntime) -> None:
    case = parse_case(matmul_relu_case())
    results = [run_variant(case, "default", tvm_envs[e], warm_runtime) for e in (OLD_ENV, NEW_ENV)]
    rng = np.random.RandomState(0)
    x = rng.standard_normal((256, 256)).astype("float32")
    w = rng.standard_normal((256, 256)).astype("float32")
    expected = np.maximum(x @ w, 0).astype(np.float64).sum()
    for result in results:
        assert result.status == "ok", result.log.stderr[-2000:]
        assert result.stage == "run"
        assert result.outputs["shape"] == [256, 256] and result.outputs["dtype"] == "float32"
        assert result.outputs["sum"] == pytest.approx(expected, rel=1e-4)
        assert result.seconds["run"] > 0
    assert results[0].outputs["sha256"] == results[1].outputs["sha256"]


def test_other_seed_other_checksum(tvm_envs: dict[str, Environment], warm_runtime: LocalRuntime) -> None:
    data = matmul_relu_case()
    data["inputs"] = {"seed": 1}
    result = run_variant(parse_case(data), "default", tvm_envs[NEW_ENV], warm_runtime)
    seed0 = run_variant(parse_case(matmul_relu_case()), "default", tvm_envs[NEW_ENV], warm_runtime)
    assert result.outputs["sha256"] != seed0.outputs["sha256"]


def test_missing_pass_in_this_tvm_is_incompatible(tvm_envs: dict[str, Environment],
                                                  warm_runtime: LocalRuntime) -> None:
    data = matmul_relu_case()
    data["variants"] = [{"name": "v", "passes": ["LegalizeOps", "NotAPassAnywhere"]}]
    result = run_variant(parse_case(data), "v", tvm_envs[NEW_ENV], warm_runtime)
    assert result.status == "incompatible"
    assert result.stage == "pass:1:NotAPassAnywhere"
    assert [p.name for p in result.passes] == ["LegalizeOps"]


def test_parse_error_keeps_its_message(tvm_envs: dict[str, Environment], warm_runtime: LocalRuntime) -> None:
    data = matmul_relu_case()
    data["source"] = data["source"].replace("R.nn.relu(y)", "R.nn.relu(y, y, y)")
    result = run_variant(parse_case(data), "default", tvm_envs[NEW_ENV], warm_runtime)
    assert result.status == "error"
    assert result.stage == "parse"
    # TVMScript's own diagnostic, without the parser's "note: run with ..." advice.
    assert result.error_type == "DiagnosticError"
    assert result.message == "error: relu() takes 1 positional argument but 3 were given"


def test_without_bwrap_falls_back_and_says_so(tvm_envs: dict[str, Environment],
                                              settings: Settings) -> None:
    runtime = LocalRuntime(settings)
    runtime.bwrap = None  # as on a machine without bubblewrap
    case = parse_case({"script": "import socket\nsocket.create_connection(('127.0.0.1', 6379), 2)\n"})
    result = run_variant(case, "script", tvm_envs[NEW_ENV], runtime)
    assert result.isolation["sandbox"] == "unshare-net+rlimits"
    # A new network namespace whose loopback is down: no route at all, not a refusal
    # (a refusal would mean a reachable loopback; success, the host's own Redis).
    assert result.status == "error"
    assert result.error_type == "OSError"
    assert result.message == f"[Errno {errno.ENETUNREACH}] {os.strerror(errno.ENETUNREACH)}"


def test_old_target_strings_are_ported(tvm_envs: dict[str, Environment], warm_runtime: LocalRuntime) -> None:
    data = matmul_relu_case()
    data["target"] = "llvm -mcpu=x86-64 -num-cores=2"
    module = run_variant(parse_case(data), "default", tvm_envs[OLD_ENV], warm_runtime)
    assert module.status == "ok", module.log.stderr[-2000:]
    script = ("import tvm\nt = tvm.target.Target('llvm -mcpu=x86-64')\n"
              "assert t.attrs['mcpu'] == 'x86-64', t\n")
    result = run_variant(parse_case({"script": script}), "script", tvm_envs[NEW_ENV], warm_runtime)
    assert result.status == "ok", result.log.stderr[-2000:]
    assert result.rewrites == ["target-string-to-dict"]


def test_reports_may_import_tvm_testing(tvm_envs: dict[str, Environment], warm_runtime: LocalRuntime) -> None:
    script = "import numpy as np, tvm.testing\ntvm.testing.assert_allclose(np.ones(3), np.ones(3))\n"
    result = run_variant(parse_case({"script": script}), "script", tvm_envs[OLD_ENV], warm_runtime)
    assert result.status == "ok", result.log.stderr[-2000:]


def test_a_scripts_traceback_starts_at_the_script(tvm_envs: dict[str, Environment],
                                                  warm_runtime: LocalRuntime) -> None:
    script = "def inner():\n    raise ValueError('from the case')\n\ninner()\n"
    result = run_variant(parse_case({"script": script}), "script", tvm_envs[NEW_ENV],
                         warm_runtime)
    assert result.status == "error" and result.error_type == "ValueError"
    traceback = result.log.stderr[result.log.stderr.index("Traceback"):]
    frames = [line for line in traceback.splitlines() if line.startswith('  File "')]
    assert "harness" not in frames[0], traceback  # no harness frame before the case's
    assert [f.rsplit(", in ", 1)[1] for f in frames] == ["<module>", "inner"], traceback
