"""Local pinned environments: one virtual environment per environment id under TVMREPRO_HOME.

Made with uv and one package cache shared by all environments, so ten
environments cost one download of each wheel. Provisioning is idempotent and
safe to run twice at once: a file lock per environment serializes makers,
and an environment appears (by an atomic rename) only once it is complete
and its TVM imports. Its fingerprint.json records the pins, TVM's libinfo
and the pass names this TVM has.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tvmrepro.environments import Environment
from tvmrepro.errors import ProvisionError
from tvmrepro.settings import Settings

FINGERPRINT = "fingerprint.json"
# Run inside an environment (a local one, or an image): what TVM it really has.
TVM_FACTS_PROBE = """
import json, sys, tvm, tvm.relax
names = set()
for mod in ("relax", "tirx", "tir"):
    ns = getattr(getattr(tvm, mod, None), "transform", None)
    names.update(n for n in dir(ns) if n[:1].isupper() and callable(getattr(ns, n))) if ns else None
print(json.dumps({"version": tvm.__version__, "python": sys.version.split()[0],
                  "libinfo": {str(k): str(v) for k, v in tvm.support.libinfo().items()},
                  "passes": sorted(names)}))
"""


def env_dir(settings: Settings, env: Environment) -> Path:
    """Where this environment lives (whether provisioned or not)."""
    return settings.envs_dir / env.id


def env_python(settings: Settings, env: Environment) -> Path:
    """The environment's interpreter."""
    return env_dir(settings, env) / "bin" / "python"


def read_fingerprint(settings: Settings, env: Environment) -> dict[str, Any] | None:
    """The fingerprint of a complete, up-to-date environment, else None."""
    try:
        data: dict[str, Any] = json.loads((env_dir(settings, env) / FINGERPRINT).read_text())
    except (OSError, ValueError):
        return None
    return data if data.get("packages") == env.packages else None


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def base_interpreter(version: str) -> str:
    """A real (not shim, not venv) interpreter of this Python version for new environments."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        candidate = getattr(sys, "_base_executable", sys.executable)
    else:
        candidate = shutil.which(f"python{version}") or ""
    if not candidate:
        raise ProvisionError(f"no Python {version} interpreter found to make environments with")
    out = subprocess.run([candidate, "-c", "import sys; print(sys.executable)"],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise ProvisionError(f"Python {version} at {candidate} does not run: {out.stderr.strip()}")
    return os.path.realpath(out.stdout.strip())


def _uv(args: list[str], settings: Settings) -> None:
    # The system's certificate store: package indexes behind a TLS-inspecting proxy need it.
    env = {**os.environ, "UV_CACHE_DIR": str(settings.cache_dir), "UV_PYTHON_DOWNLOADS": "never",
           "UV_NATIVE_TLS": "1"}
    wheelhouse = os.environ.get("TVMREPRO_WHEELHOUSE")
    extra = ["--find-links", wheelhouse] if wheelhouse else []
    proc = subprocess.run([sys.executable, "-m", "uv", *args, *extra], env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ProvisionError(f"uv {args[0]} {args[1]} failed:\n{proc.stderr.strip()[-4000:]}")


def _probe(python: Path) -> dict[str, Any]:
    proc = subprocess.run([str(python), "-c", TVM_FACTS_PROBE], capture_output=True, text=True,
                          check=False, env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    if proc.returncode != 0:
        raise ProvisionError(f"TVM does not import with these pins:\n{proc.stderr.strip()[-4000:]}")
    facts: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return facts


def provision(settings: Settings, env: Environment) -> dict[str, Any]:
    """Make the environment if it is missing or stale; return its fingerprint."""
    existing = read_fingerprint(settings, env)
    if existing:
        return existing
    with _locked(settings.envs_dir / f".{env.id}.lock"):
        existing = read_fingerprint(settings, env)
        if existing:  # another process made it while we waited for the lock
            return existing
        staging = Path(tempfile.mkdtemp(prefix=f".{env.id}.", dir=settings.envs_dir))
        try:
            fingerprint = _build(settings, env, staging)
            _publish(env_dir(settings, env), staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return fingerprint


def _build(settings: Settings, env: Environment, venv: Path) -> dict[str, Any]:
    """Install exactly the pins into a new virtual environment and record what TVM it has."""
    # A venv's python finds its site-packages relative to itself, so it may be built
    # under one name and published under another.
    _uv(["venv", "--quiet", "--python", base_interpreter(env.python), str(venv)], settings)
    _uv(["pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
         "--no-deps", *env.requirements()], settings)
    fingerprint = {"id": env.id, "packages": env.packages, **_probe(venv / "bin" / "python")}
    (venv / FINGERPRINT).write_text(json.dumps(fingerprint, indent=2))
    os.chmod(venv, 0o755)
    return fingerprint


def _publish(target: Path, built: Path) -> None:
    """Point `target` at the new build in one atomic step; readers never see it missing.

    `target` is a symbolic link to the build's directory. A sandbox started from the
    old build keeps its own mount of it; old builds go when the next one is published.
    """
    link = built.with_name(built.name + ".link")
    link.symlink_to(built.name)
    if target.is_dir() and not target.is_symlink():  # a layout without links: replace it
        shutil.rmtree(target)
    previous = os.readlink(target) if target.is_symlink() else None
    os.replace(link, target)
    if previous and previous != built.name:
        shutil.rmtree(target.parent / previous, ignore_errors=True)
