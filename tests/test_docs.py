"""The documentation: the README stays one screen that indexes docs/, the generated schemas are
current, and nothing the repository ships points outside it."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

from tests.conftest import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"
README_MAX_LINES = 200
SCHEMAS_SCRIPT = REPO / "scripts" / "docs-schemas"
# What lies beside a checkout is not the repository's: a reader of the repository has none of it.
OUTSIDE = ("../shared", "shared/cases", "shared/history", "CONTRACT.md")
CODE_FOLDERS = ("tvmrepro", "service", "worker", "cli", "images", "tests", "bench", "scripts")
DOCS_LINK = re.compile(r"\]\(docs/([\w-]+\.md)(?:#[\w-]*)?\)")


def shipped_files() -> list[Path]:
    """The README, every file of docs/, and the project's Python (scripts with a python shebang too)."""
    found = [README, *(path for path in DOCS.rglob("*") if path.is_file())]
    for folder in CODE_FOLDERS:
        for path in sorted((REPO / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and (
                    path.suffix == ".py" or _python_script(path)):
                found.append(path)
    return [path for path in found if path != Path(__file__).resolve()]


def _python_script(path: Path) -> bool:
    with path.open("rb") as file:
        first = file.readline()
    return first.startswith(b"#!") and b"python" in first


def outside_references(paths: list[Path]) -> list[str]:
    """'path:line: text' for every line that names something outside the repository."""
    found = []
    for path in paths:
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if any(name in line for name in OUTSIDE):
                shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
                found.append(f"{shown}:{number}: {line.strip()[:100]}")
    return found


def test_the_readme_is_one_screen() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines, over {README_MAX_LINES}: move the detail into docs/")


def test_the_readme_indexes_every_page_of_docs() -> None:
    linked = set(DOCS_LINK.findall(README.read_text()))
    pages = {path.name for path in DOCS.glob("*.md")} - {"index.md"}
    assert not linked - pages, f"README.md links pages docs/ lacks: {sorted(linked - pages)}"
    assert not pages - linked, f"README.md's index lacks: {sorted(pages - linked)}"


def test_the_schemas_are_current() -> None:
    script = runpy.run_path(str(SCHEMAS_SCRIPT))
    assert script["stale"](script["schemas"]()) == [], (
        f"docs/schemas/ is out of date: run {script['COMMAND']}")


def test_nothing_refers_outside_the_repository() -> None:
    found = outside_references(shipped_files())
    assert not found, ("these refer to files outside the repository (the contract is "
                       "docs/contract.md):\n" + "\n".join(found))


def test_an_outside_reference_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("".join(f"see {name} there\n" for name in OUTSIDE) + "see docs/contract.md\n")
    assert outside_references([page]) == [
        f"{page}:{number}: see {name} there" for number, name in enumerate(OUTSIDE, 1)]
