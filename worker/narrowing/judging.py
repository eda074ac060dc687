"""Judge a reduction's candidates in sandboxes: each once, `workers` at a time, within a budget.

Everything that needs TVM runs in sandboxes through the runtime: a candidate
is a module-mode run with the case's limits, judged by the bisection oracles
(tvmrepro/jobs/oracles.py); a module edit is first checked by the harness (check
mode: parses, no less well formed than the case, printed back as canonical
TVMScript where this release's printing parses back), and an edit that is to
run is checked and run in one sandbox (candidate mode, harness/reduce_module.py).
A candidate whose content (module text and passes) was judged before is not
run again, nor twice in one batch; a module checked before is not checked again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tvmrepro.cases import Case, parse_case
from tvmrepro.environments import Environment
from tvmrepro.errors import BadInput, RuntimeFault
from tvmrepro.jobs.narrow.logic import DEFAULT_BUDGET_S, DEFAULT_ORACLE
from tvmrepro.jobs.oracles import Verdict, judge, parse_oracle
from tvmrepro.results import Result
from worker.narrowing.extract_steps import Checked, checked
from worker.runner import assemble_result, harness_case, oracle_view, run_variant
from worker.runtimes.base import Execution, Runtime, SandboxJob

DEFAULT_WORKERS = 2
DID_NOT_FINISH: Checked = {"ok": False, "reason": "the check of this module did not finish"}


class OutOfBudget(Exception):
    """The time budget is spent: stop with the best case so far."""


class Cancelled(OutOfBudget):
    """The job was cancelled: stop with the best case so far, said so."""


def never() -> bool:
    return False


def source_lines(source: str) -> int:
    """Lines of a module's source, blank lines not counted."""
    return sum(1 for line in source.splitlines() if line.strip())


def grows(text: str, current: str) -> bool:
    """Whether an edit, as TVM prints it back, is longer than the module it edits. No step of a
    reduction may be: printed back, a branch whose last value was replaced gets a binding more
    (`y = R.zeros(...)` becomes `y_then_1 = R.zeros(...)` then `y = y_then_1`), and the same
    edit would then hold again and again, the case growing by a line each time."""
    return source_lines(text) > source_lines(current)


def content_key(source: str, passes: list[Any]) -> tuple[str, str]:
    """What makes two candidates the same run: the module's text and the pass list."""
    return source, repr(passes)


@dataclass
class Options:
    """What a reduction was asked: environment, variant, oracle, budget, parallel sandboxes;
    `cancelled` says whether its job was cancelled (asked before every sandbox)."""

    env: Environment
    variant: str
    oracle: str = DEFAULT_ORACLE
    budget_s: float = DEFAULT_BUDGET_S
    workers: int = DEFAULT_WORKERS
    job_id: str = "local"
    cancelled: Callable[[], bool] = never


@dataclass
class State:
    """The best case so far and what it took."""

    source: str
    module: str
    passes: list[Any]
    steps: int = 0
    runs: int = 0
    checks: int = 0
    phase: str = "baseline"
    log: list[str] = field(default_factory=list)


class Judge:
    """The sandboxes, memos and budget of one reduction of one case variant in one
    environment; the search itself is the Reducer's (worker/narrowing/reduction.py)."""

    def __init__(self, case: Case, options: Options, runtime: Runtime) -> None:
        self.case, self.options, self.runtime = case, options, runtime
        self.oracle = parse_oracle(options.oracle)
        if self.oracle.kind == "output":
            raise BadInput("oracle", "reduce judges one environment; `output` needs a reference "
                                     "environment (use signature, failure, status:, regex:)")
        variant = case.variant(options.variant)
        if variant is None:
            raise BadInput("CASE", "reduce takes a module-mode case (extract a script first)")
        assert case.source is not None  # module mode
        self.state = State(case.source, case.module, [p.model_dump() for p in variant.passes])
        self.deadline = time.monotonic() + options.budget_s
        self.reference: Result | None = None  # the original run, once baseline ran it
        self.memo: dict[tuple[str, str], bool] = {}
        self.verdicts: dict[tuple[str, str], Checked] = {}
        self.well_formed = True  # the case's own verdict: no candidate may be less well formed

    def _case_with(self, source: str, passes: list[Any]) -> Case:
        data = self.case.model_dump(mode="json", exclude={"files"})
        data.update(source=source, module=self.state.module,
                    variants=[{"name": self.options.variant, "passes": passes}])
        if "MODULE_JSON" not in source:  # printed as TVMScript: the save_json text is not needed
            data["module_json"] = None
        # The case's files as they are, contents and all (checked once, not per candidate).
        return parse_case(data).model_copy(update={"files": self.case.files})

    def _run(self, source: str, passes: list[Any]) -> Result:
        return run_variant(self._case_with(source, passes), self.options.variant,
                           self.options.env, self.runtime, job_id=self.options.job_id)

    def holds(self, source: str, passes: list[Any]) -> bool:
        """Whether the oracle still says `bad` for this module and pass list (memoized: a
        candidate whose content was judged before is not run again)."""
        key = content_key(source, passes)
        if key not in self.memo:
            self._check_budget()
            self.state.runs += 1
            self.memo[key] = self._shows_bug(self._run(source, passes))
        return self.memo[key]

    def _shows_bug(self, result: Result) -> bool:
        reference = oracle_view(self.reference) if self.reference is not None else None
        return judge(self.oracle, oracle_view(result), reference) is Verdict.BAD

    def first_holding(self, configs: list[tuple[str, list[Any]]]) -> int | None:
        """Index of the first (source, passes) that holds; `workers` sandboxes at a time, each
        content run once (judged before, or twice in `configs`: its verdict is reused)."""
        width = max(1, self.options.workers)
        with ThreadPoolExecutor(max_workers=width) as pool:
            start = 0
            while start < len(configs):
                self._check_budget()
                end = self._batch_end(configs, start, width)
                fresh = list({content_key(*c): c for c in configs[start:end]
                              if content_key(*c) not in self.memo}.values())
                self._reserve(len(fresh))
                list(pool.map(lambda c: self.holds(*c), fresh))
                for index in range(start, end):
                    if self.memo[content_key(*configs[index])]:
                        return index
                start = end
        return None

    def _batch_end(self, configs: list[tuple[str, list[Any]]], start: int, width: int) -> int:
        """Where the batch from `start` ends: at `width` contents not judged yet (those judged
        and repeats come along, costing no run), or just after one known to hold (nothing after
        it need run)."""
        fresh: set[tuple[str, str]] = set()
        end = start
        while end < len(configs):
            key = content_key(*configs[end])
            if self.memo.get(key):
                return end + 1
            if key not in self.memo and key not in fresh:
                if len(fresh) == width:
                    break
                fresh.add(key)
            end += 1
        return end

    def _reserve(self, count: int) -> None:
        """Start the sandboxes of a batch's `count` runs at once, from this (long-lived) thread:
        their starts overlap."""
        if count:
            self.runtime.reserve(self.options.env, self.case.timeout_s, self.case.memory_mb,
                                 count=count)

    def _check_budget(self) -> None:
        """Before a sandbox: stop if the budget is spent or the job was cancelled."""
        if self.options.cancelled():
            raise Cancelled
        if time.monotonic() > self.deadline:
            raise OutOfBudget

    def check(self, sources: list[str], module: str) -> list[Checked]:
        """The harness's verdict on each source (memoized): parses and is well formed, and the
        module printed back. The sources are split over `workers` sandboxes checking at once."""
        fresh = [s for s in dict.fromkeys(sources) if (s, module) not in self.verdicts]
        width = min(max(1, self.options.workers), len(fresh))
        if width:
            size = -(-len(fresh) // width)
            parts = [fresh[k:k + size] for k in range(0, len(fresh), size)]
            self._reserve(len(parts))
            with ThreadPoolExecutor(max_workers=len(parts)) as pool:
                verdicts = [v for part in pool.map(lambda p: self._check(p, module), parts)
                            for v in part]
            for source, verdict in zip(fresh, verdicts, strict=True):
                self.verdicts[(source, module)] = verdict
        return [self.verdicts[(s, module)] for s in sources]

    def _check(self, sources: list[str], module: str) -> list[Checked]:
        verdicts: list[Checked] = []
        while len(verdicts) < len(sources):
            data = harness_case(self.case, self.options.env)
            data.update(module=module, harness={"mode": "check", "sources": sources[len(verdicts):]})
            verdicts += self._checked_in(*self._in_sandbox(data))
            if len(verdicts) < len(sources):  # the next source ended the process: not counted
                verdicts.append(DID_NOT_FINISH)
        return verdicts

    def _in_sandbox(self, data: dict[str, Any]) -> tuple[SandboxJob, Execution]:
        """One harness call that checks (check or candidate mode), within the budget."""
        self._check_budget()
        self.state.checks += 1
        job = SandboxJob(run_id=uuid.uuid4().hex, job_id=self.options.job_id,
                         env=self.options.env, case=data, variant=self.options.variant)
        return job, self.runtime.execute(job)

    def _checked_in(self, job: SandboxJob, execution: Execution) -> list[Checked]:
        if not any(e["event"] == "start" for e in execution.events):
            raise RuntimeFault(f"the harness's check did not start on {job.env.id} "
                               f"(exit {execution.returncode}): {execution.stderr[-500:]}")
        return [checked(e) for e in execution.events if e["event"] == "checked"]

    def edit_holds(self, source: str, current: str, passes: list[Any]) -> str | None:
        """The text an edit of the module `current` is kept as (printed back) where it parses,
        is acceptable, is not `current` and holds with `passes`; else None. An edit not checked
        before is checked and, where it is to run, run in one sandbox (`_candidate`); what was
        checked or judged before costs nothing."""
        if (source, self.state.module) not in self.verdicts:
            self._candidate(source, current, passes)
        verdict = self.verdicts[(source, self.state.module)]
        text = verdict.get("source", "")
        if not self._acceptable(verdict) or text == current or grows(text, current):
            return None
        return text if self.holds(text, passes) else None

    def _candidate(self, source: str, current: str, passes: list[Any]) -> None:
        """Check one edit and, where `edit_holds` would run it, run it, in one sandbox (the
        harness's candidate mode: the run reuses the check's parse); the verdict and the run's
        judgment are kept as `check` and `holds` keep theirs."""
        data = harness_case(self._case_with(source, passes), self.options.env)
        data["harness"] = {"mode": "candidate", "source": source, "current": current,
                           "well_formed": self.well_formed}
        job, execution = self._in_sandbox(data)
        verdict = (self._checked_in(job, execution) or [DID_NOT_FINISH])[0]
        self.verdicts[(source, self.state.module)] = verdict
        printed = verdict.get("source", "")
        if self._acceptable(verdict) and printed != current:  # the harness ran it
            self.state.runs += 1
            self.memo.setdefault(content_key(printed, passes),
                                 self._shows_bug(assemble_result(job, execution)))

    def _acceptable(self, verdict: Checked) -> bool:
        """A candidate parses, and is well formed if the case was (same verdict or better)."""
        return bool(verdict["ok"]) and (bool(verdict.get("well_formed", True))
                                         or not self.well_formed)
