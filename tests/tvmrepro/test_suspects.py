"""Suspects of real release transitions, ranked with the shipped commit index (no TVM runs).

tests/tvmrepro/real_transitions.json holds each real behaviour change the bisection tests find
(tests/cases/*/NOTES.md trace its PR), the commits of the releases' wheels, and the stored
first run of the failing side. README, "Suspects", has the table these tests hold to.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.tvmrepro.job_rows import CAP, never_gone
from tests.tvmrepro.transitions import INDEX, STORED, bisected, suspects_of, true_rank
from tvmrepro.jobs.bisect.suspects import case_terms, evidence, frames_of, short_function

# case, transition -> the true PR's rank (docs/measurements.md's table): first, except where
# said.
EXPECTED_RANK = {
    ("relax-max-0d-tensor", "tvm-0.25.0rc1-cpu"): 1,
    ("relax-prod-zero-extent-axis", "tvm-0.26.0rc0-cpu"): 1,
    ("relax-adaptive-avg-pool2d-nested-init", "tvm-0.27.0rc0-cpu"): 1,
    ("tirx-specialize-decl-buffer-alias", "tvm-0.26.0rc0-cpu"): 1,  # a 266-file refactor
    ("tirx-specialize-decl-buffer-alias", "tvm-0.27.0rc0-cpu"): 1,
    ("relax-fusetir-decl-buffer-alias", "tvm-0.26.0rc0-cpu"): 3,  # no single named fix
    ("relax-attention-symbolic-batch", "tvm-0.25.0rc1-cpu"): 1,
    ("relax-add-dtype-mismatch-message", "tvm-0.25.0rc1-cpu"): 1,  # reworded (signature)
    ("relax-add-dtype-mismatch-message", "tvm-0.26.0rc0-cpu"): 1,  # reworded (regex)
    ("tirx-int32-literal-overflow-message", "tvm-0.26.0rc0-cpu"): 1,  # reworded (regex)
    ("frontend/onnx-topk-int64-indices", "tvm-0.26.0rc0-cpu"): 2,  # after the Div fix
}


@pytest.mark.parametrize("stored", STORED["transitions"],
                         ids=lambda s: f"{s['case']}:{s['before']}->{s['after']}")
def test_the_true_pr_ranks_as_the_readme_says(stored: dict[str, Any]) -> None:
    change = suspects_of(stored)
    rank = true_rank(change, stored["true_prs"])
    assert rank == EXPECTED_RANK[(stored["case"], stored["after"])], \
        [(s["pr"], s["score"]) for s in change["suspects"]]
    assert rank is not None and rank <= 3
    suspects = change["suspects"]
    assert 1 <= len(suspects) <= 10
    assert [s["score"] for s in suspects] == sorted((s["score"] for s in suspects), reverse=True)
    assert all(0 < s["score"] <= 1 and s["reasons"] for s in suspects)
    assert all(s["url"] == f"https://github.com/apache/tvm/pull/{s['pr']}" for s in suspects)


def test_the_frame_and_the_check_are_reasons_of_a_fix() -> None:
    change = suspects_of(STORED["transitions"][0])
    top = change["suspects"][0]
    assert top["pr"] == 19683
    said = "\n".join(top["reasons"])
    assert "changes include/tvm/topi/reduction.h: the file of the failing frame CommReduce" in said
    assert "changes the function CommReduce" in said
    assert "adds or changes the test test_max_zero_dim, which names max" in said


def test_windows_follow_the_graph_and_say_what_is_missing() -> None:
    windows = {(s["case"], s["after"]): suspects_of(s)["window"] for s in STORED["transitions"]}
    release_branch = windows[("relax-max-0d-tensor", "tvm-0.25.0rc1-cpu")]
    assert (release_branch["commits"], release_branch["picked"]) == (89, 0)
    assert release_branch["compare_url"] == (
        "https://github.com/apache/tvm/compare/7e93b733bea2768ccaa02466dab0c3360c132110..."
        "c7ba0735a4f346c67b761e1fde38a68a60be8adb")
    # 0.25.0.post1 -> 0.26.0: main since the v0.25.0 branch point; 84 of them the 0.25 branch
    # already has as cherry-picks (CommReduce's fix among them: never a suspect there).
    main_window = windows[("relax-prod-zero-extent-axis", "tvm-0.26.0rc0-cpu")]
    assert (main_window["commits"], main_window["picked"], main_window["open_ended"]) == \
        (272, 84, False)
    newer = windows[("relax-adaptive-avg-pool2d-nested-init", "tvm-0.27.0rc0-cpu")]
    assert newer["open_ended"] is True and newer["commits"] == 35
    assert "fa3a688fb is newer than the history" in newer["missing"]
    assert newer["compare_url"].endswith("...fa3a688fb")


def test_a_cherry_picked_change_is_never_a_suspect_again() -> None:
    failing = dict(STORED["transitions"][0]["failing"], environment="tvm-0.25.0.post1-cpu",
                   tvm={"commit": STORED["commits"]["tvm-0.25.0.post1-cpu"]})
    stored = dict(STORED["transitions"][0], before="tvm-0.25.0.post1-cpu",
                  after="tvm-0.26.0rc0-cpu", failing=failing)
    change = suspects_of(stored)
    # main's e0678699f9 is in this window, but 0.25.0rc1 has it already as 977c1972ba
    assert change["window"]["picked"] == 84
    assert 19683 not in [s["pr"] for s in change["suspects"]]


def test_frames_come_from_the_backtrace_innermost_first() -> None:
    log = STORED["transitions"][3]["failing"]["log"]["stderr"]
    assert frames_of(log)[0] == ("src/tirx/transform/flatten_buffer.cc",
                                 "BufferFlattener::Lookup")
    assert short_function("const tvm::tirx::BufferFlattener::FlatInfo& tvm::tirx::BufferFlattener"
                          "::Lookup(const tvm::tirx::BufferVar&)") == "BufferFlattener::Lookup"
    assert short_function("tvm::te::Tensor tvm::topi::CommReduce(const tvm::te::Tensor&, "
                          "FReduce, bool)") == "CommReduce"


def test_a_case_says_what_it_calls_not_what_its_comments_say() -> None:
    source = ("import numpy as np\nfrom tvm.script import relax as R\n"
              "# before #20116 re-initialised the accumulator\n"
              "y = R.nn.adaptive_avg_pool2d(x, output_size=[2, 2])  # specialize\n"
              "z = np.testing.assert_allclose(y, 'R.prod')\nf = before.specialize({})\n")
    assert case_terms(source) == ["adaptive_avg_pool2d", "specialize"]


def test_a_wrong_result_has_no_frame_only_what_the_case_exercises() -> None:
    case = json.loads((REPO / "tests/cases/relax-prod-zero-extent-axis/case.json").read_text())
    clues = evidence("fix", None, case, "default-build")
    assert (clues.frame, clues.frame_file, clues.failing_pass) == (None, None, None)
    assert clues.terms == ("prod",)


def test_a_large_refactor_is_weighed_down_by_what_else_it_changed() -> None:
    change = suspects_of(STORED["transitions"][3])  # the regression: #20079, 266 files
    refactor = next(s for s in change["suspects"] if s["pr"] == 20079)
    assert refactor["reasons"][-1] == "weighed down x0.46: it changes 266 files"
    small = next(s for s in change["suspects"] if s["pr"] == 19873)  # five files
    assert not any(r.startswith("weighed down") for r in small["reasons"])
    # The same commit, suspected of a fix (FuseTIR's): a fix is seldom a refactor's by-product.
    fixing = suspects_of(STORED["transitions"][5])
    refactor = next(s for s in fixing["suspects"] if s["pr"] == 20079)
    assert refactor["reasons"][-1] == "weighed down x0.30: it changes 266 files"


def test_a_bisect_job_stores_its_windows_and_suspects(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The service's path: a bisect job's step, on a real store, with TVMREPRO_TVM_HISTORY."""
    import time
    import uuid

    from tvmrepro.api.views import Bisection
    from tvmrepro.cases import parse_case
    from tvmrepro.environments import default_catalog
    from tvmrepro.jobs.bisect import windows as bisect_suspects
    from tvmrepro.jobs.bisect.logic import make_options
    from tvmrepro.jobs.bisect.steps import advance, start
    from tvmrepro.results import Result
    from tvmrepro.store import Store
    from tvmrepro.store.rows import JobRow

    monkeypatch.setenv("TVMREPRO_TVM_HISTORY", str(INDEX))
    bisect_suspects._opened.cache_clear()
    stored = STORED["transitions"][0]
    case = parse_case(json.loads((REPO / "tests/cases" / stored["case"] / "case.json")
                                 .read_text()))
    catalog = default_catalog()
    options = make_options(case, [catalog.get(stored["before"]), catalog.get(stored["after"])],
                           bypass_cache=True)
    store = Store(f"sqlite:///{tmp_path / 'store.sqlite'}")
    store.create_schema()
    job = JobRow(id=uuid.uuid4().hex, kind="bisect", case=case.model_dump(mode="json"),
                 environments=options.environments, variants=[options.variant],
                 created_at=time.time())
    _, runs = bisected(stored)
    for run in start(store, job, case, options, catalog, CAP):
        store.claim(run.id, "h:1", 3, 5.0, never_gone)
        outcome = {"variant": run.variant, **runs[run.environment],
                   "environment": run.environment}
        assert store.finish(run.id, Result.model_validate(outcome))
    advance(store, job.id, catalog)
    found = (store.bisection(job.id) or {})["result"]
    store.dispose()
    shown = Bisection.model_validate(found).model_dump(mode="json")  # as the API answers it
    change = shown["transitions"][0]
    assert change["window"]["commits"] == 89
    assert [s["pr"] for s in change["suspects"]][:1] == [19683]
