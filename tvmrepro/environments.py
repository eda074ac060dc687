"""The environment catalog: images/environments.toml read into typed records."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from packaging.version import Version

from images import ENVIRONMENTS_FILE
from tvmrepro.errors import BadInput, UnknownEnvironment


@dataclass(frozen=True)
class Environment:
    """One pinned TVM build: its id, device, exact package pins and image tag."""

    id: str
    release: str
    device: str
    packages: dict[str, str]
    target: str
    image: str
    base_image: str
    dockerfile: str
    python: str
    verified: str
    # The frontend packages verified with this release (torch, onnx, onnxruntime: the
    # `frontends` set it names), and their import names. Installed only in the frontend flavour.
    frontend_packages: dict[str, str] = field(default_factory=dict)
    frontend_modules: tuple[str, ...] = ()
    # This is the frontend flavour: the same id and TVM, with frontend_packages installed too.
    frontends: bool = False

    @property
    def key(self) -> str:
        """What tells this flavour from the plain one where both live side by side (its local
        directory, its image tag's suffix, the worker's pools): the id, plus "+frontends"."""
        return f"{self.id}+frontends" if self.frontends else self.id

    @property
    def installed(self) -> dict[str, str]:
        """Every package this flavour installs, pinned."""
        return {**self.packages, **self.frontend_packages} if self.frontends else self.packages

    def with_frontends(self) -> Environment:
        """The frontend flavour of this environment; BadInput when its release names no
        verified frontend set."""
        if self.frontends:
            return self
        if not self.frontend_packages:
            raise BadInput("environments", f"{self.id} has no verified frontend packages "
                           f"(torch, onnx): images/environments.toml names none for {self.release}")
        return replace(self, frontends=True, image=f"{self.image}-frontends")

    def plain(self) -> Environment:
        """The plain flavour of this environment (itself when it is one)."""
        if not self.frontends:
            return self
        return replace(self, frontends=False, image=self.image.removesuffix("-frontends"))

    @property
    def version(self) -> Version:
        """The TVM version, for ordering (PEP 440)."""
        return Version(self.release)

    def requirements(self) -> list[str]:
        """Exact requirement lines ('name==version'), one per pinned package."""
        return [f"{name}=={pin}" for name, pin in sorted(self.installed.items())]


@dataclass(frozen=True)
class Catalog:
    """All known environments, sorted by TVM version then device."""

    environments: tuple[Environment, ...]

    @property
    def ids(self) -> list[str]:
        """Every environment id, in catalog order."""
        return [env.id for env in self.environments]

    def get(self, env_id: str, field: str = "environments") -> Environment:
        """The environment with this id, or UnknownEnvironment naming `field`."""
        for env in self.environments:
            if env.id == env_id:
                return env
        raise UnknownEnvironment(env_id, self.ids, field)

    def select(self, ids: list[str] | None, device: str | None = None) -> list[Environment]:
        """The named environments in catalog order (all of `device`, or all, when ids is empty)."""
        if ids:
            chosen = {self.get(i, f"environments[{n}]").id for n, i in enumerate(ids)}
            return [env for env in self.environments if env.id in chosen]
        return [env for env in self.environments if device is None or env.device == device]

    def spanning(self, device: str) -> list[Environment]:
        """The newest final release of each minor version (e.g. x.y.0.post1 over x.y.0 and x.y.0rc1).

        One environment per minor release answers "what happens on each release" at a
        third of the cost of all of them; a bisection then narrows inside a minor.
        """
        newest: dict[tuple[int, int], Environment] = {}
        for env in self.select(None, device):
            if env.version.is_prerelease:
                continue
            key = (env.version.major, env.version.minor)
            if key not in newest or env.version > newest[key].version:
                newest[key] = env
        return [newest[key] for key in sorted(newest)]


def load_catalog(path: Path = ENVIRONMENTS_FILE) -> Catalog:
    """Parse an environments file into a Catalog."""
    data = tomllib.loads(path.read_text())
    envs = []
    frontend_sets = data.get("frontends", {})
    for release, rel in data["releases"].items():
        frontend = frontend_sets[rel["frontends"]] if "frontends" in rel else {}
        for device, dev in data["devices"].items():
            envs.append(
                Environment(
                    id=f"tvm-{release}-{device}",
                    release=release,
                    device=device,
                    packages={**rel["packages"], **dev["packages"]},
                    target=dev["target"],
                    image=data["image"].format(release=release, device=device),
                    base_image=dev["base_image"],
                    dockerfile=dev["dockerfile"],
                    python=dev.get("python", data["python"]),
                    verified=rel.get("verified", ""),
                    frontend_packages=dict(frontend.get("packages", {})),
                    frontend_modules=tuple(frontend.get("modules", ())),
                )
            )
    envs.sort(key=lambda e: (e.version, e.device))
    return Catalog(tuple(envs))


@cache
def default_catalog() -> Catalog:
    """The catalog of this checkout (read once)."""
    return load_catalog()
