"""Reduce the ONNX graph of a report whose failure is in TVM's ONNX importer (stage `frontend`).

There is no module to reduce: the importer never returned one. The graph is reduced instead,
in the frontend flavour's sandboxes (the harness's onnx_graph.py does every edit; onnx is not
installed here):
1. the script runs once in the harness's `onnx_capture` mode: its result is the reference,
   and the ModelProto it gave `from_onnx` (the last one) is what is reduced;
2. the nodes, by ddmin (worker/narrowing/ddmin.py) over the original graph's node indices:
   each configuration is the graph with the other nodes dropped and rewired, all of one
   round judged in one sandbox (`onnx_candidates` mode);
3. the details: each graph input's static dimensions made 1, and graph outputs dropped (one
   kept), while that holds;
4. the graph left is written as an `onnx.helper` script (a script case) that is run as any
   report is, and must give the reference's failure again (`reproduces`).
A candidate holds where its import fails as the script did: the project's `signature` oracle
(tvmrepro/jobs/oracles.py) says so against the reference, and its status, stage, error type
and message are the reference's.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tvmrepro.cases import Case, parse_case
from tvmrepro.environments import Environment
from tvmrepro.errors import BadInput
from tvmrepro.frontends import needs_frontends
from tvmrepro.jobs.oracles import Verdict, judge, parse_oracle
from tvmrepro.results import Result
from worker.narrowing.ddmin import ddmin
from worker.runner import assemble_result, harness_case, oracle_view, run_variant
from worker.runtimes.base import Runtime, SandboxJob
from worker.runtimes.events import Event

FRONTEND_STAGE = "frontend"
COMPARED = ("status", "stage", "error_type", "message")
Log = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


class NotAnImportFailure(BadInput):
    """The script does not fail in the importer (or gives it no ModelProto): no graph to
    reduce; a module-mode reduction may still apply."""


@dataclass
class GraphReduction:
    """What a graph's reduction found: the script, its case, the sizes before and after."""

    script: str
    case: Case
    reference: Result
    rerun: Result
    before: dict[str, Any]
    after: dict[str, Any]
    sandboxes: int
    candidates: int
    seconds: float
    log: list[str] = field(default_factory=list)

    @property
    def reproduces(self) -> bool:
        return same_failure(oracle_view(self.rerun), self.reference)

    def answer(self) -> dict[str, Any]:
        """The --json answer."""
        return {"kind": "onnx_graph", "script": self.script, "environment": self.rerun.environment,
                "signature": self.reference.signature, "stage": self.reference.stage,
                "before": self.before, "after": self.after, "reproduces": self.reproduces,
                "rerun": {key: getattr(self.rerun, key) for key in (*COMPARED, "signature")},
                "sandboxes": self.sandboxes, "candidates": self.candidates,
                "seconds": self.seconds, "log": self.log}


def same_failure(fields: dict[str, Any], reference: Result) -> bool:
    """Whether a run (or a candidate's import) failed as the reference did: the signature
    oracle's verdict, and the same status, stage, error type and message."""
    wanted = oracle_view(reference)
    if judge(parse_oracle("signature"), fields, wanted) is not Verdict.BAD:
        return False
    return all(fields.get(key) == wanted.get(key) for key in COMPARED)


def of_kind(events: list[Event], kind: str) -> list[dict[str, Any]]:
    """The events of one kind, as plain dicts (the graph's events carry fields of their own)."""
    return [dict(e) for e in events if e["event"] == kind]


def imports_onnx(case: Case) -> bool:
    """Whether a case is a script that may hand an ONNX model to `from_onnx`."""
    return case.script is not None and needs_frontends(case) and "from_onnx" in case.script


class GraphReducer:
    """The sandboxes of one graph reduction: the capture, the rounds of candidates, the rerun."""

    def __init__(self, script: Case, env: Environment, runtime: Runtime,
                 budget_s: float = 600.0, log: Log = _quiet, job_id: str = "local") -> None:
        self.script, self.env, self.runtime, self.job_id = script, env, runtime, job_id
        self.deadline = time.monotonic() + budget_s
        self.say = log
        self.lines: list[str] = []
        self.sandboxes = self.candidates = 0
        self.reference: Result | None = None

    def _log(self, line: str) -> None:
        self.lines.append(line)
        self.say(line)

    def _execute(self, harness: dict[str, Any]) -> tuple[SandboxJob, list[Event], Result]:
        env = self.env.with_frontends()
        data = harness_case(self.script, env)
        data["harness"] = harness
        job = SandboxJob(run_id=uuid.uuid4().hex, job_id=self.job_id, env=env, case=data,
                         variant=self.script.variant_names[0])
        self.sandboxes += 1
        execution = self.runtime.execute(job)
        return job, execution.events, assemble_result(job, execution)

    def capture(self) -> str:
        """The script's run (the reference) and the model it gave `from_onnx` (base64)."""
        _, events, result = self._execute({"mode": "onnx_capture"})
        self.reference = result
        models = of_kind(events, "onnx_model")
        if result.stage != FRONTEND_STAGE or result.status.value not in ("error", "crash"):
            raise NotAnImportFailure("CASE", f"the script fails at {result.stage} ({result.status.value}),"
                                   " not in the importer: its graph is not what to reduce")
        if not models:
            raise NotAnImportFailure("CASE", "the script gave from_onnx no ModelProto to reduce")
        self._log(f"captured: {models[-1]['nodes']} nodes; fails at {result.stage}: "
                  f"{result.signature}")
        return str(models[-1]["model"])

    def round(self, model: str, edits: list[dict[str, Any]]) -> tuple[dict[str, Any],
                                                                       list[dict[str, Any]]]:
        """The model described, and each edit's candidate (its fields, model and description),
        judged in one sandbox; a candidate the sandbox did not reach is not holding."""
        if time.monotonic() > self.deadline:
            raise TimeoutError("the time budget is spent")
        _, events, _ = self._execute({"mode": "onnx_candidates", "model": model, "edits": edits})
        described = next(iter(of_kind(events, "onnx_graph")), None)
        if described is None:
            raise BadInput("CASE", "the graph could not be read in the sandbox")
        found = {e["index"]: e for e in of_kind(events, "onnx_candidate")}
        self.candidates += len(edits)
        return described, [found.get(i, {"fields": {"status": "crash"}}) for i in range(len(edits))]

    def holds(self, candidate: dict[str, Any]) -> bool:
        assert self.reference is not None
        return candidate.get("model") is not None and \
            same_failure(candidate.get("fields") or {}, self.reference)

    def nodes(self, model: str, count: int) -> str:
        """ddmin over the original graph's node indices; the smallest graph found (base64)."""
        kept: dict[tuple[int, ...], str] = {}

        def first_holding(configs: list[list[int]]) -> int | None:
            edits = [{"drop": sorted(set(range(count)) - set(c))} for c in configs]
            _, candidates = self.round(model, edits)
            for index, (config, candidate) in enumerate(zip(configs, candidates, strict=True)):
                if self.holds(candidate):
                    kept[tuple(config)] = candidate["model"]
                    self._log(f"nodes: {len(config)} of {count} hold")
                    return index
            return None

        left = ddmin(list(range(count)), first_holding)
        return kept.get(tuple(left), model)

    def details(self, model: str) -> tuple[str, dict[str, Any]]:
        """Each graph input's static dimensions made 1, and graph outputs dropped (one at
        least kept), while that holds; the model left, described."""
        while True:
            described, _ = self.round(model, [])
            edits = [{"ones": n} for n, dims in described["shapes"].items()
                     if any(d is not None and d > 1 for d in dims)]
            if len(described["outputs"]) > 1:
                edits += [{"unoutput": n} for n in described["outputs"]]
            _, candidates = self.round(model, edits) if edits else (described, [])
            holding = next(((e, c) for e, c in zip(edits, candidates, strict=True)
                            if self.holds(c)), None)
            if holding is None:
                return model, described
            self._log(f"details: {holding[0]} holds")
            model = holding[1]["model"]

    def rerun(self, script: str) -> tuple[Case, Result]:
        """The reduced graph's script as a script case, run as any report is."""
        case = parse_case({"title": f"{self.script.title or 'report'} (ONNX graph reduced)",
                           "script": script, "timeout_s": self.script.timeout_s,
                           "memory_mb": self.script.memory_mb})
        self.sandboxes += 1
        return case, run_variant(case, case.variant_names[0], self.env, self.runtime,
                                 job_id=self.job_id)


def reduce_graph(script: Case, env: Environment, runtime: Runtime, budget_s: float = 600.0,
                 log: Log = _quiet) -> GraphReduction:
    """The whole reduction of a script whose failure is in `from_onnx` (see the module)."""
    started = time.monotonic()
    reducer = GraphReducer(script, env, runtime, budget_s, log)
    original = reducer.capture()
    first, _ = reducer.round(original, [])
    model = reducer.nodes(original, first["nodes"])
    model, last = reducer.details(model)
    case, rerun = reducer.rerun(last["script"])
    assert reducer.reference is not None
    again = same_failure(oracle_view(rerun), reducer.reference)
    reducer._log(f"nodes {first['nodes']} -> {last['nodes']}; the script "
                 f"{'reproduces' if again else 'does not reproduce'}")
    return GraphReduction(
        script=last["script"], case=case, reference=reducer.reference, rerun=rerun,
        before={"nodes": first["nodes"], "ops": first["ops"], "shapes": first["shapes"]},
        after={"nodes": last["nodes"], "ops": last["ops"], "shapes": last["shapes"]},
        sandboxes=reducer.sandboxes, candidates=reducer.candidates,
        seconds=round(time.monotonic() - started, 2), log=reducer.lines)
