"""The reducer's candidate batches start their sandboxes together (real TVM, local runtime)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import NEW_ENV
from tests.worker.test_reduction import fake_case
from tvmrepro.environments import Environment
from tvmrepro.results import Result
from tvmrepro.settings import Settings
from worker.reduction import Options, Reducer
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
        assert runtime.reserved.waiting and not any(
            runtime.reserved.waiting.values())  # each reserved sandbox was taken, none left
        # A batch already judged runs nothing and reserves nothing.
        reducer.first_holding([(reducer.state.source, passes[:1])])
        assert reducer.warm == [True, True] and not any(runtime.reserved.waiting.values())
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
