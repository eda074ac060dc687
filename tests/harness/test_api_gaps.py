"""An API a release lacks is `incompatible`, with the missing name, wherever it shows (an import, an
attribute, a TVMScript diagnostic); a mistyped name gets "did you mean"; an error after parsing
is the script's, not the parser's. Real scripts through the local sandbox on 0.25 and 0.27."""

from __future__ import annotations

import pytest

from tests.conftest import NEW_ENV, OLD_ENV
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment
from tvmrepro.results import Result
from worker.runner import run_variant
from worker.runtimes.local import LocalRuntime

pytestmark = pytest.mark.tvm

MODULE = '''import tvm
from tvm import relax
from tvm.script import ir as I, relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        return x
'''
# Names 0.26 and 0.27 have and 0.25 lacks, each as a report written for 0.26+ uses it (checked on
# the wheels: each of these is an `error` on 0.25 without the API-gap rules).
ON_025 = {
    # TVMScript dialect names: the parser reports them as a DiagnosticError at `parse`.
    "tir-dialect": ('import tvm\nfrom tvm.script import tirx as T\n\n@T.prim_func\n'
                    'def f(x: T.int32, y: T.int32) -> T.int32:\n    return T.BitwiseAnd(x, y)\n',
                    "parse", "has no attribute 'BitwiseAnd'"),
    "relax-dialect": (MODULE.replace('x: R.Tensor((2, 3), "float32")',
                                     'x: R.Tensor((2, 3), "float32"), n: R.Tensor((2,), "int64")')
                      .replace("return x", "return R.reverse_sequence(x, n)"),
                      "parse", "has no attribute 'reverse_sequence'"),
    # An attribute of a TVM object, asked for by the script (Function.ret_ty is 0.26's name).
    "object-attribute": (MODULE + 'print(Module["main"].ret_ty)\n', "script",
                         "'Function' object has no attribute 'ret_ty'"),
    # An attribute of a TVM class (nn.Tensor.from_ty is 0.26's).
    "class-attribute": ("from tvm import relax\nfrom tvm.relax.frontend import nn\n"
                        "nn.Tensor.from_ty(relax.TensorStructInfo((2,), 'float32'), 'x')\n",
                        "script", "type object 'Tensor' has no attribute 'from_ty'"),
    # A keyword argument of a TVM function that 0.26 added (affine_grid's align_corners).
    "keyword-argument": ("from tvm import relax\nfrom tvm.script import relax as R\n"
                         "theta = relax.Var('theta', R.Tensor((1, 2, 3), 'float32'))\n"
                         "relax.op.image.affine_grid(theta, (4, 4), align_corners=True)\n",
                         "script", "affine_grid() got an unexpected keyword argument "
                         "'align_corners'"),
}


def _run(script: str, env: Environment, runtime: LocalRuntime) -> Result:
    return run_variant(parse_case({"script": script}), "script", env, runtime)


@pytest.mark.parametrize("name", ON_025)
def test_a_name_only_newer_releases_have_is_incompatible_on_0_25(
        name: str, tvm_envs: dict[str, Environment], warm_runtime: LocalRuntime) -> None:
    script, stage, missing = ON_025[name]
    result = _run(script, tvm_envs[OLD_ENV], warm_runtime)
    assert (result.status, result.stage) == ("incompatible", stage), result.log.stderr[-2000:]
    assert missing in (result.message or "") and missing in (result.signature or "")
    assert _run(script, tvm_envs[NEW_ENV], warm_runtime).status == "ok"


def test_the_reports_own_failures_stay_errors(tvm_envs: dict[str, Environment],
                                              warm_runtime: LocalRuntime) -> None:
    checked = MODULE + "import numpy as np\nassert np.allclose(np.ones(2), np.zeros(2))\n"
    assert _run(checked, tvm_envs[OLD_ENV], warm_runtime).status == "error"
    # An attribute the script's own object lacks is its own bug, TVM or not.
    mine = MODULE + "class Box:\n    pass\n\nBox().ret_ty\n"
    assert _run(mine, tvm_envs[OLD_ENV], warm_runtime).status == "error"
    # A keyword its own function does not take is its own mistake too.
    keyword = MODULE + "def f(x):\n    return x\n\nf(x=1, align_corners=True)\n"
    assert _run(keyword, tvm_envs[OLD_ENV], warm_runtime).status == "error"


def test_a_mistyped_pass_says_which_it_meant(tvm_envs: dict[str, Environment],
                                             warm_runtime: LocalRuntime) -> None:
    script = MODULE + "mod = relax.transform.FuseTRI()(Module)\n"
    result = _run(script, tvm_envs[NEW_ENV], warm_runtime)
    assert result.status == "incompatible", result.log.stderr[-2000:]
    assert result.message == ("module 'tvm.relax.transform' has no attribute 'FuseTRI'; "
                              "did you mean FuseTIR?")
    assert (result.signature or "").endswith("did you mean FuseTIR?")  # the table shows it
    imported = _run("from tvm.relax.transform import LegalizeOp\n", tvm_envs[NEW_ENV],
                    warm_runtime)
    assert imported.status == "incompatible"
    assert (imported.message or "").endswith("did you mean LegalizeOps?"), imported.message


def test_a_sequential_of_a_non_pass_fails_in_the_script_not_in_parsing(
        tvm_envs: dict[str, Environment], warm_runtime: LocalRuntime) -> None:
    # TVMScript was parsed before: the TypeError of the Sequential is the script's own.
    script = MODULE + ("seq = tvm.transform.Sequential([relax.transform.LegalizeOps(), "
                       "relax.transform.FuseTIR])\nmod = seq(Module)\n")
    result = _run(script, tvm_envs[NEW_ENV], warm_runtime)
    assert (result.status, result.error_type, result.stage) == ("error", "TypeError", "script")
    # A parse error is still at `parse`.
    broken = MODULE.replace("return x", "return y")
    assert _run(broken, tvm_envs[NEW_ENV], warm_runtime).stage == "parse"
