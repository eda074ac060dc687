"""The frontend images' wheels: torch's CPU build for the image's Python, from its folder or a
wheelhouse; the CUDA images (Python 3.12) cannot have one from a folder of cp311 wheels."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.cli import main
from tvmrepro.environments import default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.settings import Settings
from worker.environments.frontend_images import (
    fill_frontend_wheels,
    find_wheel,
    frontend_wheels_for,
)

TORCH_311 = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
CUDA_ENV = "tvm-0.27.0.post1-cuda"


def _torch_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "torch"
    folder.mkdir()
    for name in (TORCH_311, "torch-2.12.0+cpu-cp312-cp312-manylinux_2_28_x86_64.whl"):
        (folder / name).write_bytes(b"")
    return folder


def test_a_wheel_fits_its_pin_and_its_python(tmp_path: Path) -> None:
    folder = _torch_folder(tmp_path)
    (folder / "onnx-1.23.2-cp312-abi3-manylinux_2_28_x86_64.whl").write_bytes(b"")
    (folder / "sympy-1.14.0-py3-none-any.whl").write_bytes(b"")
    # "+cpu" is the pinned version (as pip's torch==2.13.0 takes it); only for CPython 3.11 here.
    assert find_wheel(folder, "torch", "2.13.0", "3.11") == folder / TORCH_311
    assert find_wheel(folder, "torch", "2.13.0", "3.12") is None
    assert find_wheel(folder, "onnx", "1.23.2", "3.12") is not None  # abi3 from 3.12 on
    assert find_wheel(folder, "onnx", "1.23.2", "3.11") is None
    assert find_wheel(folder, "sympy", "1.14.0", "3.12") is not None
    assert find_wheel(folder, "sympy", "1.13.0", "3.12") is None


def test_a_cuda_frontend_image_needs_a_python_3_12_torch(tmp_path: Path) -> None:
    folder, wheelhouse = _torch_folder(tmp_path), tmp_path / "wheels"
    settings = Settings(home=tmp_path / "home", torch_source=str(folder))
    cuda = default_catalog().get(CUDA_ENV)
    assert cuda.python == "3.12"
    # Refused before anything is downloaded, naming what the folder holds and the limit.
    with pytest.raises(BadInput, match="TVMREPRO_TORCH_SOURCE") as refused:
        fill_frontend_wheels(settings, [cuda], wheelhouse)
    assert "no torch 2.13.0 wheel for CPython 3.12" in str(refused.value)
    assert TORCH_311 in str(refused.value) and "the CUDA images run Python 3.12" in str(refused.value)
    assert list(wheelhouse.iterdir()) == []
    # A wheelhouse holding the cp311 torch does not do for a CUDA image either.
    (wheelhouse / TORCH_311).write_bytes(b"")
    with pytest.raises(BadInput, match="no CPython 3.12 wheel for .*torch==2.13.0") as missing:
        frontend_wheels_for(cuda.with_frontends(), wheelhouse)
    assert f"tvmrepro images wheels {wheelhouse} {CUDA_ENV} --frontends" in str(missing.value)
    assert "the CUDA images run Python 3.12" in str(missing.value)


def test_images_wheels_frontends_says_the_cuda_limit(tmp_path: Path) -> None:
    folder, wheelhouse = _torch_folder(tmp_path), tmp_path / "wheels"
    wheelhouse.mkdir()
    for name, pin in default_catalog().get(CUDA_ENV).packages.items():  # the plain ones: there
        (wheelhouse / f"{name.replace('-', '_')}-{pin}-py3-none-any.whl").write_bytes(b"")
    result = CliRunner().invoke(main, ["images", "wheels", str(wheelhouse), CUDA_ENV,
                                       "--frontends"],
                                env={"TVMREPRO_TORCH_SOURCE": str(folder),
                                     "TVMREPRO_HOME": str(tmp_path / "home")})
    assert result.exit_code == 2, result.output
    assert "no torch 2.13.0 wheel for CPython 3.12" in result.output


def test_a_cuda_frontend_build_is_refused_before_anything_is_built(tmp_path: Path) -> None:
    # No engine is reachable (DOCKER_HOST names none): the refusal comes before any build.
    result = CliRunner().invoke(main, ["images", "build", CUDA_ENV, "--frontends"],
                                env={"TVMREPRO_TORCH_SOURCE": str(_torch_folder(tmp_path)),
                                     "TVMREPRO_HOME": str(tmp_path / "home"),
                                     "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert result.exit_code == 2, result.output
    assert "no torch 2.13.0 wheel for CPython 3.12" in result.output
    assert "the CUDA images run Python 3.12" in result.output
