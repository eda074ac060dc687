"""The import rules that keep the architecture readable (README, "Architecture").

    tvmrepro/        the shared core: imports none of service, worker, cli
    service/         the HTTP side: imports the core only
    worker/          the Celery side: imports the core only
    cli/             the command line: may import all of the above
    images/harness/  runs inside a pinned TVM: imports nothing of the project
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

PROJECT = {"tvmrepro", "service", "worker", "cli", "images"}
FORBIDDEN = {
    "tvmrepro": {"service", "worker", "cli"},
    "service": {"worker", "cli"},
    "worker": {"service", "cli"},
    "images/harness": PROJECT,
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
