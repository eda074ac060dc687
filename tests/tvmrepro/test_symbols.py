"""The symbol trace, on the founding case's real runs and on tables built to show each event."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import MISSING_FUNCTION, NEW_ENV, OLD_ENV
from tvmrepro.api.traced import SymbolTrace
from tvmrepro.jobs.symbols import symbol_traces, trace


@pytest.mark.tvm
def test_the_founding_case_names_lambdalift_and_allocateworkspace(
        founding_local_runs: list[dict[str, Any]]) -> None:
    traces = {(t.variant, t.environment): t for t in symbol_traces(founding_local_runs)}
    assert {t.symbol for t in traces.values()} == {MISSING_FUNCTION}
    for env in (OLD_ENV, NEW_ENV):
        once, twice = traces["fusetir-once", env], traces["fusetir-twice", env]
        assert [(e.step, e.pass_name, e.event) for e in once.events] == [
            (2, "LambdaLift", "appeared"), (3, "AllocateWorkspace", "renamed")]
        assert once.final_name == f"{MISSING_FUNCTION}1"
        assert [(e.step, e.pass_name, e.event, e.kind) for e in twice.events] == [
            (2, "LambdaLift", "appeared", "Function"), (3, "FuseTIR", "kind_changed", "PrimFunc")]
        assert twice.final_name == MISSING_FUNCTION  # the name the VM looks for exists


def _passes(*tables: dict[str, str]) -> list[dict[str, Any]]:
    return [{"name": f"P{i}", "functions": [{"name": n, "kind": k} for n, k in t.items()]}
            for i, t in enumerate(tables, start=1)]


def test_removal_and_return_are_separate_events() -> None:
    steps = [(p["name"], {f["name"]: f["kind"] for f in p["functions"]})
             for p in _passes({"f": "Function"}, {}, {"f": "PrimFunc"})]
    events, final = trace("f", steps)
    assert [(e.step, e.event) for e in events] == [(1, "appeared"), (2, "removed"), (3, "appeared")]
    assert final == "f"


def test_an_ambiguous_rename_is_a_removal() -> None:
    steps = [("A", {"g_gv": "Function"}), ("B", {"g_gv1": "Function", "g_gv2": "Function"})]
    events, final = trace("g_gv", steps)
    assert [e.event for e in events] == ["appeared", "removed"] and final is None


def test_only_names_some_table_holds_are_traced() -> None:
    runs = [{"variant": "v", "environment": "e", "message": "Cannot find main nor helper_fn",
             "passes": _passes({"main": "Function"})}]
    traces = symbol_traces(runs)
    assert [(t.symbol, t.summary()) for t in traces] == [
        ("main", "appears after P1 (pass 0) as Function")]
    assert isinstance(traces[0], SymbolTrace)


def test_a_function_of_the_case_was_there_before_the_first_pass() -> None:
    source = ("@I.ir_module\nclass Module:\n    @R.function\n    def main(x: R.Tensor):\n"
              "        return x\n")
    runs = [{"variant": "v", "environment": "e", "message": "main: an empty assert",
             "passes": _passes({"main": "Function"}, {"main": "Function"},
                               {"main": "PrimFunc"})}]
    traces = symbol_traces(runs, source)
    assert [(e.step, e.event) for e in traces[0].events] == [(3, "kind_changed")]
    assert traces[0].summary() == ("in the module from the start; becomes a PrimFunc (was "
                                   "Function) in P3 (pass 2)")
    unchanged = symbol_traces([{**runs[0], "passes": _passes({"main": "Function"})}], source)
    assert unchanged[0].summary() == "in the module from the start, unchanged"
    # Without the case, the first table is all that is known: it appears there.
    assert symbol_traces(runs)[0].events[0].event == "appeared"
