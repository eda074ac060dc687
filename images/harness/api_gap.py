"""An API that this TVM lacks, wherever it shows: an import, an attribute, a TVMScript diagnostic.

Such a run is `incompatible` (the report needs another release), with the missing name and, where
this TVM has a name close to it, "did you mean ...?": a mistyped `relax.transform.FuseTRI()` is
missing on every release, and the hint is what tells the reader so.

What counts:
- an ImportError of a tvm module, or of a name from one;
- an AttributeError of a tvm module (`module 'tvm.relax' has no attribute 'AnyType'`), of a TVM
  class (`type object 'Tensor' has no attribute 'from_ty'`), or of a TVM object when the
  script itself asked for it (`func.ret_ty` on 0.25). An AttributeError that TVM's own Python
  raises about its own objects is a TVM bug (`'ShapeStructInfo' object has no attribute
  'dtype'` inside the ONNX importer) and stays an `error`;
- an operator that is not registered (`Op.get`, an AttributeError from TVM's C++);
- a TVMScript DiagnosticError reporting a missing attribute of a dialect (`T.BitwiseAnd`,
  `R.func_ret_ty`, `I.meta_var` on 0.25: the parser reports what its evaluation raised);
- a keyword argument a TVM function of this release does not take, passed by the script itself
  (`relax.op.image.affine_grid(..., align_corners=True)` on 0.25: a newer release's parameter).
  The call never entered the function, so the innermost frame is the script's; a TVM function
  passing a wrong keyword to another is TVM's bug and stays an `error`.
"""

from __future__ import annotations

import difflib
import inspect
import pkgutil
import re
import sys
import traceback
from collections.abc import Iterable
from typing import Any

_MODULE_ATTRIBUTE = re.compile(r"module '(?P<module>tvm[\w.]*)' has no attribute '(?P<name>\w+)'")
_OBJECT_ATTRIBUTE = re.compile(r"object has no attribute '(?P<name>\w+)'")
_UNREGISTERED_OP = re.compile(r"Operator (?P<name>[\w.]+) is not registered")
_IMPORTED_NAME = re.compile(r"cannot import name '(?P<name>\w+)'")
_UNEXPECTED_KEYWORD = re.compile(
    r"^(?P<callee>[\w.]+)\(\) got an unexpected keyword argument '(?P<name>\w+)'")


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """"; did you mean X?" for the known name closest to a mistyped one (case aside), or "".

    The same rule as the project's own (tvmrepro/errors.py), which the harness cannot import."""
    by_lower = {k.lower(): k for k in known if not k.startswith("_") and k != name}
    near = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.75)
    return f"; did you mean {by_lower[near[0]]}?" if near else ""


def _module_named(name: str) -> Any:
    """The loaded module called `name` (a dialect may be named otherwise than its import path:
    T's module calls itself tvm.tirx.script)."""
    found = sys.modules.get(name)
    if found is not None:
        return found
    return next((m for m in list(sys.modules.values())
                 if getattr(m, "__name__", None) == name), None)


def _submodules(parent: str) -> list[str]:
    module = sys.modules.get(parent)
    paths = getattr(module, "__path__", None)
    return [info.name for info in pkgutil.iter_modules(paths)] if paths else []


def _in_tvm(filename: str) -> bool:
    return filename.endswith(".py") and ("/tvm/" in filename or "/tvm_ffi/" in filename)


def _raised_in_tvm(exc: BaseException) -> bool:
    """Whether the innermost Python frame the exception went through is TVM's own code."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and _in_tvm(frames[-1].filename)


def _of_tvm(obj: Any) -> bool:
    owner = obj if isinstance(obj, type) else type(obj)
    return str(getattr(owner, "__module__", "")).startswith("tvm")


def _import_gap(exc: ImportError, text: str) -> str | None:
    module = getattr(exc, "name", None) or ""
    if not (module.startswith("tvm") or "tvm" in text):
        return None
    named = _IMPORTED_NAME.search(text)
    if named is not None and module in sys.modules:
        return text + did_you_mean(named["name"], dir(sys.modules[module]))
    if isinstance(exc, ModuleNotFoundError) and "." in module:
        parent, _, leaf = module.rpartition(".")
        return text + did_you_mean(leaf, _submodules(parent))
    return text


def _attribute_gap(exc: AttributeError, text: str) -> str | None:
    obj, name = getattr(exc, "obj", None), getattr(exc, "name", None)
    module_attribute = _MODULE_ATTRIBUTE.match(text)
    if module_attribute is not None:
        module = obj if obj is not None else _module_named(module_attribute["module"])
        return text + did_you_mean(module_attribute["name"], dir(module) if module else ())
    if _UNREGISTERED_OP.search(text):
        return text
    attribute = _OBJECT_ATTRIBUTE.search(text) or re.search(r"has no attribute '(\w+)'", text)
    if obj is None or attribute is None or not _of_tvm(obj) or _raised_in_tvm(exc):
        return None
    return text + did_you_mean(name or attribute.group(1), dir(obj))


def _diagnostic_gap(text: str) -> str | None:
    found = _MODULE_ATTRIBUTE.search(text)
    if found is None:
        return None
    module = _module_named(found["module"])
    return text + did_you_mean(found["name"], dir(module) if module else ())


def _tvm_callable(qualname: str) -> Any:
    """The TVM function or class method called `qualname` ("affine_grid", "PassContext.__init__")
    in a loaded tvm module, or None."""
    head, *rest = qualname.split(".")
    for name, module in list(sys.modules.items()):
        if not name.startswith(("tvm.", "tvm_ffi")) or module is None:
            continue
        found = getattr(module, head, None)
        for part in rest:
            found = getattr(found, part, None)
        if callable(found) and str(getattr(found, "__module__", "")).startswith("tvm"):
            return found
    return None


def _parameters(function: Any) -> list[str]:
    try:
        return list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return []


def _keyword_gap(exc: TypeError, text: str) -> str | None:
    found = _UNEXPECTED_KEYWORD.match(text)
    if found is None or _raised_in_tvm(exc):
        return None
    function = _tvm_callable(found["callee"])
    if function is None:
        return None
    return text + did_you_mean(found["name"], _parameters(function))


def api_gap(exc: BaseException, message: str) -> str | None:
    """The message of a run that needs an API this TVM lacks (with a hint where one is near),
    or None when `exc` is something else. `message` is the error's first line."""
    if isinstance(exc, ImportError):
        return _import_gap(exc, message)
    if isinstance(exc, AttributeError):
        return _attribute_gap(exc, message)
    if isinstance(exc, TypeError):
        return _keyword_gap(exc, message)
    if type(exc).__name__ == "DiagnosticError":  # TVMScript's parser reporting an error
        return _diagnostic_gap(message)
    return None
