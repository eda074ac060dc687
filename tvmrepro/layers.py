"""Which layer is wrong: TVM's import of the model, one of the passes, the code generation,
or the runtime (docs/layers.md).

A script that fails, or whose outputs differ from its reference, is run again on the same
release along other paths, each a run of its own: `unoptimised` (the module as the script
made it, built with its lowering alone: no optimisation), then `cut:<k>:<Pass>` (the first
k optimisations the script ran kept, lowering alone after them); `default` is the script as
written and `reference` the framework's own answer on each path's inputs. The first layer
that shows the failure or the difference is the verdict:

- `import`: the importer raised; or the unoptimised module already computes other values
  than the reference, fails the script's own check, or cannot even be lowered;
- `codegen`: the unoptimised module fails in code generation (the VM's codegen, TIR's
  pipeline, LLVM);
- `runtime`: the unoptimised module builds and fails when the VM runs it;
- `pass:<Name>`: the unoptimised module agrees, and the first cut that fails or differs is
  the one that kept `<Name>` (the cut before it agrees).

Cuts are probed one after another from the first (each probe's neighbour is known), or by
halves where a script runs more than LINEAR_CUTS optimisations. A path that could not be
measured (incompatible, infra_error), or a time budget spent before the next path, leaves the
verdict undecided, and the paths run so far are its evidence.
"""

from __future__ import annotations

from collections.abc import Callable

from tvmrepro.outputs import compare_outputs
from tvmrepro.results import FAILING, NOT_MEASURED, LayerPath, LayerVerdict, Result

DEFAULT, UNOPTIMISED, REFERENCE = "default", "unoptimised", "reference"
LINEAR_CUTS = 8  # up to this many cuts left to probe, the next one; beyond, the middle one
TEXT_CAP = 2000  # characters of a path's signature kept in the evidence

# The path that keeps the first k optimisations; None: not run, the verdict's time is spent.
Probe = Callable[[int], LayerPath | None]
SPENT = "the verdict's time budget (the case's time limit) was spent before this path"


def cut_name(keep: int, passes: list[str]) -> str:
    """The path that keeps the first `keep` optimisations of `passes`."""
    return UNOPTIMISED if keep == 0 else f"cut:{keep}:{passes[keep - 1]}"


def path_of(name: str, result: Result, failed_in: str | None) -> LayerPath:
    """A path's evidence from its run's result (`failed_in`: where a failing run stopped)."""
    comparison = compare_outputs(result.outputs, result.reference_outputs)
    failing = result.status in FAILING
    return LayerPath(path=name, status=result.status.value, stage=result.stage,
                     outputs=comparison.outputs if comparison is not None else None,
                     failed_in=failed_in if failing else None,
                     signature=(result.signature or "")[:TEXT_CAP] if failing else None,
                     seconds=result.seconds.get("total"))


def reference_path(result: Result) -> LayerPath | None:
    """The framework's answer as a path of its own; None where the run computed none."""
    if result.reference_kind is None and result.reference_error is None:
        return None
    said = result.reference_outputs is not None
    return LayerPath(path=REFERENCE, status="ok" if said else "error", kind=result.reference_kind,
                     signature=None if said else (result.reference_error or "")[:TEXT_CAP])


def is_bad(path: LayerPath) -> bool | None:
    """Whether a path shows the failure (fails, or its outputs differ); None: not measured."""
    if path.status in NOT_MEASURED:
        return None
    return path.status in FAILING or path.outputs == "differs"


def _unoptimised_layer(path: LayerPath) -> tuple[str | None, str]:
    """The layer an unoptimised path that shows the failure names, and why."""
    where = path.failed_in or ""
    if path.outputs == "differs":
        return "import", ("the imported module, built with no optimisation, already computes "
                          "other values than the reference")
    if where == "check":
        return "import", ("the imported module, built with no optimisation, already fails the "
                          "script's own check of its outputs")
    if where.startswith("pass:"):
        return "import", (f"the imported module does not lower: with no optimisation it fails "
                          f"in {where.removeprefix('pass:')}")
    if where in ("codegen", "build"):
        return "codegen", ("the imported module fails in code generation with no "
                           "optimisation run")
    if where == "run":
        return "runtime", ("the imported module builds with no optimisation and fails when "
                           "the VM runs it")
    return None, f"the unoptimised path failed at {path.stage or 'an unknown stage'}"


def _pick(lo: int, hi: int) -> int:
    """The next cut to probe between a good `lo` and a bad `hi`."""
    return lo + 1 if hi - lo <= LINEAR_CUTS else (lo + hi) // 2


def _search(passes: list[str], probe: Probe, evidence: list[LayerPath]) -> tuple[str | None, str]:
    """The first optimisation after which the paths show the failure (cut 0 agrees, the
    script as written does not)."""
    lo, hi = 0, len(passes)
    if hi == 0:
        return None, ("the script runs no optimisation, and its unoptimised path agrees: the "
                      "failure did not show again (flaky?)")
    while hi - lo > 1:
        keep = _pick(lo, hi)
        path = probe(keep)
        if path is None:
            return None, f"{SPENT}: {cut_name(keep, passes)}"
        evidence.append(path)
        bad = is_bad(path)
        if bad is None:
            return None, f"the path {path.path} could not be measured ({path.status})"
        lo, hi = (lo, keep) if bad else (keep, hi)
    name = passes[hi - 1]
    before = cut_name(lo, passes)
    return f"pass:{name}", (f"the module agrees up to {before} and shows the failure once "
                            f"{name} has run")


def place(default: LayerPath, passes: list[str], probe: Probe) -> tuple[str | None, str,
                                                                        list[LayerPath]]:
    """The verdict for a script's run (`default`), its optimisations in order and a way to run
    a cut path: (layer, why, the paths run for it)."""
    bad = is_bad(default)
    if not bad:
        why = ("the run could not be measured" if bad is None else
               "the script runs, and its outputs agree with its reference: nothing to place")
        return None, why, []
    if default.failed_in == "frontend":
        return "import", "TVM's importer raised", []
    unoptimised = probe(0)
    if unoptimised is None:
        return None, f"{SPENT}: {UNOPTIMISED}", []
    evidence = [unoptimised]
    judged = is_bad(unoptimised)
    if judged is None:
        return None, f"the unoptimised path could not be measured ({unoptimised.status})", \
            evidence
    if judged:
        layer, why = _unoptimised_layer(unoptimised)
        return layer, why, evidence
    layer, why = _search(passes, probe, evidence)
    return layer, why, evidence


def verdict(default: LayerPath, passes: list[str], probe: Probe,
            reference: Callable[[], LayerPath | None],
            seconds: Callable[[], float]) -> LayerVerdict:
    """The answer a result carries: the layer, why, and every path as evidence (`reference`:
    the framework's answer, asked once the paths have run: a build that fails has none, its
    cuts do)."""
    layer, why, probed = place(default, passes, probe)
    said = reference()
    evidence = [default, *([said] if said is not None else []), *probed]
    return LayerVerdict(layer=layer, reason=why, passes=passes, evidence=evidence,
                        runs=len(probed), seconds=round(seconds(), 3))


def summary(found: LayerVerdict) -> str:
    """One line: the layer and the paths that say so (`pass:FuseTIR: unoptimised agrees,
    cut:4:FuseTIR fails`)."""
    said = ", ".join(f"{p.path} {_path_word(p)}" for p in found.evidence
                     if p.path != REFERENCE)
    return f"{found.layer or 'not placed'}: {found.reason} ({said})"


def _path_word(path: LayerPath) -> str:
    if path.status in FAILING:
        return f"fails in {path.failed_in}" if path.failed_in else f"fails ({path.status})"
    if path.outputs == "differs":
        return "differs"
    return "agrees" if path.status == "ok" else str(path.status)
