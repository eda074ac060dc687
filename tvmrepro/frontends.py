"""Which reports need the frontend packages (torch, onnx, onnxruntime): read from their imports.

A report that builds its model with PyTorch or ONNX runs in its environment's frontend
flavour (Environment.with_frontends); every other report runs in the plain one, which never
pays torch's import. The choice is made from what the code imports, as Python would see it:
`import torch`, `from onnx import helper`, `from tvm.relax.frontend.onnx import from_onnx`.
"""

from __future__ import annotations

import ast
from functools import lru_cache

from tvmrepro.cases import Case, parse_python
from tvmrepro.environments import default_catalog

# TVM's own modules that import a framework when they are imported.
_TVM_FRONTENDS = ("tvm.relax.frontend.torch", "tvm.relax.frontend.onnx")


def frontend_modules() -> frozenset[str]:
    """The import names of the frontend packages some pinned release was verified with."""
    return frozenset(name for env in default_catalog().environments
                     for name in env.frontend_modules)


def imported_modules(source: str) -> set[str]:
    """Every module the source names in an import statement (absolute imports only)."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()  # the case's validation says why; nothing to run, nothing to install
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@lru_cache(maxsize=64)
def source_needs_frontends(source: str) -> bool:
    """Whether this code imports a frontend package or one of TVM's frontends of them."""
    known = frontend_modules()
    for name in imported_modules(source):
        if name.split(".")[0] in known or name.startswith(_TVM_FRONTENDS):
            return True
    return False


def needs_frontends(case: Case) -> bool:
    """Whether the case runs in the frontend flavour of its environments."""
    return any(source_needs_frontends(text) for text in (case.script, case.source) if text)
