"""Relay-era scripts: what a script needs of the legacy flow that TVM removed.

apache/tvm#17656 ("[REFACTOR] Phase out relay python components", commit ccaa534b2cc9,
2025-02-15) deleted Relay (`tvm.relay`), AutoTVM, the auto-scheduler and Relay's graph
executor; 0.19.0 is the last release that has them, 0.20.0 the first without. Every pinned
release is newer, so such a script cannot run on any of them: its run is `incompatible`, with a
message naming what is missing, not an `error` (no TVM bug was reached).

It is told by the import itself, not by reading the script's text: a finder placed last on
sys.meta_path is asked only where no installed module answers, so on a TVM that still had Relay
it would never be reached. What it raises is an ImportError (a script's `except ImportError`
still catches it) and Incompatible. A script that reaches for `tvm.relay` as an attribute of an
imported `tvm` fails with an AttributeError, which `removed_module_message` reads the same way.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

from .porting import Incompatible

REMOVED_IN = "0.20.0"
# No slash: a signature reads one as a path.
REMOVED_BY = "TVM pull request #17656"
# The modules that change deleted, and how a message names them.
REMOVED = {"tvm.relay": "Relay", "tvm.autotvm": "AutoTVM",
           "tvm.auto_scheduler": "the auto-scheduler", "tvm.contrib.graph_executor":
           "Relay's graph executor"}


def removed_message(module: str) -> str:
    """What a run that needs `module` (under one of REMOVED) says."""
    top = next(name for name in REMOVED if module == name or module.startswith(f"{name}."))
    what = REMOVED[top]
    also = "" if top == "tvm.relay" else " with Relay"
    return (f"{what} ({module}) was removed in TVM {REMOVED_IN}{also} ({REMOVED_BY}); this "
            f"Relay-era script needs it")


def removed_module(name: str) -> bool:
    """Whether `name` is one of the removed modules or inside one."""
    return any(name == top or name.startswith(f"{top}.") for top in REMOVED)


class RelayRemoved(Incompatible, ModuleNotFoundError):
    """An import of a module that TVM removed with Relay.

    Its `name` is left unset: the import system drops a ModuleNotFoundError whose name is the
    module asked for in `from tvm import relay` and raises its own "cannot import name"
    instead, which says nothing of why."""

    def __init__(self, module: str) -> None:
        super().__init__(removed_message(module))
        self.module = module


class RemovedModuleFinder:
    """Answers an import of a removed module (one no other finder found) with RelayRemoved."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if removed_module(fullname):
            raise RelayRemoved(fullname)
        return None


def install() -> None:
    """Put the finder last on sys.meta_path (once)."""
    if not any(isinstance(finder, RemovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(RemovedModuleFinder())


def _attribute_gap(exc: BaseException) -> str | None:
    """`tvm.relay` (or `tvm.contrib.graph_executor`, ...) read off an imported module."""
    if not isinstance(exc, AttributeError) or not isinstance(exc.name, str):
        return None
    owner: Any = getattr(exc, "obj", None)
    owner_name = getattr(owner, "__name__", None) if isinstance(owner, ModuleType) else None
    if owner_name is None:
        return None
    module = f"{owner_name}.{exc.name}"
    return module if removed_module(module) else None


def removed_module_message(exc: BaseException) -> str | None:
    """The Relay-era message where `exc`, or an exception it was raised while handling (a script
    that catches the ImportError and exits), is a removed module's; else None. A clean exit is
    the script's own answer and stays one."""
    if isinstance(exc, SystemExit) and exc.code in (None, 0):
        return None
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, RelayRemoved):
            return str(current)
        module = _attribute_gap(current)
        if module is not None:
            return removed_message(module)
        current = current.__cause__ or current.__context__
    return None
