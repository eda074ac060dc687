"""What a reduce or extract job asks, checked, and its answer as the job shows it."""

from __future__ import annotations

import dataclasses

import pytest

from tvmrepro.api.narrowed import Extraction, Reduction
from tvmrepro.cases import parse_case
from tvmrepro.environments import default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.jobs.narrow.logic import NarrowingRow, NarrowOptions, answer, make_options

MODULE = {"source": "@I.ir_module\nclass Module:\n    pass\n", "module": "Module",
          "variants": [{"name": "a", "passes": ["FuseTIR"]}, {"name": "b", "passes": []}],
          "timeout_s": 30}
ENV = "tvm-0.27.0.post1-cpu"


def envs(*ids: str) -> list:
    return [default_catalog().get(env_id) for env_id in ids]


def test_a_reduction_defaults_to_the_signature_oracle_and_holds_its_worker_past_the_budget(
        ) -> None:
    options = make_options("reduce", parse_case(MODULE), envs(ENV), "a", budget_s=60)
    assert (options.oracle, options.environment, options.variant) == ("signature", ENV, "a")
    assert options.run_timeout_s(parse_case(MODULE)) == 60 + 4 * 30


@pytest.mark.parametrize(("kind", "case", "extra", "field"), [
    ("reduce", MODULE, {}, "variant"),  # two variants: name one
    ("reduce", MODULE, {"variant": "c"}, "variant"),
    ("reduce", MODULE, {"variant": "a", "oracle": "output"}, "oracle"),
    ("reduce", MODULE, {"variant": "a", "budget_s": 9}, "budget_s"),
    ("reduce", {"script": "import tvm\n"}, {}, "case"),
    ("extract", MODULE, {}, "case"),
    ("extract", {"script": "import tvm\n"}, {"at": "somewhere"}, "at"),
])
def test_a_wrong_option_is_named(kind: str, case: dict, extra: dict, field: str) -> None:
    with pytest.raises(BadInput) as caught:
        make_options(kind, parse_case(case), envs(ENV), **extra)
    assert caught.value.field == field


def test_one_environment_only() -> None:
    with pytest.raises(BadInput) as caught:
        make_options("extract", parse_case({"script": "x = 1\n"}),
                     envs(ENV, "tvm-0.25.0-cpu"))
    assert caught.value.field == "environments"


def test_a_reduction_shows_its_best_case_so_far_until_its_answer() -> None:
    options = NarrowOptions(kind="reduce", environment=ENV, variant="a", oracle="signature",
                            budget_s=60, at="chain")
    small = {"source": "small = 1\n", "variants": [{"name": "a", "passes": []}]}
    final_case = {"source": "final = 1\n", "variants": [{"name": "a", "passes": []}]}
    best = {"case": small, "before": {"passes": 3, "lines": 9},
            "after": {"passes": 1, "lines": 4}}
    row = NarrowingRow(options=options, error=None, result=None, progress={
        "phase": "functions", "what": "drop f", "seconds": 3.0, "best": best})
    found = answer(row, "running")
    assert isinstance(found, Reduction) and found.case == parse_case(small)
    assert found.after is not None and found.after.lines == 4
    assert found.progress is not None and found.progress.phase == "functions"
    final = answer(dataclasses.replace(row, result={**best, "case": final_case, "finished": True}),
                   "done")
    assert isinstance(final, Reduction) and final.case == parse_case(final_case)
    assert final.finished
    extracted = answer(NarrowingRow(options=dataclasses.replace(options, kind="extract"),
                                    error="no module", result=None, progress=None), "failed")
    assert isinstance(extracted, Extraction) and extracted.error == "no module"
