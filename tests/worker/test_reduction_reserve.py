"""The reducer's candidate batches start their sandboxes together (real TVM, local runtime)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import NEW_ENV, case_path
from tests.fakes.reducing_runtime import fake_case
from tvmrepro.cases import load_case_file
from tvmrepro.environments import Environment
from tvmrepro.results import Result
from tvmrepro.settings import Settings
from worker.narrowing.reduction import Options, Reducer
from worker.runtimes.local import LocalRuntime

pytestmark = pytest.mark.tvm


class RecordingReducer(Reducer):
    """Notes whether each run took a sandbox started ahead of it."""

    warm: list[bool]

    def _run(self, source: str, passes: list[Any]) -> Result:
        result = super()._run(source, passes)
        self.warm.append(bool(result.isolation.get("warm")))
        return result


def test_a_batch_of_candidates_takes_sandboxes_reserved_for_it_together(
        settings: Settings, tvm_envs: dict[str, Environment]) -> None:
    env = tvm_envs[NEW_ENV]
    # No warm pool: a run is warm only if the batch reserved its sandbox.
    runtime = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 0}))
    case = fake_case()
    reducer = RecordingReducer(case, Options(env=env, variant="v", workers=2),  # type: ignore[arg-type]
                               runtime)
    reducer.warm = []
    passes = reducer.state.passes
    try:
        reducer.first_holding([(reducer.state.source, passes[:1]),
                               (reducer.state.source, passes[:2])])
        assert reducer.warm == [True, True]
        assert runtime.warm.reserved.waiting and not any(
            runtime.warm.reserved.waiting.values())  # each reserved sandbox was taken, none left
        # A batch already judged runs nothing and reserves nothing.
        reducer.first_holding([(reducer.state.source, passes[:1])])
        assert reducer.warm == [True, True] and not any(runtime.warm.reserved.waiting.values())
    finally:
        runtime.close()


def test_with_the_commands_zygote_no_run_or_check_of_a_reduction_imports_tvm(
        settings: Settings, tvm_envs: dict[str, Environment],
        monkeypatch: pytest.MonkeyPatch) -> None:
    env = tvm_envs[NEW_ENV]
    runtime = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 0}))
    cold: list[str] = []  # sandboxes that imported TVM themselves
    start = runtime.start
    monkeypatch.setattr(runtime, "start", lambda env, limits: cold.append(env.id) or start(env, limits))
    # status:ok: the fake module runs fine on real TVM, and so "shows the bug".
    reducer = RecordingReducer(fake_case(), Options(env=env, variant="v", oracle="status:ok"),  # type: ignore[arg-type]
                               runtime)
    reducer.warm = []
    try:
        runtime.start_zygotes([env])
        reducer.baseline()
        assert reducer.check([reducer.state.source], reducer.state.module)[0]["ok"]
        passes = reducer.state.passes
        assert reducer.first_holding([(reducer.state.source, passes[:1]),
                                      (reducer.state.source, passes[:2])]) == 0
        assert reducer.warm == [True, True, True] and cold == []
        assert runtime.zygotes is not None and list(runtime.zygotes.running) == [env.id]
    finally:
        runtime.close()


class JudgedResults(Reducer):
    """Keeps every result its oracle judged (a candidate's, run where it was checked)."""

    judged: list[Result]

    def _shows_bug(self, result: Result) -> bool:
        self.judged.append(result)
        return super()._shows_bug(result)


def test_a_candidate_checked_and_run_in_one_sandbox_reads_as_its_check_then_its_run(
        tvm_envs: dict[str, Environment], warm_runtime: LocalRuntime) -> None:
    case, env = load_case_file(case_path("tvm-17357/case.json")), tvm_envs[NEW_ENV]
    # The reference way: a check (the module printed back), then a run of the printed text.
    apart = JudgedResults(case, Options(env=env, variant="fusetir-once"), warm_runtime)
    apart.baseline()
    verdict = apart.check([case.source], case.module)[0]  # type: ignore[list-item]
    assert verdict["ok"] and verdict["source"] != case.source, verdict
    reference = apart._run(verdict["source"], apart.state.passes)
    # Candidate mode: the same check and the same run, in one sandbox.
    together = JudgedResults(case, Options(env=env, variant="fusetir-once"), warm_runtime)
    together.judged, together.reference = [], apart.reference
    together._candidate(case.source, case.source, together.state.passes)  # type: ignore[arg-type]
    assert together.verdicts[(case.source, case.module)] == verdict
    assert (together.state.checks, together.state.runs) == (1, 1)
    [result] = together.judged
    same = ("status", "stage", "signature", "error_type", "rewrites", "reproducer")
    assert {k: getattr(result, k) for k in same} == {k: getattr(reference, k) for k in same}
    assert [p.name for p in result.passes] == [p.name for p in reference.passes]
    assert result.status == "error" and result.stage == "vm_init", result.message
    # A candidate that is the module as it is now, or that does not parse, is checked only.
    together.state.source = verdict["source"]
    broken = case.source.replace("@I.ir_module", "@I.ir_module\n@not_defined_here")  # type: ignore[union-attr]
    for source in (verdict["source"], broken):
        together._candidate(source, verdict["source"], together.state.passes)
    assert together.state.runs == 1 and len(together.judged) == 1
    assert not together.verdicts[(broken, case.module)]["ok"]
