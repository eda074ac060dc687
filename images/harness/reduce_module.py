"""Reduction's check: which candidate modules parse and are well formed on this release.

In check mode (case["harness"] == {"mode": "check", "sources": [...]}) nothing
runs: each source is parsed as a module-mode case would parse it, the module
named case["module"] is checked with relax.analysis.well_formed, and one
`checked` event per source says whether it counts, with the module printed
back as TVMScript (the readable, canonical form the reducer keeps) or the
reason it does not. Events go out one by one, so a source that crashes the
parser still leaves the verdicts of those before it.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

from .classify import first_line
from .events import EventSink
from .modes import run_source
from .porting import Features, detect, port
from .scriptsrc import module_source

MODE = "check"


def _well_formed(tvm: Any, mod: Any) -> bool:
    """relax.analysis.well_formed: a bool on older releases, None or an exception on newer."""
    try:
        verdict = tvm.relax.analysis.well_formed(mod)
    except Exception:  # 0.27 raises for a module that is not well formed
        return False
    return verdict is not False


def check_one(tvm: Any, features: Features, workdir: Path, index: int, source: str,
              module: str) -> dict[str, Any]:
    """Whether one source parses to a well-formed IRModule, and that module printed back."""
    text, _ = port(source, features)
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
    if not _well_formed(tvm, mod):
        return {"index": index, "ok": False, "reason": "not well formed"}
    return {"index": index, "ok": True, "source": module_source(mod)}


def check_sources(case: dict[str, Any], sink: EventSink, workdir: Path) -> None:
    """Check every source of the request, one `checked` event each."""
    import tvm
    import tvm.relax  # noqa: F401  (well_formed)
    import tvm.script  # noqa: F401  (the parsers)

    features = detect(tvm)
    sink.emit("start", tvm={"version": tvm.__version__})
    for index, source in enumerate(case["harness"]["sources"]):
        sink.emit("checked", **check_one(tvm, features, workdir, index, source, case["module"]))
