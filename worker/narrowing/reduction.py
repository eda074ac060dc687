"""Reduce a case while an oracle still holds: the module's big cuts (functions, the statements
of their bodies), the pass list (ddmin), then the module's smaller edits, as text.

The reducer runs here (the worker or `tvmrepro reduce --local`); each
candidate is judged in a sandbox by the Judge (worker/narrowing/judging.py): run with the
case's limits and judged by the bisection oracles, a module edit (worker/
candidates.py) checked by the harness first and kept only if it parses and is
no less well formed than the case (a case that is not well formed lets the
oracle judge candidates that are not either). Edits are tried `workers` at a
time, in order; the first that holds is taken. A time budget ends the
reduction with the best case so far.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Literal

from tvmrepro.api.narrowed import Reduced, Size
from tvmrepro.cases import Case
from tvmrepro.errors import BadInput
from tvmrepro.jobs.narrow.logic import ProgressEvent
from tvmrepro.jobs.oracles import Verdict, judge
from tvmrepro.results import FAILING
from worker.narrowing import candidates
from worker.narrowing.ddmin import ddmin
from worker.narrowing.judging import Cancelled, Judge, Options, OutOfBudget, content_key, source_lines
from worker.narrowing.unparsable import why_unparsable
from worker.runner import oracle_view
from worker.runtimes.base import Runtime

__all__ = ["Cancelled", "Options", "OutOfBudget", "Reducer", "reduce_case", "source_lines"]
BUDGET_SPENT = "time budget spent: the best case so far"
CANCELLED = "cancelled: the best case so far"  # the job was cancelled while it reduced
CHECK_BATCH = 8  # module edits tried per batch (a progress line each where none holds)
MAX_SWEEPS = 3  # passes over one phase's candidates while they keep shrinking the module
FIRST_DEPTH = candidates.FUNCTION_INDENT + candidates.STATEMENT_STEP  # a function body's level
Progress = Callable[[ProgressEvent], None]


class Reducer(Judge):
    """One reduction of one case variant in one environment: the search, over the Judge's
    verdicts."""

    def __init__(self, case: Case, options: Options, runtime: Runtime,
                 progress: Progress | None = None) -> None:
        super().__init__(case, options, runtime)
        self.progress = progress or (lambda _event: None)
        self.threads: ThreadPoolExecutor | None = None  # judges the module's edits (`_try`)

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
                # Edits that certainly do not parse could never be taken: they take no sandbox.
                batch = [c for c in edits[position:position + CHECK_BATCH]
                         if why_unparsable(c.source) is None]
                taken = self._try(batch)
                if taken is None:
                    position += CHECK_BATCH
                else:
                    shrank = True  # the same index now names the next edit of the new text
            if not shrank:
                return

    def _try(self, batch: list[candidates.Candidate]) -> candidates.Candidate | None:
        """The first edit of `batch`, in order, that parses, is acceptable and holds. Up to
        `workers` edits are judged at once, each in a sandbox of its own: a sandbox that is
        done takes the next edit at once (none waits for the others of a pair), until one that
        holds is known (an edit after it could not be taken); those still running then finish,
        their verdicts kept."""
        current, passes = self.state.source, self.state.passes
        width = max(1, self.options.workers)
        started: list[Future[str | None]] = []
        decided = 0  # the edits before this one are known not to hold
        try:
            while decided < len(batch):
                while decided < len(started) and started[decided].done():
                    text = started[decided].result()
                    if text is not None:
                        return self._take(batch[decided], text)
                    decided += 1
                pending = [f for f in started[decided:] if not f.done()]
                known = any(f.done() and not f.exception() and f.result() is not None
                            for f in started[decided:])
                while not known and len(pending) < width and len(started) < len(batch):
                    pending.append(self._start_edit(batch[len(started)].source, current, passes))
                    started.append(pending[-1])
                if pending:
                    wait(pending, return_when=FIRST_COMPLETED)
        finally:
            for future in started:
                future.cancel()  # those not started yet
        valid = sum(self._acceptable(self.verdicts[(c.source, self.state.module)])
                    for c in batch)
        self._note(f"none of {len(batch)} edits holds ({valid} parse and are "
                   + ("well formed)" if self.well_formed else "no less well formed)"), kind="try")
        return None

    def _take(self, edit: candidates.Candidate, text: str) -> candidates.Candidate:
        before = source_lines(self.state.source)
        self.state.source = text
        self.state.steps += 1
        self._note(f"{edit.what}: {before} -> {source_lines(text)} lines")
        return edit

    def _start_edit(self, source: str, current: str, passes: list[Any]) -> Future[str | None]:
        """Judge an edit on the reduction's threads (a sandbox started for it now if it needs
        one: its start overlaps the runs before it)."""
        if (source, self.state.module) not in self.verdicts:
            self._reserve(1)
        if self.threads is None:
            self.threads = ThreadPoolExecutor(max_workers=max(1, self.options.workers))
        return self.threads.submit(self.edit_holds, source, current, passes)

    def first_cuts(self) -> None:
        """Functions, then statements of the functions' bodies: the big cuts, made before the
        pass ddmin so that its runs are of the smaller module."""
        self.sweep("functions", candidates.drop_functions)
        self._statements(FIRST_DEPTH, last=FIRST_DEPTH)

    def _statements(self, first: int, last: int | None = None) -> None:
        """Statements, level by level, from indent `first` to `last` (default: the deepest)."""
        depth = first
        while depth <= candidates.max_depth(self.state.source) and (last is None or depth <= last):
            self.sweep(f"statements@{depth}",
                       functools.partial(candidates.drop_statements, depth=depth))
            depth += candidates.STATEMENT_STEP

    def module_phases(self) -> None:
        """After `first_cuts` and the passes: the deeper statements, PrimFunc bodies, bindings'
        values; functions and statements again; then symbolic shape variables made constants,
        then shapes."""
        self._statements(FIRST_DEPTH + candidates.STATEMENT_STEP)
        self.sweep("prim func bodies", candidates.empty_prim_funcs)
        self.sweep("bindings", candidates.zero_bindings)
        self.sweep("functions", candidates.drop_functions)
        self._statements(FIRST_DEPTH)
        self.sweep("shape variables", candidates.concretize_shape_vars)
        self.sweep("shapes", candidates.shrink_shapes)

    def run(self) -> Reduced:
        """Reduce, and return the reduce object of docs/contract.md ("Reduction")."""
        started = time.monotonic()
        before = Size(passes=len(self.state.passes), lines=source_lines(self.state.source))
        with ThreadPoolExecutor(max_workers=1) as beside:
            # The module as given checked (for `normalize`, later) while the baseline runs; a
            # fault of that check shows again when normalize checks it (it was not kept).
            beside.submit(self.check, [self.state.source], self.state.module)
            self.baseline()
        finished = True
        try:
            from_json = "MODULE_JSON" in self.state.source
            edits_module = self.normalize()
            if edits_module:
                if from_json and "MODULE_JSON" not in self.state.source:
                    # A save_json module counts as the TVMScript TVM printed it as.
                    before.lines = source_lines(self.state.source)
                self.first_cuts()
            self.reduce_passes()
            if edits_module:
                self.module_phases()
        except OutOfBudget as stop:
            finished = False
            # Logged, not told: telling a cancelled job's progress would stop it again, here.
            self.state.log.append(CANCELLED if isinstance(stop, Cancelled) else BUDGET_SPENT)
        finally:
            if self.threads is not None:
                self.threads.shutdown(cancel_futures=True)
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


def reduce_case(case: Case, options: Options, runtime: Runtime,
                progress: Progress | None = None) -> Reduced:
    """Reduce `case` (one variant, one environment) while the oracle holds."""
    return Reducer(case, options, runtime, progress).run()

