"""A module as the source of a module-mode case: TVMScript that runs as a file on this release."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The printer names the imports it used as comments above the module: they become real imports.
_HEADER_IMPORT = re.compile(r"^# (from [\w.]+ import \w+(?: as \w+)?|import [\w.]+)$")
# Inside the class, the printer repeats those comments before nested functions: noise.
_INNER_IMPORT = re.compile(r"^\s+# (from|import) tvm")
_TRAILER = "# Metadata omitted"
_MODULE_VAR = re.compile(r'^(\w+) = TypeVar\("\1"\)$')
_DECORATOR = "@I.ir_module"
UNCHECKED_DECORATOR = "@I.ir_module(check_well_formed=False)"


def well_formed(tvm: Any, mod: Any) -> bool:
    """Well formed as the TVMScript parser checks it: relax.analysis.well_formed (a bool on
    older releases, None or an exception on newer) and TIR's verify_well_formed (a PrimFunc's
    buffers and variables: the Relax check does not look inside PrimFuncs)."""
    try:
        verdict = tvm.relax.analysis.well_formed(mod)
    except Exception:  # 0.27 raises for a module that is not well formed
        return False
    return verdict is not False and _tir_well_formed(tvm, mod) and in_bounds(tvm, mod)


def in_bounds(tvm: Any, mod: Any) -> bool:
    """Whether every buffer access of the module's PrimFuncs provably stays inside its buffer
    (TIR's OOBChecker, where the release has it). A reduction that shrinks a buffer to (1,) but
    keeps a 16-step loop reads out of bounds: the same signal, another bug."""
    for name in ("s_tir", "tirx", "tir"):
        checker = getattr(getattr(getattr(tvm, name, None), "analysis", None), "OOBChecker", None)
        if checker is None:
            continue
        try:
            checker()(mod)
        except Exception as exc:  # noqa: BLE001  (the checker's answer is its error)
            return "Out of bounds memory access" not in str(exc)
        return True
    return True


def _tir_well_formed(tvm: Any, mod: Any) -> bool:
    for name in ("tirx", "tir"):
        try:
            verify = getattr(getattr(tvm, name).analysis, "verify_well_formed", None)
        except Exception:  # noqa: BLE001  (no such dialect on this release)
            continue
        if verify is None:
            continue
        try:
            verify(mod, assert_mode=True)
        except Exception as exc:  # noqa: BLE001  (the verifier's answer is its error)
            # 0.27's verifier refuses s_tir blocks ("does not support statement
            # s_tir.SBlockRealize"), which the parser takes: no verdict, not a defect.
            return "does not support" in str(exc)
        return True
    return True


def unchecked(source: str) -> str:
    """The source with its module's decorator told not to check well-formedness (the parser
    refuses a module that is not well formed otherwise)."""
    return re.sub(rf"^{re.escape(_DECORATOR)}$", UNCHECKED_DECORATOR, source, count=1,
                  flags=re.MULTILINE)


def parse_problem(path: Path, source: str, module: str = "Module") -> str | None:
    """Why `source` does not parse back to an IRModule named `module` here, or None."""
    return parse_back(path, source, module)[1]


def parse_back(path: Path, source: str, module: str = "Module") -> tuple[Any, str | None]:
    """The namespace `source` defines run as the file `path` (None if it does not parse back
    to an IRModule named `module` here), and why not (None if it does)."""
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            path.write_text(source)
            namespace = runpy.run_path(str(path), run_name=path.stem)
    except BaseException as exc:  # a module that does not parse back is an answer, not a fault
        first = next((line for line in str(exc).splitlines() if line.strip()), "")
        return None, f"{type(exc).__name__}: {first}"[:500]
    found = namespace.get(module)
    if type(found).__name__ != "IRModule":
        return None, f"defines no IRModule named {module!r}"
    return namespace, None


def forked(work: Callable[[], bytes]) -> tuple[bytes | None, str]:
    """`work()` run in a forked child: its bytes, or None and how the child ended (printing,
    parsing and save_json can each crash the process on a module a pass left broken)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: do it, write it, leave without any cleanup
        os.close(read)
        code = 0
        try:
            with os.fdopen(write, "wb") as out:
                out.write(work())
        except BaseException:  # noqa: BLE001  (the parent sees no answer)
            code = 1
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as inp:
        data = inp.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return data, "done"
    how = (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
           else f"exit status {os.WEXITSTATUS(status)}")
    return None, how


def module_fields(tvm: Any, mod: Any, workdir: Path) -> dict[str, Any]:
    """A recorded module: its source (`ir`), whether it is well formed (if not, the source's
    decorator does not check), and where that source does not parse back here, why
    (`parse_error`) and the module serialized by tvm.ir.save_json (`ir_json`, absent where
    save_json fails: 0.27 crashes in ToJSONGraph on some modules). Each in a forked child."""
    data, how = forked(lambda: json.dumps(_printed(tvm, mod, workdir)).encode())
    if data is None:  # printing is what may have ended it: not again, in this process
        return {"parse_error": f"printing or parsing it back ended the process ({how})"}
    fields: dict[str, Any] = json.loads(data)
    if "parse_error" in fields:
        saved, _ = forked(lambda: tvm.ir.save_json(mod).encode())
        if saved is not None:
            fields["ir_json"] = saved.decode()
    return fields


def _printed(tvm: Any, mod: Any, workdir: Path) -> dict[str, Any]:
    formed = well_formed(tvm, mod)
    text = module_source(mod, formed)
    fields: dict[str, Any] = {"ir": text, "well_formed": formed}
    problem = parse_problem(workdir / "printed_module.py", text)
    if problem is not None:
        fields["parse_error"] = problem
    return fields


def module_source(mod: Any, well_formed: bool = True) -> str:
    """`mod` printed as TVMScript, with its imports live, so the text parses back as a file
    (`well_formed` False: with the decorator's check off)."""
    lines: list[str] = []
    in_header = True
    for line in mod.script().splitlines():
        in_header = in_header and not line.startswith("@")
        header = _HEADER_IMPORT.match(line) if in_header else None
        if header:
            lines.append(header.group(1))
        elif not _INNER_IMPORT.match(line) and not line.startswith(_TRAILER):
            lines.append(line.rstrip())
    while lines and not lines[-1]:
        lines.pop()
    text = "\n".join(_declare_shape_vars(lines)) + "\n"
    return text if well_formed else unchecked(text)


def _declare_shape_vars(lines: list[str]) -> list[str]:
    """Module-level symbolic shape variables, as some releases print them (`m = TypeVar("m")`),
    do not parse back: name them as strings in each Relax signature and declare them in the body."""
    names = [m.group(1) for m in map(_MODULE_VAR.match, lines) if m]
    if not names:
        return lines
    out: list[str] = [] if any(line.endswith(" as T") for line in lines) else [_tir_import()]
    decorator = ""
    for line in lines:
        if _MODULE_VAR.match(line):
            continue
        stripped = line.strip()
        if stripped.startswith("@"):
            decorator = stripped
        used = [n for n in names if re.search(rf"(?<![\w.\"]){n}(?![\w\"])", line)]
        if stripped.startswith("def ") and decorator.startswith("@R.") and used:
            for name in used:
                line = re.sub(rf"(?<![\w.\"]){name}(?![\w\"])", f'"{name}"', line)
            body = " " * (len(line) - len(line.lstrip()) + 4)
            out += [line] + [f"{body}{name} = T.int64()" for name in used]
            continue
        out.append(line)
    return out


def _tir_import() -> str:
    """The TIR script dialect's import on this release (the declarations need `T.int64`)."""
    import importlib.util

    dialect = "tirx" if importlib.util.find_spec("tvm.script.tirx") else "tir"
    return f"from tvm.script import {dialect} as T"
