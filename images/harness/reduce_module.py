"""Reduction's check: which candidate modules parse and are well formed on this release.

In check mode (case["harness"] == {"mode": "check", "sources": [...]}) nothing
runs: each source is parsed as a module-mode case would parse it, the module
named case["module"] is checked with relax.analysis.well_formed, and one
`checked` event per source says whether it parses (`ok`) and whether it is
well formed (`well_formed`: the reducer keeps a candidate no less well formed
than the case it started from), with the module printed back as TVMScript (the
readable, canonical form the reducer keeps; a module that is not well formed
with its decorator's check off) or the reason it does not parse. Events go out
one by one, so a source that crashes the parser still leaves the verdicts of
those before it.

In candidate mode (case["harness"] == {"mode": "candidate", "source": ...,
"current": ..., "well_formed": ...}) one source is checked the same way and,
where the reducer would run it (it parses, is well formed if the case was, and
is not the module it has now), run in the same process as a module-mode case
of its printed text: on the module that printing parsed back, which is the
module a run of that text parses (same file, same text), so the candidate
costs one sandbox and one parse fewer than a check and then a run.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

from .classify import first_line
from .events import EventSink
from .modes import RUN_FILE, module_json_prelude, run_source
from .porting import Features, detect, port
from .scriptsrc import module_source, parse_back, parse_problem, well_formed

MODE = "check"


def print_json(tvm: Any, workdir: Path, index: int, text: str) -> dict[str, Any]:
    """A module as tvm.ir.save_json wrote it (on this release or another), printed by this
    release's printer; ok only if that TVMScript parses back here."""
    try:
        mod = tvm.ir.load_json(text)
    except BaseException as exc:  # another release's JSON may not load here: a verdict
        return {"index": index, "ok": False,
                "reason": f"does not load: {type(exc).__name__}: {first_line(str(exc))}"}
    if not isinstance(mod, tvm.IRModule):
        return {"index": index, "ok": False, "reason": "the JSON is no IRModule"}
    formed = well_formed(tvm, mod)
    source = module_source(mod, formed)
    problem = parse_problem(workdir / f"printed_{index}.py", source)
    if problem is not None:
        return {"index": index, "ok": False, "reason": f"printed, does not parse back: {problem}"}
    return {"index": index, "ok": True, "well_formed": formed, "source": source}


def check_one(tvm: Any, features: Features, workdir: Path, index: int, source: str,
              module: str, prelude: str = "") -> dict[str, Any]:
    """Whether one source parses to an IRModule, whether it is well formed, and that module
    printed back. `prelude` runs before it (the case's MODULE_JSON) but is no part of it."""
    return _check(tvm, features, index, source, module, prelude,
                  workdir / f"candidate_{index}.py", workdir / f"printed_{index}.py")[0]


def _check(tvm: Any, features: Features, index: int, source: str, module: str, prelude: str,
           parse_path: Path, printed_path: Path) -> tuple[dict[str, Any], Any]:
    """check_one's verdict, and the namespace the printed module parsed back to as the file
    `printed_path` (None where it was not printed back). The source is parsed as the file
    `parse_path`: where that is `printed_path` and TVM prints the module as it was written,
    that parse is the parse back (not done twice)."""
    text, _ = port(prelude + source, features)
    try:
        # The parser prints its diagnostics; the reason below is what the reducer needs.
        with contextlib.redirect_stdout(io.StringIO()):
            namespace = run_source(parse_path, text, parse_path.stem)
    except BaseException as exc:  # a candidate that does not parse is a verdict, not a fault
        return {"index": index, "ok": False,
                "reason": f"does not parse: {type(exc).__name__}: {first_line(str(exc))}"}, None
    mod = namespace.get(module)
    if not isinstance(mod, tvm.IRModule):
        return {"index": index, "ok": False,
                "reason": f"defines no IRModule named {module!r}"}, None
    formed = well_formed(tvm, mod)
    printed = module_source(mod, formed)
    if printed == text and parse_path == printed_path:  # written as TVM prints it already
        return {"index": index, "ok": True, "well_formed": formed, "source": printed}, namespace
    parsed, problem = parse_back(printed_path, printed, module)
    if problem is not None:
        # This release's printer gives text that does not parse back (symbolic shapes in a
        # PrimFunc's buffers): the candidate is kept as it was written.
        return {"index": index, "ok": True, "well_formed": formed, "source": source,
                "printed": False}, None
    return {"index": index, "ok": True, "well_formed": formed, "source": printed}, parsed


def check_sources(case: dict[str, Any], sink: EventSink, workdir: Path) -> None:
    """Check every source of the request, one `checked` event each."""
    import tvm
    import tvm.relax  # noqa: F401  (well_formed)
    import tvm.script  # noqa: F401  (the parsers)

    features = detect(tvm)
    sink.emit("start", tvm={"version": tvm.__version__})
    for index, source in enumerate(case["harness"]["sources"]):
        if isinstance(source, dict):  # {"json": save_json text}: printed here
            sink.emit("checked", **print_json(tvm, workdir, index, source["json"]))
            continue
        sink.emit("checked", **check_one(tvm, features, workdir, index, source, case["module"],
                                         module_json_prelude(case)))


Parsed = tuple[str, Any]  # a module's text and the namespace it defined, run as the run's file


def check_candidate(case: dict[str, Any], sink: EventSink,
                    workdir: Path) -> tuple[dict[str, Any], Parsed | None] | None:
    """Candidate mode's check: its `checked` event, then, where the reducer runs the candidate,
    the case to run (its source the printed text) and, where printing parsed back, that text
    and the namespace it defined; None where the candidate does not run."""
    import tvm
    import tvm.relax  # noqa: F401  (well_formed)
    import tvm.script  # noqa: F401  (the parsers)

    request = case["harness"]
    sink.emit("start", tvm={"version": tvm.__version__})
    verdict, parsed = _check(tvm, detect(tvm), 0, request["source"], case["module"],
                             module_json_prelude(case), workdir / RUN_FILE, workdir / RUN_FILE)
    sink.emit("checked", **verdict)
    runs = verdict["ok"] and verdict["source"] != request["current"] and (
        verdict["well_formed"] or not request["well_formed"])
    if not runs:
        return None
    printed = verdict["source"]
    reuse = (printed, parsed) if parsed is not None else None
    # As the reducer makes the case of a text it runs: TVMScript that does not read MODULE_JSON
    # runs without it (worker/judging.py, _case_with).
    module_json = case.get("module_json") if "MODULE_JSON" in printed else None
    return {**case, "source": printed, "module_json": module_json, "harness": None}, reuse
