"""The import rules that keep the architecture readable (README, "Architecture").

    tvmrepro/        the shared core: imports none of service, worker, cli
    service/         the HTTP side: imports the core only
    worker/          the Celery side: imports the core only
    cli/             the command line: may import all of the above
    images/harness/  runs inside a pinned TVM: imports nothing of the project
    bench/           measures the rest: may import all of it (and the tests' browser);
                     nothing imports bench/ or tests/
No module imports another's private (underscored) name: what a sibling needs is public.
The store (tvmrepro/store*.py) is persistence only: it imports no bisection, narrowing or
comparison logic (the job layer settles jobs and calls it). No module of service/, worker/,
tvmrepro/ or cli/ is over MAX_MODULE_LINES lines, and no function over MAX_FUNCTION_LINES.
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


# The domain logic the store must not import: bisections, narrowings (reduce, extract), the
# comparisons and symbol traces of a finished job, and the job layer that settles them.
STORE_FORBIDDEN = ("tvmrepro.bisect", "tvmrepro.narrowing", "tvmrepro.comparisons",
                   "tvmrepro.symbols", "tvmrepro.settling", "tvmrepro.oracles",
                   "tvmrepro.suspects", "tvmrepro.reduce_report")
SIZED = ("service", "worker", "tvmrepro", "cli")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 50


def imported_modules(path: Path) -> set[str]:
    """Dotted names a module imports (`from tvmrepro import schema` gives tvmrepro.schema)."""
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
            for path in sorted((root / "tvmrepro").glob("store*.py"))
            for name in sorted(imported_modules(path))
            if name.startswith(STORE_FORBIDDEN)]


def test_the_store_imports_no_domain_logic() -> None:
    assert sorted((REPO / "tvmrepro").glob("store*.py"))  # the rule checks something
    assert store_violations(REPO) == []


def test_the_check_sees_the_store_import_logic(tmp_path: Path) -> None:
    (tmp_path / "tvmrepro").mkdir()
    (tmp_path / "tvmrepro" / "store_x.py").write_text(
        "from tvmrepro import bisection\nfrom tvmrepro.comparisons import compare\n"
        "from tvmrepro.rows import JobRow\n")
    assert store_violations(tmp_path) == [
        "tvmrepro/store_x.py imports tvmrepro.bisection",
        "tvmrepro/store_x.py imports tvmrepro.comparisons",
        "tvmrepro/store_x.py imports tvmrepro.comparisons.compare"]


def loaded_with_the_store() -> list[str]:
    """The logic modules that opening the store loads, however indirectly (a fresh process)."""
    probe = ("import sys, tvmrepro.store\n"
             "print('\\n'.join(m for m in sorted(sys.modules) if m.startswith('tvmrepro.')))")
    loaded = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.split()
    assert "tvmrepro.store" in loaded  # the probe saw the store itself
    return [name for name in loaded if name.startswith(STORE_FORBIDDEN)]


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
