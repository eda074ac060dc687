"""The installed command line run as a user runs it, on a given TVMREPRO_HOME."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import NEW_ENV, OLD_ENV, REPO


def tvmrepro(*args: str, home: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the installed command line with TVMREPRO_HOME set."""
    cli = Path(sys.executable).parent / "tvmrepro"
    return subprocess.run([str(cli), *args], capture_output=True, text=True, input=stdin,
                          env={"PATH": "/usr/bin:/bin", "TVMREPRO_HOME": str(home)}, cwd=REPO)


def run_json(case: Path, home: Path) -> list[dict[str, Any]]:
    """`tvmrepro run CASE --local --env OLD --env NEW --json`, parsed."""
    proc = tvmrepro("run", str(case), "--local", "--env", OLD_ENV, "--env", NEW_ENV, "--json",
                    home=home)
    assert proc.returncode == 0, proc.stderr
    runs: list[dict[str, Any]] = json.loads(proc.stdout)["runs"]
    return runs


def bisect_json(case: Path, *args: str, home: Path) -> dict[str, Any]:
    """`tvmrepro bisect CASE --local --json ARGS`, parsed."""
    proc = tvmrepro("bisect", str(case), "--local", "--json", *args, home=home)
    assert proc.returncode == 0, proc.stderr
    found: dict[str, Any] = json.loads(proc.stdout)
    return found
