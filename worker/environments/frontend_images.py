"""Frontend images: an environment's plain image plus its frontend packages (its flavour's).

images/frontends.Dockerfile builds FROM the plain image, by id, and adds the frontend packages
(Environment.frontend_packages: torch's CPU build, onnx, onnxruntime, ...) in a layer of their
own, so the plain image's layers are shared and plain runs never carry torch. The image is
tagged `Environment.with_frontends().image` (the plain tag plus "-frontends") and labelled with
every package it installs (`tvmrepro.packages`: Environment.installed), the harness its plain
image carries, and that plain image's id: a rebuilt plain image makes its frontend image stale.

torch comes from Settings.torch_wheels() (a folder of wheels or an index of CPU builds; PyPI's
x86_64 torch is a CUDA build of several GB), the rest from PyPI, or everything from a wheelhouse
(`tvmrepro images wheels DIR ENV --frontends` fills one). Each wheel must fit the image's Python:
the CUDA images run Python 3.12, so their frontend images need torch's CPU build for CPython 3.12,
which a folder holding only a cp311 wheel does not have.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from packaging.tags import compatible_tags, cpython_tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from tvmrepro.environments import Environment
from tvmrepro.errors import BadInput
from tvmrepro.lifecycle import harness_digest
from tvmrepro.settings import Settings
from worker.environments.images import (
    REPO_DIR,
    Built,
    build_environment_image,
    current_image,
    download_wheels,
    link_or_copy,
    pins_text,
    remove_leftovers,
    stream_build,
    tagged_image,
)

FRONTENDS_DOCKERFILE = "images/frontends.Dockerfile"
PLAIN_IMAGE_LABEL = "tvmrepro.plain-image"
TORCH = "torch"  # the one frontend package taken from Settings.torch_wheels()
CONTEXT_WHEELS = "/tmp/wheels"  # where the recipe copies the context's wheels/


def build_command(env: Environment) -> str:
    """The command that builds env's image (its frontend image, for a frontend flavour)."""
    return f"tvmrepro images build {env.id}" + (" --frontends" if env.frontends else "")


def frontend_requirements(env: Environment) -> list[str]:
    """The frontend packages' exact requirement lines ('name==version')."""
    return [f"{name}=={pin}" for name, pin in sorted(env.frontend_packages.items())]


def _interpreters(python: str) -> set[tuple[str, str]]:
    """The (interpreter, abi) tag pairs a wheel for CPython `python` ("3.12") may carry."""
    major, minor = (int(part) for part in python.split(".")[:2])
    tags = [*cpython_tags((major, minor), platforms=["any"]),
            *compatible_tags((major, minor), interpreter=f"cp{major}{minor}", platforms=["any"])]
    return {(tag.interpreter, tag.abi) for tag in tags}


def find_wheel(folder: Path, name: str, pin: str, python: str) -> Path | None:
    """folder's wheel of `name` at `pin` for CPython `python`; a local label (torch's "+cpu")
    counts as that version, as pip's `torch==2.13.0` takes 2.13.0+cpu."""
    wanted, fits = canonicalize_name(name), _interpreters(python)
    for path in sorted(folder.glob("*.whl")):
        try:
            found, version, _, tags = parse_wheel_filename(path.name)
            same = found == wanted and Version(version.public) == Version(pin)
        except (ValueError, InvalidVersion):
            continue
        if same and any((tag.interpreter, tag.abi) in fits for tag in tags):
            return path
    return None


def frontend_wheels_for(env: Environment, wheelhouse: Path) -> list[Path]:
    """The wheelhouse's wheels of env's frontend pins for its Python; BadInput names any missing."""
    found, missing = [], []
    for name, pin in sorted(env.frontend_packages.items()):
        wheel = find_wheel(wheelhouse, name, pin, env.python)
        if wheel is None:
            missing.append(f"{name}=={pin}")
        else:
            found.append(wheel)
    if missing:
        raise BadInput("--wheelhouse", f"{wheelhouse} has no CPython {env.python} wheel for "
                       f"{', '.join(missing)} (fill it with: tvmrepro images wheels {wheelhouse} "
                       f"{env.id} --frontends){_python_limit(env)}")
    return found


def _python_limit(env: Environment) -> str:
    if env.device != "cuda":
        return ""
    return (f"; the CUDA images run Python {env.python}, so their frontend images need torch's "
            f"CPU build for CPython {env.python} (TVMREPRO_TORCH_SOURCE must name a folder or "
            f"index that has it, e.g. PyTorch's CPU index)")


def _torch_folder(settings: Settings) -> Path | None:
    """The folder torch is taken from, or None when Settings.torch_wheels() is an index."""
    source = settings.torch_wheels()
    if "://" in source and not source.startswith("file://"):
        return None
    return Path(source.removeprefix("file://"))


def torch_wheel(settings: Settings, env: Environment, python: str) -> Path:
    """The torch wheel of env's pin for CPython `python` in torch's folder; BadInput says what
    the folder holds instead (here: CPython 3.11 only, so no CUDA frontend image)."""
    folder, pin = _torch_folder(settings), env.frontend_packages[TORCH]
    assert folder is not None
    wheel = find_wheel(folder, TORCH, pin, python)
    if wheel is None:
        held = ", ".join(sorted(p.name for p in folder.glob("torch-*.whl"))) or "no torch wheel"
        raise BadInput("TVMREPRO_TORCH_SOURCE", f"{folder} has no torch {pin} wheel for CPython "
                       f"{python} (it holds: {held}){_python_limit(env)}")
    return wheel


def fill_frontend_wheels(settings: Settings, envs: Iterable[Environment], wheelhouse: Path,
                         python_version: str | None = None) -> None:
    """Make sure wheelhouse holds every frontend wheel of `envs` for their Python (or
    python_version): torch from Settings.torch_wheels(), the rest from PyPI; only what is missing."""
    wheelhouse.mkdir(parents=True, exist_ok=True)
    for env in envs:
        env = env.with_frontends()  # BadInput for a release that names no frontend set
        python = python_version or env.python
        missing = {name: pin for name, pin in env.frontend_packages.items()
                   if find_wheel(wheelhouse, name, pin, python) is None}
        if TORCH in missing:  # first: the one that may not exist for this Python
            if _torch_folder(settings) is None:
                download_wheels([f"{TORCH}=={missing[TORCH]}"], wheelhouse, python,
                                extra=["--index-url", settings.torch_wheels()])
            else:
                wheel = torch_wheel(settings, env, python)
                link_or_copy(wheel, wheelhouse / wheel.name)
        others = [f"{name}=={pin}" for name, pin in sorted(missing.items()) if name != TORCH]
        if others:
            download_wheels(others, wheelhouse, python)


def frontend_sources(settings: Settings, env: Environment,
                     wheelhouse: Path | None) -> tuple[list[Path], str]:
    """The wheels the frontend image's context carries, and the recipe's PIP_SOURCE for them;
    BadInput when one cannot be had for the image's Python (known before anything is built)."""
    if wheelhouse is not None:
        return frontend_wheels_for(env, wheelhouse), f"--no-index --find-links {CONTEXT_WHEELS}"
    if _torch_folder(settings) is not None:  # torch from its folder, the rest online
        return [torch_wheel(settings, env, env.python)], f"--find-links {CONTEXT_WHEELS}"
    return [], f"--extra-index-url {settings.torch_wheels()}"


def frontend_context(dest: Path, wheels: Iterable[Path]) -> Path:
    """Lay out the frontend image's build context in dest: the recipe and wheels/."""
    shutil.copy2(REPO_DIR / FRONTENDS_DOCKERFILE, dest / "Dockerfile")
    (dest / "wheels").mkdir()
    for wheel in wheels:
        link_or_copy(wheel, dest / "wheels" / wheel.name)
    return dest


def current_frontend_image(client: Any, env: Environment, plain_id: str) -> str | None:
    """The id of env's frontend image when it carries env's pins and this harness, and was
    built on the plain image `plain_id`; else None."""
    existing = current_image(client, env.with_frontends())
    if existing is None:
        return None
    labels = client.api.inspect_image(existing)["Config"]["Labels"] or {}
    return existing if labels.get(PLAIN_IMAGE_LABEL) == plain_id else None


def build_frontend_image(client: Any, settings: Settings, env: Environment,
                         wheelhouse: Path | None = None, base_image: str | None = None,
                         log: Callable[[str], None] = lambda line: None,
                         rebuild: bool = False) -> Built:
    """Build and tag env's frontend image unless it is current, building its plain image first
    unless that one is current (offline when a wheelhouse is given)."""
    flavour = env.with_frontends()
    plain_id = current_image(client, flavour.plain())
    existing = current_frontend_image(client, flavour, plain_id) if plain_id else None
    if existing and not rebuild:
        return Built(flavour.image, existing, 0.0, built=False)
    wheels, source = frontend_sources(settings, flavour, wheelhouse)  # before the plain build
    plain = build_environment_image(client, settings, env.plain(), wheelhouse, base_image, log)
    previous = tagged_image(client, flavour.image)
    started = time.monotonic()
    settings.home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"build-{flavour.key}.", dir=settings.home) as tmp:
        context = frontend_context(Path(tmp), wheels)
        buildargs = {"BASE_IMAGE": plain.image_id, "PIP_SOURCE": source,
                     "FRONTEND_PACKAGES": " ".join(frontend_requirements(flavour)),
                     "PACKAGES": pins_text(flavour), "ENV_ID": flavour.id,
                     "HARNESS_DIGEST": harness_digest(), "PLAIN_IMAGE": plain.image_id}
        image_id = stream_build(client, context, "Dockerfile", flavour.image, buildargs,
                                 offline=wheelhouse is not None, log=log)
    remove_leftovers(client, previous if previous != image_id else None)
    return Built(flavour.image, image_id, time.monotonic() - started)
