"""The catalog read from images/environments.toml."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tvmrepro.environments import default_catalog, load_catalog
from tvmrepro.errors import UnknownEnvironment

PYPI_RELEASES = ["0.25.0rc0", "0.25.0rc1", "0.25.0", "0.25.0.post1", "0.26.0rc0", "0.26.0",
                 "0.27.0rc0", "0.27.0rc1", "0.27.0", "0.27.0.post1"]


def test_every_release_has_a_cpu_and_a_cuda_twin_in_pep440_order() -> None:
    catalog = default_catalog()
    cpu = [e.release for e in catalog.environments if e.device == "cpu"]
    cuda = [e.release for e in catalog.environments if e.device == "cuda"]
    assert cpu == cuda == PYPI_RELEASES


def test_pins_are_exact_and_complete() -> None:
    for env in default_catalog().environments:
        assert env.packages["apache-tvm"] == env.release
        for name in ("apache-tvm-ffi", "numpy", "ml-dtypes", "typing-extensions"):
            assert re.fullmatch(r"\d+(\.\d+)*(\.post\d+|rc\d+)?", env.packages[name]), name
        if env.device == "cuda":
            assert {"cuda-bindings", "nvidia-cuda-nvrtc"} <= set(env.packages)
    assert default_catalog().get("tvm-0.25.0-cpu").packages["apache-tvm-ffi"] == "0.1.12"
    assert default_catalog().get("tvm-0.27.0.post1-cuda").image == "tvmrepro/tvm:0.27.0.post1-cuda"


def test_unknown_id_names_the_field_and_the_known_ones() -> None:
    with pytest.raises(UnknownEnvironment) as info:
        default_catalog().get("tvm-9.9.9-cpu", "environments[1]")
    assert info.value.field == "environments[1]"
    assert "tvm-0.25.0-cpu" in str(info.value)


def test_no_version_string_is_hard_coded_in_python() -> None:
    root = Path(__file__).resolve().parents[1]
    sources = [p for d in ("tvmrepro", "service", "worker", "cli", "images")
               for p in (root / d).rglob("*.py")]
    assert sources
    for path in sources:
        assert not re.search(r"0\.2[5-7]\.\d", path.read_text()), path


def test_catalog_from_another_file(tmp_path: Path) -> None:
    toml = tmp_path / "envs.toml"
    toml.write_text(
        'python = "3.11"\nimage = "x/{release}-{device}"\n'
        '[devices.cpu]\ntarget = "llvm"\npackages = {}\nbase_image = "b"\ndockerfile = "d"\n'
        '[releases."1.10.0"]\npackages = { apache-tvm = "1.10.0" }\n'
        '[releases."1.9.0"]\npackages = { apache-tvm = "1.9.0" }\n'
    )
    assert load_catalog(toml).ids == ["tvm-1.9.0-cpu", "tvm-1.10.0-cpu"]


def test_spanning_takes_the_newest_final_release_of_each_minor() -> None:
    catalog = default_catalog()
    spanning = catalog.spanning("cpu")
    minors = {(e.version.major, e.version.minor) for e in catalog.select(None, "cpu")}
    assert len(spanning) == len(minors)
    for env in spanning:
        same_minor = [e for e in catalog.select(None, "cpu") if not e.version.is_prerelease
                      and (e.version.major, e.version.minor) == (env.version.major, env.version.minor)]
        assert env.device == "cpu" and env.version == max(e.version for e in same_minor)
    assert [e.version for e in spanning] == sorted(e.version for e in spanning)


def test_a_mistyped_id_gets_the_nearest_known_one() -> None:
    with pytest.raises(UnknownEnvironment) as info:
        default_catalog().get("tvm-0.27.0-post1-cpu")
    assert "did you mean tvm-0.27.0.post1-cpu?" in str(info.value)
    with pytest.raises(UnknownEnvironment) as far:
        default_catalog().get("pytorch-2.0")
    assert "did you mean" not in str(far.value)
