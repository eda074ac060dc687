"""A module as the source of a module-mode case: TVMScript that runs as a file on this release."""

from __future__ import annotations

import re
from typing import Any

# The printer names the imports it used as comments above the module: they become real imports.
_HEADER_IMPORT = re.compile(r"^# (from tvm[\w.]* import \w+(?: as \w+)?|import tvm[\w.]*)$")
# Inside the class, the printer repeats those comments before nested functions: noise.
_INNER_IMPORT = re.compile(r"^\s+# (from|import) tvm")
_TRAILER = "# Metadata omitted"


def module_source(mod: Any) -> str:
    """`mod` printed as TVMScript, with its imports live, so the text parses back as a file."""
    lines = []
    for line in mod.script().splitlines():
        header = _HEADER_IMPORT.match(line)
        if header:
            lines.append(header.group(1))
        elif not _INNER_IMPORT.match(line) and not line.startswith(_TRAILER):
            lines.append(line.rstrip())
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"
