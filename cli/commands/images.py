"""`tvmrepro images`: the Docker images of the pinned environments (and of the service)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from cli.output import reports_errors
from tvmrepro.environments import default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.settings import Settings

if TYPE_CHECKING:
    from worker.environments.images import Built


@click.group()
def images() -> None:
    """Docker images of the pinned environments (and of the service)."""


@images.command("build")
@click.argument("env_ids", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Every environment (of --device).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None,
              help="With --all: only this device's environments.")
@click.option("--wheelhouse", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Install from these wheels only, with no network (default $TVMREPRO_WHEELHOUSE).")
@click.option("--base-image", default=None, help="Base image instead of the pinned official one.")
@click.option("--service", is_flag=True, help="Also build the service's own image.")
@click.option("--rebuild", is_flag=True, help="Build even the images that are current.")
@click.option("--frontends", is_flag=True,
              help="Also each one's frontend image (torch, onnx, onnxruntime on top: tag + -frontends).")
@reports_errors
def images_build(env_ids: tuple[str, ...], everything: bool, device: str | None,
                 wheelhouse: Path | None, base_image: str | None, service: bool,
                 rebuild: bool, frontends: bool) -> None:
    """Build the environments' images, tagged as images/environments.toml says."""
    from worker.environments.frontend_images import build_frontend_image, frontend_sources
    from worker.environments.images import build_environment_image, build_service_image
    from worker.runtimes.docker import connect

    if not env_ids and not everything and not service:
        raise BadInput("ENV", "name at least one environment, or --all, or --service")
    settings = Settings.from_env()
    wheelhouse = wheelhouse or settings.wheelhouse
    targets = default_catalog().select(list(env_ids), device) if env_ids or everything else []
    for environment in targets if frontends else []:  # refused before anything is built
        frontend_sources(settings, environment.with_frontends(), wheelhouse)
    client = connect(settings)
    for environment in targets:
        click.echo(f"building {environment.image} ({environment.id}) ...", err=True)
        built = build_environment_image(client, settings, environment, wheelhouse, base_image,
                                        log=lambda line: click.echo(line, err=True),
                                        rebuild=rebuild)
        click.echo(_built_line(built), err=True)
        if frontends:
            flavour = environment.with_frontends()
            click.echo(f"building {flavour.image} ({flavour.key}) ...", err=True)
            built = build_frontend_image(client, settings, environment, wheelhouse, base_image,
                                         log=lambda line: click.echo(line, err=True),
                                         rebuild=rebuild)
            click.echo(_built_line(built), err=True)
    if service:
        built = build_service_image(client, settings, wheelhouse, base_image,
                                    log=lambda line: click.echo(line, err=True))
        click.echo(f"{built.tag}: {built.image_id[:19]} in {built.seconds:.1f} s", err=True)


def _built_line(built: Built) -> str:
    how = f"built in {built.seconds:.1f} s" if built.built else "current (--rebuild to build)"
    return f"{built.tag}: {built.image_id[:19]} {how}"


@images.command("wheels")
@click.argument("wheelhouse", type=click.Path(path_type=Path, file_okay=False))
@click.argument("env_ids", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Every environment (of --device).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None,
              help="With --all: only this device's environments.")
@click.option("--python-version", default=None, help="The images' Python (default: the pinned one).")
@click.option("--service", is_flag=True, help="Also the service image's dependencies.")
@click.option("--frontends", is_flag=True,
              help="Also the frontend packages' (torch from TVMREPRO_TORCH_SOURCE).")
@reports_errors
def images_wheels(wheelhouse: Path, env_ids: tuple[str, ...], everything: bool,
                  device: str | None, python_version: str | None, service: bool,
                  frontends: bool) -> None:
    """Download the pinned wheels into WHEELHOUSE, for offline image builds."""
    from worker.environments.frontend_images import fill_frontend_wheels
    from worker.environments.images import download_wheels, fill_wheelhouse, service_requirements

    if not env_ids and not everything and not service:
        raise BadInput("ENV", "name at least one environment, or --all, or --service")
    catalog = default_catalog()
    targets = catalog.select(list(env_ids), device) if env_ids or everything else []
    fill_wheelhouse(targets, wheelhouse, python_version)
    if frontends:
        fill_frontend_wheels(Settings.from_env(), targets, wheelhouse, python_version)
    if service:
        python = python_version or catalog.environments[0].python
        download_wheels(service_requirements(), wheelhouse, python, deps=True)
    click.echo(f"{wheelhouse}: {len(list(wheelhouse.glob('*.whl')))} wheels", err=True)
