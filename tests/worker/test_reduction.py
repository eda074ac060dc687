"""The reducer without TVM: ddmin, counting lines, and the whole driver over a fake runtime."""

from __future__ import annotations

import threading
import time

import pytest

from tests.fakes.reducing_runtime import FAKE_MODULE, FakeReducingRuntime, fake_case
from tvmrepro.cases import parse_case
from tvmrepro.environments import default_catalog
from worker.narrowing.ddmin import ddmin
from worker.narrowing.reduction import Options, Reducer, reduce_case, source_lines
from worker.runtimes.base import Execution, SandboxJob


def first_holding_of(predicate):  # type: ignore[no-untyped-def]
    """A `first_holding` that records every configuration it was asked about."""
    asked: list[list[str]] = []

    def first_holding(configs: list[list[str]]) -> int | None:
        asked.extend(configs)
        return next((i for i, c in enumerate(configs) if predicate(c)), None)

    return first_holding, asked


def test_ddmin_keeps_exactly_the_items_the_failure_needs() -> None:
    passes = ["FuseTIR", "LambdaLift", "Normalize", "AllocateWorkspace", "DeadCodeElimination"]
    first, asked = first_holding_of(lambda c: "LambdaLift" in c and "AllocateWorkspace" in c)
    assert ddmin(passes, first) == ["LambdaLift", "AllocateWorkspace"]
    assert all(len(c) < len(passes) for c in asked)


def test_ddmin_keeps_order_and_may_end_empty() -> None:
    first, _asked = first_holding_of(lambda c: True)
    assert ddmin(["A", "B", "C"], first) == []
    first, _asked = first_holding_of(lambda c: c[-1:] == ["C"] and "A" in c)
    assert ddmin(["A", "B", "C"], first) == ["A", "C"]


def test_ddmin_of_a_list_that_needs_everything_is_the_list() -> None:
    items = ["A", "B", "C", "D"]
    first, _asked = first_holding_of(lambda c: c == items)
    assert ddmin(items, first) == items


def test_source_lines_skip_blank_lines() -> None:
    assert source_lines("a\n\n  \nb\n") == 2


# The reducer end to end over a fake runtime: a test of its orchestration (the module's big cuts,
# the passes, then its other edits; the oracle; the budget), not of TVM. The real-TVM
# reductions are in tests/cli/test_extract_reduce.py.


def checked_sources(job: SandboxJob) -> list[str]:
    """The sources a harness call checked (check or candidate mode), in order."""
    harness = job.case.get("harness") or {}
    return harness.get("sources") or ([harness["source"]] if "source" in harness else [])


def ran_source(job: SandboxJob) -> str | None:
    """The module a call ran: a run's, or a candidate's that checked ok and was not current."""
    harness = job.case.get("harness")
    if not harness:
        return job.case["source"]
    if harness["mode"] == "candidate" and FakeReducingRuntime.checked(0, harness["source"])["ok"] \
            and harness["source"] != harness["current"]:
        return harness["source"]
    return None


def test_reducer_keeps_what_the_bug_needs_and_says_what_it_did() -> None:
    runtime = FakeReducingRuntime()
    env = default_catalog().environments[0]
    events: list[dict] = []
    found = reduce_case(fake_case(), Options(env=env, variant="v"), runtime,  # type: ignore[arg-type]
                        progress=events.append).model_dump(mode="json")
    source = found["case"]["source"]
    assert [p["name"] for p in found["case"]["variants"][0]["passes"]] == ["FuseOps"]
    assert "def unrelated" not in source and "R.multiply" not in source
    assert "R.nn.softmax" in source and "(1, 1)" in source
    assert found["before"] == {"passes": 4, "lines": source_lines(FAKE_MODULE)}
    assert found["after"]["lines"] < found["before"]["lines"] and found["after"]["passes"] == 1
    assert found["signature"] == "E: bug" and found["finished"] is True
    assert found["steps"] == len(found["log"]) - 1  # the log's first line is the reference
    assert any(e["kind"] == "try" for e in events) and events[-1]["kind"] == "step"
    # Every module that ran was checked by the harness, first or in the same sandbox.
    checked = {s for j in runtime.jobs for s in checked_sources(j)}
    ran = [s for j in runtime.jobs if (s := ran_source(j)) is not None]
    assert all(s in checked for s in ran[2:])  # the original and its printed form come first
    assert any(j.case.get("harness", {}).get("mode") == "candidate" and ran_source(j)
               for j in runtime.jobs)  # edits that ran were run where they were checked


def test_a_case_that_does_not_fail_is_refused() -> None:
    case = parse_case({"source": FAKE_MODULE, "variants": [{"name": "v", "passes": ["Normalize"]}]})
    env = default_catalog().environments[0]
    with pytest.raises(Exception, match="does not show the bug"):
        reduce_case(case, Options(env=env, variant="v"), FakeReducingRuntime())  # type: ignore[arg-type]


def test_a_spent_budget_returns_the_best_so_far() -> None:
    env = default_catalog().environments[0]
    found = reduce_case(fake_case(), Options(env=env, variant="v", budget_s=0),
                        FakeReducingRuntime()).model_dump(mode="json")  # type: ignore[arg-type]
    assert found["finished"] is False
    assert found["after"] == found["before"]


class SlowFakeRuntime(FakeReducingRuntime):
    """A fake whose runs take a while: two candidates at once overlap."""

    def execute(self, job: SandboxJob) -> Execution:
        time.sleep(0.05)
        return super().execute(job)


def two_at_once(runtime: FakeReducingRuntime) -> tuple[Reducer, str]:
    """A reducer judging two candidates at once, its baseline run, and its source."""
    env = default_catalog().environments[0]
    reducer = Reducer(fake_case(), Options(env=env, variant="v", workers=2), runtime)  # type: ignore[arg-type]
    reducer.baseline()
    return reducer, reducer.state.source


def test_a_candidate_whose_content_was_judged_is_not_run_again() -> None:
    runtime = SlowFakeRuntime()
    reducer, source = two_at_once(runtime)
    # The same content twice in one batch (two at once), then again in a later call.
    configs = [(source, ["Normalize"]), (source, ["Normalize"]), (source, ["FoldConstant"]),
               (source, ["FuseOps"])]
    assert reducer.first_holding(configs) == 3
    assert reducer.first_holding([(source, ["FoldConstant"]), (source, ["FuseOps"])]) == 1
    ran = [[p["name"] for p in job.case["variants"][0]["passes"]] for job in runtime.jobs[1:]]
    assert sorted(ran) == [["FoldConstant"], ["FuseOps"], ["Normalize"]]
    assert reducer.state.runs == 1 + 3


def test_nothing_after_a_candidate_known_to_hold_is_run() -> None:
    runtime = FakeReducingRuntime()
    reducer, source = two_at_once(runtime)
    assert reducer.first_holding([(source, ["FuseOps"])]) == 0
    assert reducer.first_holding([(source, ["FuseOps"]), (source, ["Normalize"])]) == 0
    assert len(runtime.jobs) == 1 + 1


class MeetingFakeRuntime(FakeReducingRuntime):
    """A fake whose checks each wait for another check to be running too (a barrier of two):
    checks made one after the other time out instead."""

    def __init__(self) -> None:
        super().__init__()
        self.meeting = threading.Barrier(2, timeout=10)

    def execute(self, job: SandboxJob) -> Execution:
        if job.case.get("harness"):
            self.meeting.wait()
        return super().execute(job)


def test_a_batch_of_checks_is_split_over_the_workers_and_checked_at_once() -> None:
    runtime = MeetingFakeRuntime()
    reducer, source = two_at_once(runtime)
    sources = [source.replace("(8, 8)", f"({n}, 8)") for n in range(1, 6)]
    verdicts = reducer.check(sources + sources[:1], reducer.state.module)
    checks = [j.case["harness"]["sources"] for j in runtime.jobs if j.case.get("harness")]
    # Five fresh sources over two sandboxes at once, in order; the repeat is not checked again.
    assert sorted(checks) == sorted([sources[:3], sources[3:]]) and reducer.state.checks == 2
    assert [v["source"] for v in verdicts] == sources + sources[:1]


def test_edits_after_the_first_that_holds_are_not_started_once_it_is_known() -> None:
    from worker.narrowing.candidates import Candidate

    runtime = FakeReducingRuntime()
    reducer, source = two_at_once(runtime)
    reducer.state.passes = [{"name": "FuseOps"}]
    runtime.jobs.clear()
    # The first edit drops the bug (checked, runs ok), the second keeps it, four more follow.
    keeps = source.replace("        a: R.Tensor((8, 8), dtype=\"float32\") = R.add(x, x)\n", "")
    drops = source.replace("R.nn.softmax(x)", "R.add(x, x)")
    shapes = [source.replace("(8, 8)", f"({n}, 8)") for n in range(1, 5)]
    batch = [Candidate("drop the bug", drops), Candidate("drop a", keeps)] + [
        Candidate(f"shape {n}", shape) for n, shape in enumerate(shapes, 1)]
    taken = reducer._try(batch)
    assert taken is not None and taken.what == "drop a"
    reducer.threads.shutdown()  # type: ignore[union-attr]  (the third edit may still run)
    checked = [s for j in runtime.jobs for s in checked_sources(j)]
    # Two at a time, in order: the third may have started when the first was judged, before
    # the second was; the last three never start.
    assert drops in checked and keeps in checked and not set(checked) & set(shapes[1:])
    assert set(checked) <= {drops, keeps, shapes[0]} and len(checked) == len(set(checked))
    # Each edit was checked and run in one sandbox of its own.
    assert len(runtime.jobs) == len(checked) and {ran_source(j) for j in runtime.jobs} >= {
        drops, keeps}
    assert reducer.state.source == keeps


class SlowFirstRuntime(FakeReducingRuntime):
    """A fake whose sandbox for the first edit waits until the third one has run."""

    def __init__(self, first: str, third: str) -> None:
        super().__init__()
        self.first, self.third_ran = first, threading.Event()
        self.third = third

    def execute(self, job: SandboxJob) -> Execution:
        sources = checked_sources(job)
        if sources == [self.first]:
            assert self.third_ran.wait(10), "the third edit did not start while the first ran"
        execution = super().execute(job)
        if sources == [self.third]:
            self.third_ran.set()
        return execution


def test_a_free_sandbox_takes_the_next_edit_without_waiting_for_the_others() -> None:
    from worker.narrowing.candidates import Candidate

    _unused, source = two_at_once(FakeReducingRuntime())
    slow, third = (source.replace("(8, 8)", f"({n}, 8)") for n in (1, 3))
    drops = source.replace("R.nn.softmax(x)", "R.add(x, x)")
    runtime = SlowFirstRuntime(slow, third)
    reducer, _ = two_at_once(runtime)
    reducer.state.passes = [{"name": "FuseOps"}]
    # The first edit's sandbox is still busy when the second's is done and does not hold: the
    # third starts then (it waited for the first, with a barrier of pairs). The first holds.
    batch = [Candidate("shape 1", slow), Candidate("drop the bug", drops),
             Candidate("shape 3", third)]
    taken = reducer._try(batch)
    assert taken is not None and taken.what == "shape 1" and reducer.state.source == slow


def test_a_reduction_cancelled_after_a_step_keeps_its_best_case_and_says_cancelled() -> None:
    from worker.narrowing.reduction import CANCELLED, Cancelled

    runtime = FakeReducingRuntime()
    env = default_catalog().environments[0]
    steps: list[str] = []

    def progress(event: dict) -> None:  # the worker's Progress, for a job cancelled at step 2
        if event.get("kind") == "step":
            steps.append(event["what"])
            if len(steps) == 2:
                raise Cancelled

    found = reduce_case(fake_case(), Options(env=env, variant="v"), runtime,  # type: ignore[arg-type]
                        progress=progress)
    # Stopped there, its best case kept (the first step's), said to be cancelled; a cancel told
    # again (its progress told once more) used to end it with no case at all.
    assert not found.finished and found.log[-1] == CANCELLED and found.steps == 1
    assert found.log[:-1] == steps[:2] and steps[1].startswith("drop function unrelated")
    assert found.after.lines == int(steps[1].split(" -> ")[-1].split()[0])  # "...: 12 -> 10 lines"


def test_a_cancelled_reduction_starts_no_sandbox_after_the_cancel() -> None:
    from worker.narrowing.reduction import CANCELLED

    runtime = FakeReducingRuntime()
    env = default_catalog().environments[0]
    # The job is cancelled once six sandboxes have run, between two progress writes: a
    # reduction used to notice it only when it next wrote progress, running on till then.
    options = Options(env=env, variant="v", workers=1, cancelled=lambda: len(runtime.jobs) >= 6)
    found = reduce_case(fake_case(), options, runtime)  # type: ignore[arg-type]
    assert len(runtime.jobs) == 6
    assert not found.finished and found.log[-1] == CANCELLED
