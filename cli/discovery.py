"""Finding the service a command talks to: --server, TVMREPRO_SERVER, a live `tvmrepro up` on
this home (the up.json it announces itself in while it serves), TVMREPRO_HOST/TVMREPRO_PORT, or
the default; and the hand-over of a --local command's runs to that `up` (`on_warm_up`)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from cli.client import ApiClient, Service, ServiceError
from cli.output import error_console
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.liveness import process_token, token_alive
from tvmrepro.settings import DEFAULT_SERVER, Settings, variable_name

Answer = TypeVar("Answer")
# While `up` serves, this file in its home says where: a `run --local` on the same home hands its
# runs to that worker's warm sandboxes (TVM already imported) instead of starting one of its own.
ANNOUNCEMENT = "up.json"


def provisioned_cpu(settings: Settings) -> list[Environment]:
    """The CPU environments provisioned here (what `up --also-provisioned` serves besides its
    chosen ones)."""
    from worker.environments.provision import provisioned

    return provisioned(settings, default_catalog().select(None, "cpu"))


@contextlib.contextmanager
def announced(settings: Settings, url: str, envs: list[Environment],
              follow_provisioned: bool = False) -> Iterator[None]:
    """<home>/up.json names this process, its URL, runtime and environments while it serves
    (`follows_provisioned`: and every CPU environment provisioned on this home)."""
    path = settings.home / ANNOUNCEMENT
    token = process_token()
    record = {"url": url, "process": token, "runtime": settings.runtime,
              "environments": [env.id for env in envs], "follows_provisioned": follow_provisioned}
    partial = path.with_name(f".{ANNOUNCEMENT}.{os.getpid()}")
    partial.write_text(json.dumps(record))
    partial.replace(path)  # whole or absent for a reader
    try:
        yield
    finally:
        # Only this process removes it: the API's processes are forked from it and unwind through
        # here when they exit; and another `up` may have taken over since.
        with contextlib.suppress(OSError, ValueError):
            if process_token() == token and json.loads(path.read_text()).get("process") == token:
                path.unlink()


@dataclass
class LiveUp:
    """A live `tvmrepro up` on this home, as it announced itself."""

    url: str
    runtime: str | None
    environments: set[str]
    follows_provisioned: bool  # its worker serves the environments provisioned here too


def live_up(settings: Settings) -> LiveUp | None:
    """The announcement of a live `tvmrepro up` on this home (url, runtime, environments, whether
    it follows the environments provisioned here); None when there is none, or its announcement
    is stale or unreadable."""
    try:
        record = json.loads((settings.home / ANNOUNCEMENT).read_text())
        found = LiveUp(url=str(record["url"]), runtime=record.get("runtime"),
                       environments=set(record["environments"]),
                       follows_provisioned=bool(record.get("follows_provisioned")))
        alive = token_alive(str(record["process"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if alive and found.follows_provisioned:
        # Its worker serves what was provisioned since it started within seconds; a run handed
        # to it before then is refused and runs here (run_locally).
        found.environments |= {env.id for env in provisioned_cpu(settings)}
    return found if alive else None


def warm_service(settings: Settings, runtime: str, env_ids: list[str]) -> str | None:
    """The URL of a live `tvmrepro up` on this home whose worker runs `runtime` sandboxes for
    every one of `env_ids`; None when there is none (or its announcement is stale or unreadable)."""
    found = live_up(settings)
    if found and found.runtime == runtime and set(env_ids) <= found.environments:
        return found.url
    return None


def local_url(host: str, port: int) -> str:
    """Where a client on this machine reaches an API bound to host:port."""
    reachable = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
    return f"http://[{reachable}]:{port}" if ":" in reachable else f"http://{reachable}:{port}"


def on_warm_up(runtime_name: str, env_ids: list[str],
               work: Callable[[str], Answer]) -> Answer | None:
    """`work(url)` on a live `tvmrepro up` on this home whose worker serves every one of
    env_ids (TVM imported there already); None when there is no such `up`, or it stopped or
    refused: the command then runs here (--cold asks for that at once)."""
    url = warm_service(Settings.from_env(), runtime_name, env_ids)
    if url is None:
        return None
    error_console().print(f"running on the warm sandboxes of `tvmrepro up` at {url} "
                          "(--cold: sandboxes of this command's own)", highlight=False)
    try:
        return work(url)
    except (ServiceError, BadInput) as exc:  # it stopped, or its worker is not live yet
        error_console().print(f"{exc}; running here", highlight=False)
        return None


def find_service(given: str | None, settings: Settings | None = None) -> Service:
    """--server, else TVMREPRO_SERVER, else a live `tvmrepro up` on this TVMREPRO_HOME (its
    up.json), else TVMREPRO_HOST/TVMREPRO_PORT (what `up` and `serve` bind), else the default."""
    settings = settings or Settings.from_env()
    if given:
        return Service(given, "given by --server")
    if settings.server:
        return Service(settings.server, "from TVMREPRO_SERVER")
    up = live_up(settings)
    if up is not None:
        return Service(up.url, f"announced by the `tvmrepro up` on this TVMREPRO_HOME "
                               f"({settings.home / ANNOUNCEMENT})", explicit=False,
                       serves_provisioned=up.follows_provisioned)
    named = [variable_name(field) for field in ("host", "port") if field in settings.model_fields_set]
    if named:
        return Service(local_url(settings.host, settings.port), f"from {' and '.join(named)}",
                       explicit=False)
    return Service(DEFAULT_SERVER, f"the default: no --server, TVMREPRO_SERVER, TVMREPRO_PORT, nor "
                                   f"a `tvmrepro up` on TVMREPRO_HOME {settings.home}",
                   explicit=False)


def connect(given: str | None) -> ApiClient:
    """A client of the service that --server (`given`) or the settings name, found as
    find_service says; one the user did not name is announced on stderr."""
    service = find_service(given)
    if not service.explicit:
        error_console().print(f"service {service.url} ({service.how}; --server or "
                              "TVMREPRO_SERVER to choose another)", highlight=False)
    return ApiClient(service)
