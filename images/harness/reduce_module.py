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
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

from .classify import first_line
from .events import EventSink
from .modes import module_json_prelude, run_source
from .porting import Features, detect, port
from .scriptsrc import module_source, parse_problem, well_formed

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
    text, _ = port(prelude + source, features)
    try:
        # The parser prints its diagnostics; the reason below is what the reducer needs.
        with contextlib.redirect_stdout(io.StringIO()):
            namespace = run_source(workdir / f"candidate_{index}.py", text, f"candidate_{index}")
    except BaseException as exc:  # a candidate that does not parse is a verdict, not a fault
        return {"index": index, "ok": False,
                "reason": f"does not parse: {type(exc).__name__}: {first_line(str(exc))}"}
    mod = namespace.get(module)
    if not isinstance(mod, tvm.IRModule):
        return {"index": index, "ok": False, "reason": f"defines no IRModule named {module!r}"}
    formed = well_formed(tvm, mod)
    printed = module_source(mod, formed)
    if parse_problem(workdir / f"printed_{index}.py", printed) is not None:
        # This release's printer gives text that does not parse back (symbolic shapes in a
        # PrimFunc's buffers): the candidate is kept as it was written.
        return {"index": index, "ok": True, "well_formed": formed, "source": source,
                "printed": False}
    return {"index": index, "ok": True, "well_formed": formed, "source": printed}


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
