"""Local pinned environments: one virtual environment per environment id under TVMREPRO_HOME.

Made with uv and one package cache shared by all environments, so ten
environments cost one download of each wheel. Provisioning is idempotent and
safe to run twice at once: a file lock per environment serializes makers,
and an environment appears (by an atomic rename) only once it is complete
and its TVM imports. Its fingerprint.json records the pins, TVM's libinfo
and the pass names this TVM has.

An environment id is a symbolic link to its current build. A sandbox holds the
build it runs from (`in_use`: a shared lock on the build's directory), and a
build that is no longer current is removed only once nobody holds it: by the
next provisioning, or by the runtime when the last run from it ends.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tvmrepro.environments import Environment
from tvmrepro.errors import ProvisionError
from tvmrepro.settings import Settings
from worker.environments.health import CANARY, CANARY_DIGEST
from worker.runtimes.base import Fingerprint

FINGERPRINT = "fingerprint.json"
IN_USE_ATTEMPTS = 5  # the link moved under us this often in a row: give up
# Run inside an environment (a local one, or an image): what TVM it really has.
TVM_FACTS_PROBE = """
import json, sys, tvm, tvm.relax
try:
    from tvm._version import commit_id
except ImportError:
    commit_id = None
names = set()
for mod in ("relax", "tirx", "tir"):
    ns = getattr(getattr(tvm, mod, None), "transform", None)
    names.update(n for n in dir(ns) if n[:1].isupper() and callable(getattr(ns, n))) if ns else None
""" + CANARY + """
print(json.dumps({"version": tvm.__version__, "python": sys.version.split()[0],
                  "libinfo": {str(k): str(v) for k, v in tvm.support.libinfo().items()},
                  "passes": sorted(names), "commit": commit_id, "health": health}))
"""
# The wheel's own record of its commit, read without importing TVM (for environments made
# before fingerprints recorded it).
_COMMIT_ID = re.compile(r"""^__commit_id__ = commit_id = ['"]([^'"]+)['"]""", re.MULTILINE)


def env_dir(settings: Settings, env: Environment) -> Path:
    """Where this environment lives (whether provisioned or not)."""
    return settings.envs_dir / env.key


def env_python(settings: Settings, env: Environment) -> Path:
    """The environment's interpreter."""
    return env_dir(settings, env) / "bin" / "python"


def read_fingerprint(settings: Settings, env: Environment) -> Fingerprint | None:
    """The fingerprint of a complete, up-to-date environment, else None."""
    try:
        data: Fingerprint = json.loads((env_dir(settings, env) / FINGERPRINT).read_text())
    except (OSError, ValueError):
        return None
    if data.get("packages") != env.installed:
        return None
    if "commit" not in data:
        data["commit"] = wheel_commit(env_dir(settings, env))
    return data


def provisioned(settings: Settings, envs: Iterable[Environment]) -> list[Environment]:
    """Those of `envs` that are provisioned here, complete and up to date."""
    return [env for env in envs if read_fingerprint(settings, env) is not None]


def wheel_commit(venv: Path) -> str | None:
    """The commit TVM was built from, as its wheel's tvm/_version.py says (`g7b5acb32b`)."""
    for version in venv.glob("lib/python*/site-packages/tvm/_version.py"):
        try:
            match = _COMMIT_ID.search(version.read_text())
        except OSError:
            continue
        if match:
            return match[1]
    return None


@contextmanager
def _locked(path: Path, wait: bool = True) -> Iterator[bool]:
    """Hold an exclusive lock on `path`; yields False (without holding it) when busy and not wait."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _provision_lock(settings: Settings, env: Environment) -> Path:
    return settings.envs_dir / f".{env.key}.lock"


@contextmanager
def in_use(settings: Settings, env: Environment) -> Iterator[Path]:
    """env's current build directory, kept from removal while the block runs."""
    link = env_dir(settings, env)
    for _ in range(IN_USE_ATTEMPTS):
        build = Path(os.path.realpath(link))
        try:
            fd = os.open(build, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue  # removed between reading the link and opening it
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            # Held, and still current: no provisioning can remove it now.
            if Path(os.path.realpath(link)) == build and (build / FINGERPRINT).is_file():
                yield build
                return
        finally:
            os.close(fd)  # releases the lock
    raise ProvisionError(f"environment {env.key} kept changing or vanished while a run started")


def _builds(settings: Settings, env: Environment) -> list[Path]:
    """Every build directory of env (current, old, or left by a provisioning that died)."""
    if not settings.envs_dir.is_dir():
        return []
    return [p for p in settings.envs_dir.glob(f".{env.key}.*") if p.is_dir() and not p.is_symlink()]


def _remove_if_unused(build: Path) -> bool:
    try:
        fd = os.open(build, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False  # a sandbox runs from it: the next collection takes it
    try:
        shutil.rmtree(build, ignore_errors=True)
    finally:
        os.close(fd)
    return True


def collect_builds(settings: Settings, env: Environment, wait: bool = True) -> list[Path]:
    """Remove env's builds that are not current and not in use; the ones removed.

    Under the environment's provisioning lock (so no build in progress is taken);
    with wait=False it does nothing while someone provisions.
    """
    with _locked(_provision_lock(settings, env), wait) as locked:
        if not locked:
            return []
        link = env_dir(settings, env)
        current = Path(os.path.realpath(link)) if link.is_symlink() else None
        # Compare resolved paths: the envs folder itself may be a link (test homes share one).
        return [b for b in _builds(settings, env)
                if Path(os.path.realpath(b)) != current and _remove_if_unused(b)]


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


def _uv(args: list[str], settings: Settings, extra: list[str] | None = None) -> None:
    # The system's certificate store: package indexes behind a TLS-inspecting proxy need it.
    env = {**os.environ, "UV_CACHE_DIR": str(settings.cache_dir), "UV_PYTHON_DOWNLOADS": "never",
           "UV_NATIVE_TLS": "1"}
    extra = [*(extra or []), *(["--find-links", str(settings.wheelhouse)]
                               if settings.wheelhouse else [])]
    proc = subprocess.run([sys.executable, "-m", "uv", *args, *extra], env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ProvisionError(f"uv {args[0]} {args[1]} failed:\n{proc.stderr.strip()[-4000:]}")


def torch_source(settings: Settings) -> list[str]:
    """uv's options that take torch's CPU build from its configured source (Settings.torch_wheels):
    a folder of wheels, or an index consulted beside PyPI for the best match of each exact pin."""
    source = settings.torch_wheels()
    if "://" in source and not source.startswith("file://"):
        return ["--extra-index-url", source, "--index-strategy", "unsafe-best-match"]
    return ["--find-links", source]


def _probe(python: Path) -> Fingerprint:
    proc = subprocess.run([str(python), "-c", TVM_FACTS_PROBE], capture_output=True, text=True,
                          check=False, env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    if proc.returncode != 0:
        raise ProvisionError(f"TVM does not import with these pins:\n{proc.stderr.strip()[-4000:]}")
    facts: Fingerprint = json.loads(proc.stdout.strip().splitlines()[-1])
    return facts


def provision(settings: Settings, env: Environment) -> Fingerprint:
    """Make the environment if it is missing or stale; return its fingerprint."""
    existing = read_fingerprint(settings, env)
    if existing and existing.get("canary") != CANARY_DIGEST:  # made before this canary
        return _recheck(settings, env)
    if existing:
        return existing
    with _locked(_provision_lock(settings, env)):
        existing = read_fingerprint(settings, env)
        if existing:  # another process made it while we waited for the lock
            return existing
        staging = Path(tempfile.mkdtemp(prefix=f".{env.key}.", dir=settings.envs_dir))
        try:
            fingerprint = _build(settings, env, staging)
            _publish(env_dir(settings, env), staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    collect_builds(settings, env)
    return fingerprint


def _recheck(settings: Settings, env: Environment) -> Fingerprint:
    """Take the fingerprint of an environment made before this canary (health.py), again."""
    with _locked(_provision_lock(settings, env)):
        venv = Path(os.path.realpath(env_dir(settings, env)))
        fingerprint: Fingerprint = {"id": env.id, "packages": env.installed,
                                    **_probe(venv / "bin" / "python"), "canary": CANARY_DIGEST}
        staged = venv / f".{FINGERPRINT}.new"
        staged.write_text(json.dumps(fingerprint, indent=2))
        os.replace(staged, venv / FINGERPRINT)  # a reader sees the old one or the new one
    return fingerprint


def _build(settings: Settings, env: Environment, venv: Path) -> Fingerprint:
    """Install exactly the pins into a new virtual environment and record what TVM it has."""
    # A venv's python finds its site-packages relative to itself, so it may be built
    # under one name and published under another.
    _uv(["venv", "--quiet", "--python", base_interpreter(env.python), str(venv)], settings)
    # Compiled now: a sandbox's Python may not write bytecode (its environment is read-only), and
    # compiling TVM's modules from source in every run doubles the import (1.7 s -> 3.6-4.2 s).
    _uv(["pip", "install", "--quiet", "--compile-bytecode", "--python",
         str(venv / "bin" / "python"), "--no-deps", *env.requirements()], settings,
        torch_source(settings) if env.frontends else None)
    fingerprint: Fingerprint = {"id": env.id, "packages": env.installed,
                                **_probe(venv / "bin" / "python"), "canary": CANARY_DIGEST}
    (venv / FINGERPRINT).write_text(json.dumps(fingerprint, indent=2))
    os.chmod(venv, 0o755)
    return fingerprint


def _publish(target: Path, built: Path) -> None:
    """Point `target` at the new build in one atomic step; readers never see it missing.

    `target` is a symbolic link to the build's directory. The previous build stays
    until `collect_builds` finds nobody using it.
    """
    link = built.with_name(built.name + ".link")
    link.symlink_to(built.name)
    if target.is_dir() and not target.is_symlink():  # a layout without links: an old build now
        os.rename(target, target.with_name(f".{target.name}.unlinked-{time.time_ns()}"))
    os.replace(link, target)
