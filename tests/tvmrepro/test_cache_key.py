"""The cache key: what makes two runs the same result (the case, variant, pins, target, harness)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import NEW_ENV, OLD_ENV, case_path
from tvmrepro import lifecycle
from tvmrepro.cases import Case, parse_case
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.lifecycle import cache_key, harness_digest


@pytest.fixture
def founding() -> dict[str, Any]:
    """The founding case as data (two variants)."""
    data: dict[str, Any] = json.loads(case_path("tvm-17357/case.json").read_text())
    return data


@pytest.fixture
def env() -> Environment:
    """A catalog environment."""
    return default_catalog().get(NEW_ENV)


def key(data: dict[str, Any], env: Environment, variant: str = "fusetir-once") -> str:
    """The key of one variant of a case given as data."""
    case: Case = parse_case(data)
    return cache_key(case, variant, env)


def test_the_title_does_not_change_the_key(founding: dict[str, Any], env: Environment) -> None:
    assert key({**founding, "title": "another title"}, env) == key(founding, env)


def test_the_case_changes_the_key(founding: dict[str, Any], env: Environment) -> None:
    edited = {**founding, "source": founding["source"] + "\n# one more line\n"}
    assert key(edited, env) != key(founding, env)


def test_the_variant_changes_the_key(founding: dict[str, Any], env: Environment) -> None:
    assert key(founding, env, "fusetir-once") != key(founding, env, "fusetir-twice")
    # Another variant's passes are not this variant's run.
    others = [v if v["name"] == "fusetir-once" else {**v, "passes": ["FuseTIR"]}
              for v in founding["variants"]]
    assert key({**founding, "variants": others}, env) == key(founding, env)


def test_the_pins_change_the_key(founding: dict[str, Any], env: Environment) -> None:
    repinned = dataclasses.replace(env, packages={**env.packages, "numpy": "0.0.1"})
    assert key(founding, repinned) != key(founding, env)
    assert key(founding, default_catalog().get(OLD_ENV)) != key(founding, env)


def test_the_target_changes_the_key(founding: dict[str, Any], env: Environment) -> None:
    other_target = dataclasses.replace(env, target=env.target + " -mcpu=skylake")
    assert key(founding, other_target) != key(founding, env)


@pytest.fixture
def harness_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The harness's code copied, and the digest read from the copy."""
    copy = tmp_path / "harness"
    shutil.copytree(lifecycle.HARNESS_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(lifecycle, "HARNESS_DIR", copy)
    harness_digest.cache_clear()
    yield copy
    harness_digest.cache_clear()


def test_the_harness_changes_the_key(founding: dict[str, Any], env: Environment,
                                     harness_copy: Path) -> None:
    before = key(founding, env)
    some_file = sorted(harness_copy.rglob("*.py"))[0]
    some_file.write_text(some_file.read_text() + "\n# changed\n")
    harness_digest.cache_clear()
    assert key(founding, env) != before
