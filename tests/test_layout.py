"""The import rules that keep the architecture readable (README, "Architecture").

    tvmrepro/        the shared core: imports none of service, worker, cli
    service/         the HTTP side: imports the core only
    worker/          the Celery side: imports the core only
    cli/             the command line: may import all of the above
    images/harness/  runs inside a pinned TVM: imports nothing of the project
    bench/           measures the rest: may import all of it (and the tests' browser);
                     nothing imports bench/ or tests/
No module imports another's private (underscored) name: what a sibling needs is public.
"""

from __future__ import annotations

import ast
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
