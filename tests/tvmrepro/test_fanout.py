"""The fan-out of a case into runs, and its pass-name check against the selected environments."""

from __future__ import annotations

from typing import Any

import pytest

from tvmrepro.cases import Case, parse_case
from tvmrepro.environments import default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.jobs.fanout import fan_out

OLD, NEW, OTHER = (default_catalog().get(i) for i in
                   ("tvm-0.25.0-cpu", "tvm-0.27.0.post1-cpu", "tvm-0.26.0-cpu"))


def case(*passes: str) -> Case:
    """A two-variant case; the second variant uses `passes`."""
    return parse_case({"source": "x = 1\n", "variants": [
        {"name": "a", "passes": ["FuseTIR"]}, {"name": "b", "passes": list(passes)}]})


def fingerprint(*passes: str) -> dict[str, Any]:
    """What a worker records of an environment whose TVM has these passes."""
    return {"version": "x", "passes": list(passes)}


def test_runs_variant_by_variant_each_variant_once() -> None:
    planned = fan_out(case("FuseTIR"), [OLD, NEW], {}, ["b", "a", "b"])
    assert [(p.variant, p.env.id) for p in planned] == [
        ("b", OLD.id), ("b", NEW.id), ("a", OLD.id), ("a", NEW.id)]
    assert [p.variant for p in fan_out(case("FuseTIR"), [NEW], {})] == ["a", "b"]


def test_an_unknown_variant_names_its_place() -> None:
    with pytest.raises(BadInput) as caught:
        fan_out(case("FuseTIR"), [OLD], {}, ["a", "nope"], variant_field="--variant")
    assert caught.value.field == "--variant[1]" and "nope" in caught.value.problem


def test_a_pass_only_an_unselected_environment_has_is_refused() -> None:
    prints = {OLD.id: fingerprint("FuseTIR"), OTHER.id: fingerprint("FuseTIR", "NewPass")}
    with pytest.raises(BadInput) as caught:
        fan_out(case("NewPass"), [OLD], prints)
    assert caught.value.field == "variants[1].passes[0]"
    assert len(fan_out(case("NewPass"), [OLD, OTHER], prints)) == 4  # one selected env has it


def test_the_field_of_a_wrong_pass_can_be_placed_under_the_case() -> None:
    with pytest.raises(BadInput) as caught:
        fan_out(case("FuseTIRR"), [OLD], {OLD.id: fingerprint("FuseTIR")}, case_field="case")
    assert caught.value.field == "case.variants[1].passes[0]"


def test_no_pass_is_refused_while_a_selected_environment_is_unknown() -> None:
    prints = {OLD.id: fingerprint("FuseTIR")}
    assert len(fan_out(case("NewPass"), [OLD, NEW], prints)) == 4  # NEW may have it
    assert len(fan_out(case("NewPass"), [NEW], {})) == 2
    with pytest.raises(BadInput):
        fan_out(case("NewPass"), [OLD, NEW], {**prints, NEW.id: fingerprint("FuseTIR")})
