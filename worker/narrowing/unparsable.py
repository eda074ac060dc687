"""Module edits that TVMScript certainly refuses, told from the text alone (no TVM, no sandbox).

A reduction takes an edit only once the harness has parsed it (worker/narrowing/judging.py), so an edit
that cannot parse can never be taken: leaving it out changes no answer, and saves its sandbox.
About half of the founding reduction's edits were such: a binding dropped while a later line
still reads it (TVMScript: `Undefined variable: gv_2`), a Relax function's `return`
dropped (`A Relax function must have a return value`), or a function dropped that another
still calls as `cls.f` (`Cannot find the function`). This module says so only where it is
sure: every name the text could define counts as defined (module-level names, the parser's
own globals, builtins, anything bound anywhere in the function, its nested functions included),
and a text with a construct it does not follow (comprehensions, lambdas, `global`, `import *`,
dynamic namespaces) is never refused.
"""

from __future__ import annotations

import ast
import builtins
from collections import Counter

# What TVMScript's parser defines for every module (tvm/script/parser/core/entry.py,
# _default_globals, 0.25 to 0.27), and what a case's prelude defines (harness/modes.py).
PARSER_GLOBALS = frozenset({"tvm", "I", "ir", "T", "tir", "R", "relax", "Tx", "tirx", "Axis",
                            "TypeVar", "MODULE_JSON"})
_BUILTINS = frozenset(dir(builtins))
# Constructs whose scoping this module does not follow: a text with one is never refused.
_UNFOLLOWED = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
               ast.Global, ast.Nonlocal, ast.NamedExpr, ast.Delete, ast.Match)
_DYNAMIC = frozenset({"globals", "locals", "vars", "exec", "eval", "setattr", "__builtins__"})


def why_unparsable(source: str) -> str | None:
    """Why TVMScript certainly refuses this module text, or None where it may parse."""
    try:
        tree = ast.parse(source)
        compile(tree, "<edit>", "exec", dont_inherit=True)  # what the parser lets through
    except (SyntaxError, ValueError):
        return "not valid Python"
    if not all(_followed(node) for node in ast.walk(tree)):
        return None
    known = PARSER_GLOBALS | _BUILTINS | _module_level_names(tree)
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        members = {n.id for stmt in cls.body for n in _outside_functions(stmt)
                   if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        members |= {n.name for n in cls.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        for func in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
            why = _refused_function(func, known) or _missing_member(func, cls.name, members)
            if why is not None:
                return why
    return None


def _followed(node: ast.AST) -> bool:
    """Whether this module follows the scoping of `node` (else it refuses nothing)."""
    if isinstance(node, _UNFOLLOWED):
        return False
    if isinstance(node, ast.ImportFrom):
        return all(alias.name != "*" for alias in node.names)
    return not (isinstance(node, ast.Name) and node.id in _DYNAMIC)


def _missing_member(func: ast.FunctionDef, module: str, members: set[str]) -> str | None:
    """A function that calls `cls.f` (`cls = Module`) or `Module.f` where the module has no f
    (TVMScript: `Cannot find the function f in the current IRModule`)."""
    to_module = Counter(t.id for n in ast.walk(func) if isinstance(n, ast.Assign)
                        and isinstance(n.value, ast.Name) and n.value.id == module
                        for t in n.targets if isinstance(t, ast.Name))
    stored = Counter(n.id for n in ast.walk(func)
                     if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    stored.update(n.arg for n in ast.walk(func) if isinstance(n, ast.arg))
    # Aliases of the module: names bound to it and to nothing else.
    aliases = {name for name, count in to_module.items() if stored[name] == count}
    if stored[module] == 0:
        aliases.add(module)
    for node in ast.walk(func):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in aliases and node.attr not in members:
            return f"function {func.name} calls {node.value.id}.{node.attr}, which the module lacks"
    return None


def _module_level_names(tree: ast.Module) -> set[str]:
    """Every name bound outside the functions (imports, assignments, classes) and every
    function's own name (a module's functions are named in its class body)."""
    names: set[str] = set()
    for node in _outside_functions(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
    return names


def _outside_functions(node: ast.AST) -> list[ast.AST]:
    """`node` and what it holds, not descending into a function's arguments or body (the
    function node itself is listed)."""
    found, todo = [], [node]
    while todo:
        current = todo.pop()
        found.append(current)
        if not isinstance(current, ast.FunctionDef | ast.AsyncFunctionDef):
            todo.extend(ast.iter_child_nodes(current))
        else:
            todo.extend(current.decorator_list)
    return found


def _refused_function(func: ast.FunctionDef, known: frozenset[str] | set[str]) -> str | None:
    """A module function that reads a name nothing binds, or holds a Relax function (itself or
    a nested one) with no `return` of its own."""
    bound: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                        | ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) \
                and node.id not in bound and node.id not in known:
            return f"function {func.name} reads {node.id}, which nothing defines"
    for inner in (n for n in ast.walk(func) if isinstance(n, ast.FunctionDef) and _is_relax(n)):
        own = [n for stmt in inner.body for n in _outside_functions(stmt)]  # not nested ones'
        if not any(isinstance(n, ast.Return) for n in own):
            return f"Relax function {inner.name} has no return"
    return None


def _is_relax(func: ast.FunctionDef) -> bool:
    """Decorated `@R.function` or `@R.function(...)`."""
    for decorator in func.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute) and target.attr == "function" \
                and isinstance(target.value, ast.Name) and target.value.id == "R":
            return True
    return False
