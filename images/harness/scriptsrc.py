"""A module as the source of a module-mode case: TVMScript that runs as a file on this release."""

from __future__ import annotations

import re
from typing import Any

# The printer names the imports it used as comments above the module: they become real imports.
_HEADER_IMPORT = re.compile(r"^# (from [\w.]+ import \w+(?: as \w+)?|import [\w.]+)$")
# Inside the class, the printer repeats those comments before nested functions: noise.
_INNER_IMPORT = re.compile(r"^\s+# (from|import) tvm")
_TRAILER = "# Metadata omitted"
_MODULE_VAR = re.compile(r'^(\w+) = TypeVar\("\1"\)$')


def module_source(mod: Any) -> str:
    """`mod` printed as TVMScript, with its imports live, so the text parses back as a file."""
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
    return "\n".join(_declare_shape_vars(lines)) + "\n"


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
