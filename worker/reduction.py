"""Reduce a case while an oracle still holds: the pass list (ddmin), then the module, as text.

The reducer runs here (the worker or `tvmrepro reduce --local`); everything
that needs TVM runs in sandboxes through the runtime: each candidate is a
module-mode run with the case's limits, judged by the bisection oracles
(tvmrepro/oracles.py), and each module edit (worker/candidates.py) first goes
to the harness's check mode, which keeps only modules that parse and are no
less well formed than the case (a case that is not well formed lets the oracle
judge candidates that are not either) and prints them back as canonical
TVMScript where this release's printing parses back. Up to `workers` sandboxes
run at once; a candidate whose content (module text and passes) was judged
before is not run again, nor twice in one batch; a time budget ends the
reduction with the best case so far.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from tvmrepro.cases import Case, parse_case
from tvmrepro.environments import Environment
from tvmrepro.errors import BadInput, RuntimeFault
from tvmrepro.narrowed import Reduced, Size
from tvmrepro.narrowing import DEFAULT_BUDGET_S, DEFAULT_ORACLE, ProgressEvent
from tvmrepro.oracles import Verdict, judge, parse_oracle
from tvmrepro.results import FAILING, Result
from worker import candidates
from worker.extract_steps import Checked, checked
from worker.runner import harness_case, oracle_view, run_variant
from worker.runtimes.base import Runtime, SandboxJob

DEFAULT_WORKERS = 2
CHECK_BATCH = 8  # module edits checked per harness call
MAX_SWEEPS = 3  # passes over one phase's candidates while they keep shrinking the module
T = TypeVar("T")
Progress = Callable[[ProgressEvent], None]


class OutOfBudget(Exception):
    """The time budget is spent: stop with the best case so far."""


def ddmin(items: Sequence[T], first_holding: Callable[[list[list[T]]], int | None]) -> list[T]:
    """Zeller's ddmin: a 1-minimal sublist; `first_holding` tests configurations, in order."""
    current, n = list(items), 2
    while len(current) >= 2:
        size = -(-len(current) // n)
        chunks = [current[k:k + size] for k in range(0, len(current), size)]
        complements = [[x for c in chunks if c is not chunk for x in c] for chunk in chunks]
        configs = chunks + (complements if len(chunks) > 2 else [])
        found = first_holding(configs)
        if found is not None:
            current = configs[found]
            n = 2 if found < len(chunks) else max(n - 1, 2)
        elif n >= len(current):
            break
        else:
            n = min(len(current), 2 * n)
    if len(current) == 1 and first_holding([[]]) == 0:
        return []
    return current


def content_key(source: str, passes: list[Any]) -> tuple[str, str]:
    """What makes two candidates the same run: the module's text and the pass list."""
    return source, repr(passes)


def source_lines(source: str) -> int:
    """Lines of a module's source, blank lines not counted."""
    return sum(1 for line in source.splitlines() if line.strip())


@dataclass
class Options:
    """What a reduction was asked: environment, variant, oracle, budget, parallel sandboxes."""

    env: Environment
    variant: str
    oracle: str = DEFAULT_ORACLE
    budget_s: float = DEFAULT_BUDGET_S
    workers: int = DEFAULT_WORKERS
    job_id: str = "local"


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


class Reducer:
    """One reduction of one case variant in one environment."""

    def __init__(self, case: Case, options: Options, runtime: Runtime,
                 progress: Progress | None = None) -> None:
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
        self.progress = progress or (lambda _event: None)
        self.deadline = time.monotonic() + options.budget_s
        self.reference: Result | None = None  # the original run, once baseline ran it
        self.memo: dict[tuple[str, str], bool] = {}
        self.verdicts: dict[tuple[str, str], Checked] = {}
        self.well_formed = True  # the case's own verdict: no candidate may be less well formed

    # -- running ---------------------------------------------------------------------
    def _case_with(self, source: str, passes: list[Any]) -> Case:
        data = self.case.model_dump(mode="json")
        data.update(source=source, module=self.state.module,
                    variants=[{"name": self.options.variant, "passes": passes}])
        if "MODULE_JSON" not in source:  # printed as TVMScript: the save_json text is not needed
            data["module_json"] = None
        return parse_case(data)

    def _run(self, source: str, passes: list[Any]) -> Result:
        return run_variant(self._case_with(source, passes), self.options.variant,
                           self.options.env, self.runtime, job_id=self.options.job_id)

    def holds(self, source: str, passes: list[Any]) -> bool:
        """Whether the oracle still says `bad` for this module and pass list (memoized: a
        candidate whose content was judged before is not run again)."""
        key = content_key(source, passes)
        if key not in self.memo:
            self.state.runs += 1
            reference = oracle_view(self.reference) if self.reference is not None else None
            self.memo[key] = judge(self.oracle, oracle_view(self._run(source, passes)),
                                   reference) is Verdict.BAD
        return self.memo[key]

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
            self._check_budget()
            self.state.checks += 1
            pending = sources[len(verdicts):]
            data = harness_case(self.case, self.options.env)
            data.update(module=module, harness={"mode": "check", "sources": pending})
            job = SandboxJob(run_id=uuid.uuid4().hex, job_id=self.options.job_id,
                             env=self.options.env, case=data, variant=self.options.variant)
            execution = self.runtime.execute(job)
            if not any(e["event"] == "start" for e in execution.events):
                raise RuntimeFault(f"the harness's check did not start on {job.env.id} "
                                   f"(exit {execution.returncode}): {execution.stderr[-500:]}")
            verdicts += [checked(e) for e in execution.events if e["event"] == "checked"]
            if len(verdicts) < len(sources):  # the next source ended the process: not counted
                verdicts.append({"ok": False, "reason": "the check of this module did not finish"})
        return verdicts

    # -- phases ----------------------------------------------------------------------
    def _note(self, what: str, kind: Literal["step", "try"] = "step") -> None:
        """Tell the progress callback: a `step` taken (also logged) or edits being `try`ed."""
        if kind == "step":
            self.state.log.append(what)
        self.progress({"kind": kind, "phase": self.state.phase, "what": what,
                       "steps": self.state.steps, "runs": self.state.runs,
                       "passes": len(self.state.passes),
                       "lines": source_lines(self.state.source)})

    def baseline(self) -> None:
        """The original run: the reference the `signature` oracle compares with."""
        reference = self.reference = self._run(self.state.source, self.state.passes)
        self.state.runs += 1
        self.memo[content_key(self.state.source, self.state.passes)] = True
        view = oracle_view(reference)
        if judge(self.oracle, view, view) is not Verdict.BAD or (
                self.oracle.kind == "signature" and reference.status not in FAILING):
            raise BadInput("CASE", f"variant {self.options.variant!r} on {self.options.env.id} "
                                   f"does not show the bug by the oracle {self.oracle.text} "
                                   f"(status {reference.status.value}, stage "
                                   f"{reference.stage}): nothing to reduce")
        self._note(f"reference: {reference.status.value} at {reference.stage}")

    def reduce_passes(self) -> None:
        """ddmin over the pass list, the module as it is."""
        self.state.phase = "passes"
        source = self.state.source
        before = len(self.state.passes)
        kept = ddmin(self.state.passes,
                     lambda configs: self.first_holding([(source, c) for c in configs]))
        if len(kept) < before:
            self.state.passes = kept
            self.state.steps += 1
            self._note(f"passes {before} -> {len(kept)}: "
                       f"{', '.join(p['name'] for p in kept) or '(none)'}")

    def normalize(self) -> bool:
        """Switch to the module as TVM prints it, if that still holds (the edits work on it)."""
        self.state.phase = "module"
        verdict = self.check([self.state.source], self.state.module)[0]
        if not verdict["ok"]:
            self._note(f"module left as given: it {verdict.get('reason')}")
            return False
        self.well_formed = bool(verdict.get("well_formed", True))
        if not self.well_formed:
            self._note("the module is not well formed: candidates may not be either (each "
                       "judged by the oracle), but none may be less well formed")
        printed = verdict.get("source", "")
        if printed != self.state.source and not self.holds(printed, self.state.passes):
            self._note("module kept as given: printed back by TVM it no longer shows the bug")
            return True
        self.state.source, self.state.module = printed, "Module"
        return True

    def sweep(self, phase: str, generate: Callable[[str], list[candidates.Candidate]]) -> None:
        """Accept edits of one kind, in order, while they hold; again while a sweep shrank it."""
        self.state.phase = phase
        for _ in range(MAX_SWEEPS):
            position, shrank = 0, False
            while True:
                edits = generate(self.state.source)
                if position >= len(edits):
                    break
                batch = [c for c in edits[position:position + CHECK_BATCH] if _compiles(c.source)]
                taken = self._try(batch)
                if taken is None:
                    position += CHECK_BATCH
                else:
                    shrank = True  # the same index now names the next edit of the new text
            if not shrank:
                return

    def _try(self, batch: list[candidates.Candidate]) -> candidates.Candidate | None:
        """The first edit of `batch`, in order, that parses, is acceptable and holds. Checked
        and run `workers` edits at a time: the edits after the first that holds cost nothing."""
        width = max(1, self.options.workers)
        for start in range(0, len(batch), width):
            taken = self._try_chunk(batch[start:start + width])
            if taken is not None:
                return taken
        return None

    def _try_chunk(self, batch: list[candidates.Candidate]) -> candidates.Candidate | None:
        verdicts = self.check([c.source for c in batch], self.state.module)
        valid = [(c, v.get("source", "")) for c, v in zip(batch, verdicts, strict=True)
                 if self._acceptable(v) and v.get("source") != self.state.source]
        self._note(f"{len(valid)} of {len(batch)} edits parse and are "
                   + ("well formed" if self.well_formed else "no less well formed")
                   + ("; running them" if valid else ""), kind="try")
        found = self.first_holding([(text, self.state.passes) for _c, text in valid])
        if found is None:
            return None
        edit, text = valid[found]
        before = source_lines(self.state.source)
        self.state.source = text
        self.state.steps += 1
        self._note(f"{edit.what}: {before} -> {source_lines(text)} lines")
        return edit

    def _acceptable(self, verdict: Checked) -> bool:
        """A candidate parses, and is well formed if the case was (same verdict or better)."""
        return bool(verdict["ok"]) and (bool(verdict.get("well_formed", True))
                                         or not self.well_formed)

    def module_phases(self) -> None:
        """Functions, statements level by level, PrimFunc bodies, bindings' values, again, then
        symbolic shape variables made constants, then shapes."""
        for round_ in range(2):
            self.sweep("functions", candidates.drop_functions)
            depth = candidates.FUNCTION_INDENT + candidates.STATEMENT_STEP
            while depth <= candidates.max_depth(self.state.source):
                self.sweep(f"statements@{depth}", functools.partial(candidates.drop_statements, depth=depth))
                depth += candidates.STATEMENT_STEP
            if round_ == 0:
                self.sweep("prim func bodies", candidates.empty_prim_funcs)
                self.sweep("bindings", candidates.zero_bindings)
        self.sweep("shape variables", candidates.concretize_shape_vars)
        self.sweep("shapes", candidates.shrink_shapes)

    def run(self) -> Reduced:
        """Reduce, and return the reduce object of CONTRACT.md ("Reduction")."""
        started = time.monotonic()
        before = Size(passes=len(self.state.passes), lines=source_lines(self.state.source))
        self.baseline()
        finished = True
        try:
            self.reduce_passes()
            from_json = "MODULE_JSON" in self.state.source
            if self.normalize():
                if from_json and "MODULE_JSON" not in self.state.source:
                    # A save_json module counts as the TVMScript TVM printed it as.
                    before.lines = source_lines(self.state.source)
                self.module_phases()
        except OutOfBudget:
            finished = False
            self._note("time budget spent: the best case so far")
        return self.report(before, finished, time.monotonic() - started)

    def report(self, before: Size, finished: bool, seconds: float) -> Reduced:
        """The reduced case and the numbers."""
        reduced = self._case_with(self.state.source, self.state.passes).model_copy(
            update={"title": f"{self.case.title or 'case'} (reduced)".strip()})
        return Reduced(
            case=reduced, oracle=self.oracle.text,
            signature=self.reference.signature if self.reference is not None else None,
            environment=self.options.env.id, variant=self.options.variant, before=before,
            after=Size(passes=len(self.state.passes), lines=source_lines(self.state.source)),
            steps=self.state.steps, runs=self.state.runs, checks=self.state.checks,
            finished=finished, seconds=round(seconds, 1), log=list(self.state.log))


def _compiles(source: str) -> bool:
    """Valid Python at all (a cheap filter before the harness parses it as TVMScript)."""
    try:
        compile(source, "<candidate>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def reduce_case(case: Case, options: Options, runtime: Runtime,
                progress: Progress | None = None) -> Reduced:
    """Reduce `case` (one variant, one environment) while the oracle holds."""
    return Reducer(case, options, runtime, progress).run()

