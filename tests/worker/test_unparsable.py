"""Edits refused from their text alone: never one that TVM would parse (real TVM, three releases)."""

from __future__ import annotations

import pytest

from tests.conftest import case_path
from tvmrepro.cases import load_case_file
from tvmrepro.environments import default_catalog
from tvmrepro.settings import Settings
from worker.environments.provision import provision
from worker.narrowing import candidates
from worker.narrowing.judging import Judge, Options
from worker.narrowing.unparsable import why_unparsable
from worker.runtimes.local import LocalRuntime

REDUCED = '''from tvm.script import ir as I
from tvm.script import relax as R

N = 1

@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor((1,), dtype="float32")) -> R.Tensor((1,), dtype="float32"):
        cls = Module

        @R.function
        def g(y: R.Tensor((1,), dtype="float32")) -> R.Tensor((1,), dtype="float32"):
            with R.dataflow():
                gv_2: R.Tensor((1,), dtype="float32") = R.add(y, y)
                R.output(gv_2)
            return gv_2

        gv1: R.Tensor((1,), dtype="float32") = g(x)
        gv3 = cls.h(gv1)
        return gv3

    @R.function
    def h(z: R.Tensor((1,), dtype="float32")) -> R.Tensor((1,), dtype="float32"):
        return z
'''


def without(text: str, line: str) -> str:
    assert line in text
    return text.replace(line, "", 1)


def test_text_that_is_not_python_is_refused() -> None:
    assert why_unparsable("def f(:\n") == "not valid Python"
    # Parses as Python, but does not compile: a `return` left outside any function.
    assert why_unparsable("return 1\n") == "not valid Python"


def test_the_module_as_written_is_not_refused() -> None:
    assert why_unparsable(REDUCED) is None
    case = load_case_file(case_path("tvm-17357/case.json"))
    assert why_unparsable(case.source or "") is None


@pytest.mark.parametrize(("line", "why"), [
    ("                gv_2: R.Tensor((1,), dtype=\"float32\") = R.add(y, y)\n", "reads gv_2"),
    ("        cls = Module\n", "reads cls"),
    ("        return gv3\n", "Relax function f has no return"),
    ("            return gv_2\n", "Relax function g has no return"),
])
def test_a_binding_still_read_or_a_return_dropped_is_refused(line: str, why: str) -> None:
    found = why_unparsable(without(REDUCED, line))
    assert found is not None and why in found, found


def test_a_function_dropped_that_another_calls_through_cls_is_refused() -> None:
    text = REDUCED[:REDUCED.index("    @R.function\n    def h")].rstrip() + "\n"
    assert "cls.h, which the module lacks" in (why_unparsable(text) or "")


def test_what_it_cannot_follow_or_what_is_defined_elsewhere_is_not_refused() -> None:
    # A module-level name read inside a function is defined.
    assert why_unparsable(REDUCED.replace("R.add(y, y)", "R.add(y, y) if N else y")) is None
    # A comprehension anywhere: its scoping is not followed, so nothing is refused.
    dropped = without(REDUCED, "        cls = Module\n")
    assert why_unparsable(dropped + "\nSIZES = [n for n in range(3)]\n") is None
    # A name bound only in another function is not defined here.
    other = REDUCED.replace("        return z\n", "        w = z\n        return w\n")
    assert "reads w" in (why_unparsable(other.replace("        gv3 = cls.h(gv1)\n",
                                                      "        gv3 = cls.h(w)\n")) or "")


def module_edits(source: str) -> list[candidates.Candidate]:
    """Every edit the reducer's module phases would try on `source` first."""
    edits = candidates.drop_functions(source) + candidates.empty_prim_funcs(source)
    edits += candidates.zero_bindings(source)
    depth = candidates.FUNCTION_INDENT + candidates.STATEMENT_STEP
    while depth <= candidates.max_depth(source):
        edits += candidates.drop_statements(source, depth)
        depth += candidates.STATEMENT_STEP
    return edits


@pytest.mark.tvm
@pytest.mark.parametrize("env_id", ["tvm-0.25.0-cpu", "tvm-0.26.0-cpu", "tvm-0.27.0.post1-cpu"])
def test_every_edit_refused_from_its_text_is_refused_by_tvm(settings: Settings,
                                                            env_id: str) -> None:
    env = default_catalog().get(env_id)
    provision(settings, env)
    case = load_case_file(case_path("tvm-17357/case.json"))
    runtime = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 0}))
    try:
        runtime.start_zygotes([env])
        judge = Judge(case, Options(env=env, variant="fusetir-once"), runtime)
        printed, small = judge.check([case.source or ""], case.module)[0], \
            judge.check([REDUCED], "Module")[0]
        assert printed["ok"] and small["ok"], (printed, small)  # both parse as written
        texts = [printed.get("source", ""), REDUCED]
        refused = [e.source for text in texts for e in module_edits(text)
                   if why_unparsable(e.source)]
        assert len(refused) >= 10, len(refused)  # the founding reduction's kind of edit
        verdicts = judge.check(refused, "Module")
    finally:
        runtime.close()
    parsed = [(why_unparsable(s), v) for s, v in zip(refused, verdicts, strict=True)
              if v["ok"] or not str(v.get("reason", "")).startswith("does not parse")]
    assert not parsed, parsed[:3]
