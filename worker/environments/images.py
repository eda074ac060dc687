"""Environment images: built from the pins in images/environments.toml with the Docker SDK.

One recipe per device (images/Dockerfile, images/cuda.Dockerfile), the
environment chosen by build arguments: PACKAGES (the exact pins), ENV_ID and,
when given, BASE_IMAGE. Each build sends a small context made here: the
recipe, the harness and wheels/, holding the environment's wheels from a
wheelhouse when one is given (the build then runs with no network at all).
The image carries its pins (label `tvmrepro.packages`) and the digest of its
harness (`tvmrepro.harness`): a runtime refuses an image with other pins, and
a build of an image that is current is skipped. The build stage (the wheels
and the venv before it is copied) is removed after each build.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import NormalizedName, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from images import HARNESS_DIR, IMAGES_DIR
from tvmrepro.environments import Environment
from tvmrepro.errors import BadInput, RuntimeFault
from tvmrepro.lifecycle import harness_digest
from tvmrepro.settings import Settings

PACKAGES_LABEL = "tvmrepro.packages"
HARNESS_LABEL = "tvmrepro.harness"
ENVIRONMENT_LABEL = "tvmrepro.environment"
# The recipes label their build stages so: a stage (the venv, and the wheels it came from)
# is removed once the image is made, instead of staying behind as a dangling image.
BUILD_STAGE_FILTER = {"dangling": True, "label": "tvmrepro.stage=build"}
REPO_DIR = IMAGES_DIR.parent
# What the service image needs from the checkout (the rest is left out of its context).
SERVICE_SOURCES = ("pyproject.toml", "requirements.lock", "README.md", "tvmrepro", "service",
                   "worker", "cli", "images")
SERVICE_LOCK = REPO_DIR / "requirements.lock"  # the service's pinned dependencies
SERVICE_DOCKERFILE = "images/service.Dockerfile"
SERVICE_IMAGE = "tvmrepro/service:latest"
# Wheels the service image's build needs besides the locked dependencies: the build backend.
SERVICE_BUILD_REQUIREMENTS = ("setuptools>=68", "wheel")


@dataclass(frozen=True)
class Built:
    """One image built (or found current, `built` False): its tag, id and the build's time."""

    tag: str
    image_id: str
    seconds: float
    built: bool = True


def pins_text(env: Environment) -> str:
    """The PACKAGES build argument and label value: the exact requirements, space-separated."""
    return " ".join(env.requirements())


def current_image(client: Any, env: Environment) -> str | None:
    """The id of env's image when it carries env's pins and this harness, else None."""
    import docker.errors

    try:
        info = client.api.inspect_image(env.image)
    except docker.errors.ImageNotFound:
        return None
    labels = (info.get("Config") or {}).get("Labels") or {}
    current = (labels.get(PACKAGES_LABEL) == pins_text(env)
               and labels.get(HARNESS_LABEL) == harness_digest())
    return str(info["Id"]) if current else None


def _wheel_matches(path: Path, pins: dict[NormalizedName, Version]) -> bool:
    try:
        name, version, _, _ = parse_wheel_filename(path.name)
    except ValueError:
        return False
    return pins.get(canonicalize_name(name)) == version


def wheels_for(env: Environment, wheelhouse: Path) -> list[Path]:
    """The wheelhouse's wheels for exactly this environment's pins; BadInput names any missing."""
    pins = {canonicalize_name(name): Version(pin) for name, pin in env.packages.items()}
    found = [p for p in sorted(wheelhouse.glob("*.whl")) if _wheel_matches(p, pins)]
    have = {canonicalize_name(parse_wheel_filename(p.name)[0]) for p in found}
    missing = sorted(f"{n}=={pins[n]}" for n in pins if n not in have)
    if missing:
        raise BadInput("--wheelhouse", f"{wheelhouse} has no wheel for {', '.join(missing)} "
                       f"(fill it with: tvmrepro images wheels {wheelhouse} {env.id})")
    return found


def link_or_copy(source: Path, dest: Path) -> None:
    """Put `source` at dest: a hard link where both are on one disk, else a copy."""
    try:
        os.link(source, dest)  # the same disk: no 100 MB copy per build
    except OSError:
        shutil.copy2(source, dest)


def environment_context(env: Environment, dest: Path, wheelhouse: Path | None) -> Path:
    """Lay out the build context for `env` in dest: the recipe, harness/ and wheels/."""
    shutil.copy2(REPO_DIR / env.dockerfile, dest / "Dockerfile")
    shutil.copytree(HARNESS_DIR, dest / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "wheels").mkdir()
    for wheel in wheels_for(env, wheelhouse) if wheelhouse else []:
        link_or_copy(wheel, dest / "wheels" / wheel.name)
    return dest


def service_context(dest: Path, wheelhouse: Path | None) -> Path:
    """Lay out the service image's build context in dest: the project's sources and wheels/."""
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in SERVICE_SOURCES:
        source = REPO_DIR / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=ignore)
        else:
            shutil.copy2(source, dest / name)
    (dest / "wheels").mkdir()
    for wheel in sorted(wheelhouse.glob("*.whl")) if wheelhouse else []:
        link_or_copy(wheel, dest / "wheels" / wheel.name)
    return dest


def stream_build(client: Any, context: Path, dockerfile: str, tag: str,
                  buildargs: dict[str, str], offline: bool,
                  log: Callable[[str], None]) -> str:
    """Run one build, passing its output lines to `log`; the image id, or RuntimeFault."""
    import docker.errors

    image_id = ""
    try:
        for chunk in client.api.build(path=str(context), dockerfile=dockerfile, tag=tag,
                                      buildargs=buildargs, rm=True, forcerm=True, decode=True,
                                      network_mode="none" if offline else None):
            if "error" in chunk:
                raise RuntimeFault(f"building {tag} failed: {chunk['error'].strip()}")
            if chunk.get("stream", "").strip():
                log(chunk["stream"].rstrip("\n"))
            image_id = chunk.get("aux", {}).get("ID", image_id)
    except docker.errors.DockerException as exc:
        raise RuntimeFault(f"building {tag} failed: {exc}") from exc
    return image_id


def tagged_image(client: Any, tag: str) -> str | None:
    """The id of the image tagged `tag`, or None."""
    import docker.errors

    try:
        return str(client.api.inspect_image(tag)["Id"])
    except docker.errors.ImageNotFound:
        return None


def remove_leftovers(client: Any, replaced: str | None) -> None:
    """Remove the build stages, and the image a rebuild replaced (unless a container uses it)."""
    import docker.errors

    client.api.prune_images(filters=BUILD_STAGE_FILTER)
    if replaced:
        with contextlib.suppress(docker.errors.APIError):
            client.api.remove_image(replaced)


def build_environment_image(client: Any, settings: Settings, env: Environment,
                            wheelhouse: Path | None = None, base_image: str | None = None,
                            log: Callable[[str], None] = lambda line: None,
                            rebuild: bool = False) -> Built:
    """Build and tag env's image unless it is current (offline when a wheelhouse is given)."""
    existing = current_image(client, env)
    if existing and not rebuild:
        return Built(env.image, existing, 0.0, built=False)
    previous = tagged_image(client, env.image)
    buildargs = {"PACKAGES": pins_text(env), "ENV_ID": env.id, "HARNESS_DIGEST": harness_digest(),
                 "BASE_IMAGE": base_image or env.base_image}
    started = time.monotonic()
    settings.home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"build-{env.id}.", dir=settings.home) as tmp:
        context = environment_context(env, Path(tmp), wheelhouse)
        image_id = stream_build(client, context, "Dockerfile", env.image, buildargs,
                                 offline=wheelhouse is not None, log=log)
    remove_leftovers(client, previous if previous != image_id else None)
    return Built(env.image, image_id, time.monotonic() - started)


def build_service_image(client: Any, settings: Settings, wheelhouse: Path | None = None,
                        base_image: str | None = None, tag: str = SERVICE_IMAGE,
                        log: Callable[[str], None] = lambda line: None) -> Built:
    """Build the service's own image (API and worker) from this checkout."""
    buildargs = {"BASE_IMAGE": base_image} if base_image else {}
    started = time.monotonic()
    settings.home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="build-service.", dir=settings.home) as tmp:
        context = service_context(Path(tmp), wheelhouse)
        image_id = stream_build(client, context, SERVICE_DOCKERFILE, tag, buildargs,
                                 offline=wheelhouse is not None, log=log)
    remove_leftovers(client, None)
    return Built(tag, image_id, time.monotonic() - started)


def _pip() -> list[str]:
    """A pip to download with: this interpreter's, else the first python3 on PATH that has one."""
    candidates = [sys.executable, shutil.which("python3") or ""]
    for python in filter(None, candidates):
        probe = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, check=False)
        if probe.returncode == 0:
            return [python, "-m", "pip"]
    raise RuntimeFault("no pip found to download wheels with")


def download_wheels(requirements: Iterable[str], wheelhouse: Path, python_version: str,
                    deps: bool = False, extra: Iterable[str] = ()) -> None:
    """Download binary wheels for `requirements` (for Linux x86-64 CPython) into wheelhouse;
    `extra`: more of pip's options (another index)."""
    wheelhouse.mkdir(parents=True, exist_ok=True)
    command = [*_pip(), "download", "--quiet", "--dest", str(wheelhouse), "--only-binary=:all:",
               "--python-version", python_version, "--platform", "manylinux_2_28_x86_64",
               "--platform", "manylinux2014_x86_64", "--platform", "linux_x86_64",
               *([] if deps else ["--no-deps"]), *extra, *requirements]
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeFault(f"pip download failed:\n{proc.stderr.strip()[-4000:]}")


def fill_wheelhouse(envs: Iterable[Environment], wheelhouse: Path,
                    python_version: str | None = None) -> None:
    """Make sure wheelhouse holds every pinned wheel of `envs` (downloads only what is missing)."""
    for env in envs:
        try:
            wheels_for(env, wheelhouse)
        except BadInput:
            download_wheels(env.requirements(), wheelhouse, python_version or env.python)


def service_requirements() -> list[str]:
    """The service's locked dependencies (requirements.lock) plus its build backend."""
    lines = SERVICE_LOCK.read_text().splitlines()
    pins = [_for_image(line) for line in lines
            if line.strip() and not line[0].isspace() and not line.startswith("#")]
    return [*pins, *SERVICE_BUILD_REQUIREMENTS]


def _for_image(pin: str) -> str:
    # `pip download` evaluates markers for the Python it runs on, whatever --python-version
    # says: a pin needed only on older Pythons (async-timeout for redis below 3.11.3, e.g.
    # Debian bookworm's 3.11.2) is fetched regardless; the image installs it only if needed.
    requirement, _, marker = pin.partition(";")
    only_python = "python_" in marker and "platform" not in marker
    return requirement.strip() if only_python else pin.strip()
