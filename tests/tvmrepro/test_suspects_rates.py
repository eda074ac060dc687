"""How often suspects find the PR behind a real change, over every stored real transition
(real_transitions.json: docs/measurements.md's table), and the evidence that got it there.

The rates are floors held at what the ranking reaches: a change to the weights or the evidence
that loses a true PR's first place or its top three fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO
from tests.tvmrepro.transitions import STORED, case_of, ranked_all, rates, suspects_of
from tvmrepro.history import Commit, FileChange
from tvmrepro.jobs.bisect.suspects import case_terms, evidence, foreign_names, frames_of, inert

TOP1, TOP3 = 9, 11  # of the 11 stored transitions


def stored(case: str, after: str) -> dict:
    return next(s for s in STORED["transitions"] if (s["case"], s["after"]) == (case, after))


def test_the_true_pr_is_first_or_in_the_top_three_as_often_as_measured() -> None:
    first, top3, total = rates(ranked_all())
    assert total >= 10
    assert first >= TOP1 and top3 >= TOP3, (first, top3)
    assert top3 / total >= 0.9 and first / total >= 0.7


def test_the_bench_prints_the_same_ranks_and_rates() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "suspect_ranks.py"), "--json"],
                          capture_output=True, text=True, check=True, timeout=120)
    shown = json.loads(proc.stdout)
    assert shown["top1"][0] >= TOP1 and shown["top3"] == [TOP3, len(STORED["transitions"])]
    ranks = {(t["case"], t["after"]): t["best"] for t in shown["transitions"]}
    assert ranks[("frontend/onnx-topk-int64-indices", "tvm-0.26.0rc0-cpu")] == 2


def test_a_reworded_error_points_at_the_commit_that_edited_its_line() -> None:
    # 0.25.x words the int32 overflow with `dtype.bits()`, 0.26 with `bits`: both fail, so
    # the change is the message's, and only #19875 edited a line with all its words.
    change = suspects_of(stored("tirx-int32-literal-overflow-message", "tvm-0.26.0rc0-cpu"))
    top = change["suspects"][0]
    assert top["pr"] == 19875
    assert "changes lines with the words of the error (Literal value exceeds maximum): the " \
        "words of the error (the only commit)" in top["reasons"]
    assert top["reasons"][-1] == "weighed down x0.41: it changes 491 files"
    # Where the other side passes, the message's line is no evidence at all.
    entry = stored("tirx-int32-literal-overflow-message", "tvm-0.26.0rc0-cpu")
    clues = evidence("fix", entry["failing"], case_of(entry), "build")
    assert clues.message_words == ("Literal", "value", "exceeds", "maximum")
    assert clues.check_names == ("value", "dtype", "bits")  # the whole `(a vs. b)` condition
    assert not clues.reworded


def test_a_frontend_script_names_the_model_s_operators_not_the_library_s_calls() -> None:
    source = (REPO / "tests/cases/frontend/onnx-topk-int64-indices/report.py").read_text()
    assert {"onnx", "helper", "TensorProto"} <= foreign_names(source)
    # helper.make_node, TensorProto.INT64 are onnx's; "TopK" is an operator of the model.
    assert case_terms(source) == ["frontend", "onnx", "Constant", "TopK", "Div"]
    change = suspects_of(stored("frontend/onnx-topk-int64-indices", "tvm-0.26.0rc0-cpu"))
    fix = next(s for s in change["suspects"] if s["pr"] == 19973)
    assert "adds or changes the test test_topk, which names TopK: a test of TopK " \
        "(as do 6 other commits)" in fix["reasons"]
    assert any(r.startswith("changes python/tvm/relax/frontend/onnx/onnx_frontend.py: the "
                            "Python frame's file") for r in fix["reasons"])


def test_a_commit_that_changes_only_tests_is_never_a_suspect() -> None:
    change = suspects_of(stored("frontend/onnx-topk-int64-indices", "tvm-0.26.0rc0-cpu"))
    # #19880 changes tests/python/relax/test_frontend_onnx.py alone
    assert 19880 not in [s["pr"] for s in change["suspects"]]
    only_tests = Commit("a" * 40, (), "", "[ONNX] tests", 1,
                        (FileChange("tests/python/relax/test_frontend_onnx.py", 9, 2),
                         FileChange("docs/how_to.rst", 1, 0)))
    assert inert(only_tests)
    assert not inert(Commit("b" * 40, (), "", "x", 2, (
        FileChange("tests/python/a.py", 1, 0), FileChange("src/relax/op/op.cc", 1, 0))))
    assert not inert(Commit("c" * 40, (), "", "nothing known", 3))


def test_frame_files_are_the_repository_s_paths_and_python_frames_count() -> None:
    log = stored("frontend/onnx-topk-int64-indices", "tvm-0.26.0rc0-cpu")["failing"]["log"]
    frames = frames_of(log["stderr"], python=True)
    assert frames[0] == ("src/relax/op/op_common.h", "InferBinaryArithOpOutDtype")  # no `..`
    assert ("python/tvm/relax/frontend/onnx/onnx_frontend.py", "_construct_nodes") in frames
    assert all(not (path or "").startswith("python/") for path, _ in frames_of(log["stderr"]))


def test_a_crash_s_native_frames_are_its_stack() -> None:
    from worker.crashes import crash_frames

    # The signal handler's backtrace is innermost first, unlike a Python traceback.
    log = ('!!!!!!! Segfault encountered !!!!!!!\n'
           '  File "<unknown>", line 0, in tvm::ffi::ToJSONGraph(tvm::ffi::Any const&)\n'
           '  File "<unknown>", line 0, in tvm::ffi::SaveJSON(tvm::ffi::Any const&)\n'
           '  File "<unknown>", line 0, in TVMFFIFunctionCall\n')
    native = crash_frames(log)
    crash = {"status": "crash", "signature_frame": native[0], "native_frames": native,
             "message": f"the process was killed by SIGSEGV in {native[0]}",
             "log": {"stderr": log}}
    clues = evidence("regression", crash, {"script": "import tvm\n"}, None)
    assert (clues.frame, clues.stack[:1]) == ("ToJSONGraph", ((None, "SaveJSON"),))
