"""The import rules that keep the architecture readable (README, "Architecture").

    tvmrepro/        the shared core: imports none of service, worker, cli
    service/         the HTTP side: imports the core only
    worker/          the Celery side: imports the core only
    cli/             the command line: may import all of the above
    images/harness/  runs inside a pinned TVM: imports nothing of the project
    bench/           measures the rest: may import all of it (and the tests' browser);
                     nothing imports bench/ or tests/
No module imports another's private (underscored) name: what a sibling needs is public.
The store (tvmrepro/store/) is persistence only: it imports no bisection, narrowing or
comparison logic (the job layer settles jobs and calls it). No module of service/, worker/,
tvmrepro/ or cli/ is over MAX_MODULE_LINES lines (a module holds a concept however long that
takes; past this, ask whether it is two), and no function over MAX_FUNCTION_LINES.
tvmrepro/'s top level keeps the shared vocabulary only (at most MAX_TOP_MODULES modules; the
job layer is tvmrepro/jobs/, a package per kind). No project module imports itself back,
however indirectly: the graph of every import (inside functions too) has no circle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

PROJECT = {"tvmrepro", "service", "worker", "cli", "images"}
FORBIDDEN = {
    "tvmrepro": {"service", "worker", "cli", "bench", "tests"},
    "service": {"worker", "cli", "bench", "tests"},
    "worker": {"service", "cli", "bench", "tests"},
    "cli": {"bench", "tests"},
    "images/harness": PROJECT | {"bench", "tests"},
}


def imported_packages(path: Path) -> set[str]:
    """Top-level packages a module imports (anywhere in it, functions included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def violations(package: str) -> list[str]:
    """'module imports package' for every import the rules forbid in `package`."""
    found = []
    for path in sorted((REPO / package).rglob("*.py")):
        for name in sorted(imported_packages(path) & FORBIDDEN[package]):
            found.append(f"{path.relative_to(REPO)} imports {name}")
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_import_rules_hold(package: str) -> None:
    assert violations(package) == []


def test_the_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text("def f():\n    from worker.tasks import run\n")
    assert imported_packages(module) == {"worker"}


def private_imports(path: Path) -> list[str]:
    """'module imports name from other' for each underscored name it takes from another module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__":
            found += [f"{path.relative_to(REPO)} imports {alias.name} from {node.module}"
                      for alias in node.names
                      if alias.name.startswith("_") and not alias.name.startswith("__")]
    return found


@pytest.mark.parametrize("package", sorted({*FORBIDDEN, "bench"}))
def test_no_module_imports_a_private_name(package: str) -> None:
    assert [hit for path in sorted((REPO / package).rglob("*.py"))
            for hit in private_imports(path)] == []


def test_the_check_sees_a_private_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    module = tmp_path / "bad.py"
    module.write_text("from cli.output import _hidden, shown\n")
    assert private_imports(module) == ["bad.py imports _hidden from cli.output"]


# The store imports nothing of the job layer (tvmrepro/jobs/); opening it loads none of the
# domain logic either: bisections, narrowings (reduce, extract), the comparisons and symbol
# traces of a finished job, and the layer that settles them (the wire models it reads and the
# tracker's answers they hold excepted).
STORE_FORBIDDEN = ("tvmrepro.jobs",)
LOGIC = ("tvmrepro.jobs.bisect", "tvmrepro.jobs.narrow", "tvmrepro.jobs.comparisons",
         "tvmrepro.jobs.symbols", "tvmrepro.jobs.settling", "tvmrepro.jobs.oracles",
         "tvmrepro.jobs.kinds", "tvmrepro.jobs.run")
SIZED = ("service", "worker", "tvmrepro", "cli")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 50


def imported_modules(path: Path) -> set[str]:
    """Dotted names a module imports (`from tvmrepro.store import rows` gives tvmrepro.store.rows)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def store_violations(root: Path) -> list[str]:
    """'module imports name' for each logic module a store module imports."""
    return [f"{path.relative_to(root)} imports {name}"
            for path in sorted((root / "tvmrepro" / "store").rglob("*.py"))
            for name in sorted(imported_modules(path))
            if name.startswith(STORE_FORBIDDEN)]


def test_the_store_imports_no_domain_logic() -> None:
    assert sorted((REPO / "tvmrepro" / "store").rglob("*.py"))  # the rule checks something
    assert store_violations(REPO) == []


def test_the_check_sees_the_store_import_logic(tmp_path: Path) -> None:
    (tmp_path / "tvmrepro" / "store").mkdir(parents=True)
    (tmp_path / "tvmrepro" / "store" / "x.py").write_text(
        "from tvmrepro.jobs.bisect import logic\nfrom tvmrepro.jobs.comparisons import compare\n"
        "from tvmrepro.store.rows import JobRow\n")
    assert store_violations(tmp_path) == [
        "tvmrepro/store/x.py imports tvmrepro.jobs.bisect",
        "tvmrepro/store/x.py imports tvmrepro.jobs.bisect.logic",
        "tvmrepro/store/x.py imports tvmrepro.jobs.comparisons",
        "tvmrepro/store/x.py imports tvmrepro.jobs.comparisons.compare"]


def loaded_with_the_store() -> list[str]:
    """The logic modules that opening the store loads, however indirectly (a fresh process)."""
    probe = ("import sys, tvmrepro.store\n"
             "print('\\n'.join(m for m in sorted(sys.modules) if m.startswith('tvmrepro.')))")
    loaded = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.split()
    assert "tvmrepro.store" in loaded  # the probe saw the store itself
    return [name for name in loaded if name.startswith(LOGIC)]


def test_opening_the_store_loads_no_domain_logic() -> None:
    # Not only its own imports: the rows and wire models it reads pull in none either.
    assert loaded_with_the_store() == []


def oversized(path: Path, root: Path) -> list[str]:
    """The module if it is over MAX_MODULE_LINES, and each function over MAX_FUNCTION_LINES."""
    text = path.read_text()
    name = path.relative_to(root)
    found = ([f"{name}: {len(text.splitlines())} lines"]
             if len(text.splitlines()) > MAX_MODULE_LINES else [])
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                found.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    return found


@pytest.mark.parametrize("package", SIZED)
def test_no_module_or_function_is_too_long(package: str) -> None:
    assert [hit for path in sorted((REPO / package).rglob("*.py"))
            for hit in oversized(path, REPO)] == []


def test_the_check_sees_a_long_function(tmp_path: Path) -> None:
    module = tmp_path / "long.py"
    body = "".join(f"    x{n} = {n}\n" for n in range(MAX_FUNCTION_LINES))
    module.write_text(f"def short():\n    pass\n\n\ndef long():\n{body}")
    assert oversized(module, tmp_path) == [f"long.py:5 long: {MAX_FUNCTION_LINES + 1} lines"]


MAX_TOP_MODULES = 20


def test_the_core_keeps_only_its_shared_vocabulary_at_its_top() -> None:
    top = sorted(path.name for path in (REPO / "tvmrepro").glob("*.py"))
    assert "lifecycle.py" in top  # the rule counts the modules there
    assert len(top) <= MAX_TOP_MODULES, top


def module_name(path: Path, root: Path) -> str:
    """The dotted name of a module file under root (a package's __init__.py: the package)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, in functions too, but those under
    `if TYPE_CHECKING:` (they never run, so they close no circle)."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        pending.extend(ast.iter_child_nodes(node))
    return found


def import_graph(root: Path, packages: set[str]) -> dict[str, set[str]]:
    """Module -> the project modules it imports (`from a.b import c` is a.b.c where that is a
    module, else a.b); a package's parents are left out (importing a.b.c runs a/__init__.py,
    but a parent that imports its child back closes no circle)."""
    files = {module_name(path, root): path for package in sorted(packages)
             for path in (root / package).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        found: set[str] = set()
        for node in runtime_imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif node.level == 0 and node.module:
                found.update(f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}"
                             in files else node.module for alias in node.names)
        graph[name] = {other for other in found if other in files and other != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each group of modules that import each other, however indirectly (Tarjan's strongly
    connected components of more than one module), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = [stack.pop()]
            while group[-1] != node:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


@pytest.mark.parametrize("package", sorted(PROJECT))
def test_no_import_circle(package: str) -> None:
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    found = circles(import_graph(REPO, PROJECT))
    assert [group for group in found
            if any(name.split(".")[0] == package for name in group)] == []


def test_the_check_sees_a_circle_through_a_function(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "__init__.py").write_text("from p.a import f\n")
    (tmp_path / "p" / "a.py").write_text("from p import b\n\ndef f():\n    return b\n")
    (tmp_path / "p" / "b.py").write_text("def g():\n    from p.c import h\n    return h\n")
    (tmp_path / "p" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nimport p.a\nif TYPE_CHECKING:\n    import p.d\n"
        "def h():\n    pass\n")
    (tmp_path / "p" / "d.py").write_text("import p.c\n")
    graph = import_graph(tmp_path, {"p"})
    assert graph["p.a"] == {"p.b"} and graph["p.c"] == {"p.a"}  # p.d only when type-checking
    assert circles(graph) == [["p.a", "p.b", "p.c"]]
