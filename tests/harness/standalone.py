"""A result's standalone reproducer run as a user runs it: the environment's Python, no sandbox."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tvmrepro.environments import Environment
from tvmrepro.settings import Settings
from worker.environments.provision import env_python


def run_standalone(settings: Settings, env: Environment, script: str, tmp_path: Path) -> str:
    """Run the script with the environment's interpreter, outside any sandbox; its output."""
    path = tmp_path / f"repro-{env.id}.py"
    path.write_text(script)
    proc = subprocess.run([str(env_python(settings, env)), str(path)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    return proc.stdout + proc.stderr
