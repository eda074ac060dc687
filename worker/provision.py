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
    target = env_dir(settings, env)
    with _locked(settings.envs_dir / f".{env.id}.lock"):
        existing = read_fingerprint(settings, env)
        if existing:  # another process made it while we waited for the lock
            return existing
        staging = Path(tempfile.mkdtemp(prefix=f".{env.id}.", dir=settings.envs_dir))
        try:
            _uv(["venv", "--quiet", "--python", base_interpreter(env.python), str(staging)], settings)
            # uv's venv points at its own path; build in place of the final name is not
            # possible atomically, so build under staging and fix nothing: a venv's
            # python finds its site-packages relative to itself.
            _uv(["pip", "install", "--quiet", "--python", str(staging / "bin" / "python"),
                 "--no-deps", *env.requirements()], settings)
            facts = _probe(staging / "bin" / "python")
            fingerprint = {"id": env.id, "packages": env.packages, **facts}
            (staging / FINGERPRINT).write_text(json.dumps(fingerprint, indent=2))
            os.chmod(staging, 0o755)
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return fingerprint
