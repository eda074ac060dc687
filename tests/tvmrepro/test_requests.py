"""The job request union (tvmrepro.api.requests): one model per kind, a body without a kind is
a run, and a refusal names the field, the kind, and the kinds that take it."""

from __future__ import annotations

from typing import Any

import pytest

from tvmrepro.api.requests import (
    BisectRequest,
    ExtractRequest,
    ReduceRequest,
    RunRequest,
    SweepRequest,
    TriageRequest,
    parse_request,
)
from tvmrepro.errors import BadInput

CASE = {"title": "t", "script": "print(1)\n"}


@pytest.mark.parametrize(("body", "member"), [
    ({"case": CASE}, RunRequest),
    ({"kind": "run", "case": CASE, "variants": ["script"]}, RunRequest),
    ({"kind": "bisect", "case": CASE, "strategy": "binary"}, BisectRequest),
    ({"kind": "reduce", "case": CASE, "budget_s": 60}, ReduceRequest),
    ({"kind": "extract", "case": CASE, "at": "inner"}, ExtractRequest),
    ({"kind": "triage", "reports": ["x"]}, TriageRequest),
    ({"kind": "sweep", "env": "tvm-0.27.0-cpu"}, SweepRequest),
])
def test_each_kind_reads_as_its_own_model(body: dict[str, Any], member: type) -> None:
    request = parse_request(body)
    assert type(request) is member
    assert request.kind == body.get("kind", "run")


@pytest.mark.parametrize(("body", "field", "message"), [
    ({"case": CASE, "strategy": "binary"}, "strategy",
     "strategy: a run job does not take it (only 'bisect' jobs do)"),
    ({"case": CASE, "oracle": "output"}, "oracle",
     "oracle: a run job does not take it (only 'bisect' and 'reduce' jobs do)"),
    ({"kind": "triage", "reports": ["x"], "case": CASE}, "case",
     "case: a triage job does not take it (only 'run', 'bisect', 'reduce' and 'extract' jobs "
     "do)"),
    ({"kind": "bisect", "case": CASE, "variants": ["a"]}, "variants",
     "variants: a bisect job does not take it (only 'run' jobs do); did you mean variant?"),
    ({"case": CASE, "surprise": 1}, "surprise", "surprise: a run job does not take it"),
    ({}, "case", "case: a run job needs it"),
    ({"kind": "sweep"}, "env", "env: a sweep job needs it"),
    ({"kind": "nonsense"}, "kind", "kind: must be one of 'run', 'bisect', 'reduce', 'extract', "
                                   "'triage', 'sweep', got 'nonsense'"),
    ({"kind": 7, "case": CASE}, "kind", "got 7"),
    ({"case": CASE, "environments": ["a", None]}, "environments[1]",
     "environments[1]: Input should be a valid string"),
    ({"case": CASE, "bypass_cache": "yes"}, "bypass_cache", "bypass_cache: Input should be"),
    ({"kind": "bisect", "case": CASE, "repeat": 11}, "repeat", "repeat: Input should be less"),
    ([], "body", "body: must be a JSON object, got list"),
])
def test_a_refusal_names_the_field(body: Any, field: str, message: str) -> None:
    with pytest.raises(BadInput) as refused:
        parse_request(body)
    assert refused.value.field == field
    assert message in str(refused.value)
