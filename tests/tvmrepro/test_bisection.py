"""The bisection's pure logic, on constructed results: oracles, probes, transitions, verdicts."""

from __future__ import annotations

from typing import Any

import pytest

from tests.tvmrepro.job_views import job_of
from tests.tvmrepro.observations import ENVS, observe, result
from tvmrepro.environments import default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.jobs.bisect.logic import Options, evaluate, initial_probes
from tvmrepro.jobs.oracles import Verdict, judge, parse_oracle


def bisect_all(results: dict[str, Any], oracle: str = "failure", **options: Any) -> dict[str, Any]:
    """The bisect object of every environment in ENVS probed with these results."""
    found, upcoming = evaluate(Options(ENVS, "v", oracle, **options), observe(results))
    assert upcoming == []
    return found


def test_a_bug_fixed_once_is_changed_with_the_pair() -> None:
    found = bisect_all({e: result("error" if n < 5 else "ok") for n, e in enumerate(ENVS)})
    assert found["verdict"] == "changed"
    assert (found["last_before_change"], found["first_changed"]) == ("e4", "e5")
    assert found["transitions"] == [{"before": "e4", "after": "e5", "from": "bad", "to": "good",
                                     "candidates": [], "not_in_range": []}]
    assert [p["verdict"] for p in found["probes"]] == ["bad"] * 5 + ["good"] * 3
    assert found["finished"] and found["progress"] == {"done": 8, "total": 8}


def test_a_bug_that_comes_and_goes_is_non_monotonic_with_both_transitions() -> None:
    statuses = ["ok", "ok", "crash", "crash", "ok", "ok", "ok", "ok"]
    found = bisect_all({e: result(s) for e, s in zip(ENVS, statuses, strict=True)})
    assert found["verdict"] == "non_monotonic"
    assert [(t["before"], t["after"], t["to"]) for t in found["transitions"]] == [
        ("e1", "e2", "bad"), ("e3", "e4", "good")]
    assert found["first_changed"] is None and found["last_before_change"] is None


def test_bad_everywhere_is_unchanged() -> None:
    found = bisect_all({e: result("error") for e in ENVS})
    assert found["verdict"] == "unchanged" and found["transitions"] == []


def test_an_incompatible_environment_at_the_change_is_a_candidate() -> None:
    statuses = ["error", "error", "error", "incompatible", "infra_error", "ok", "ok", "ok"]
    found = bisect_all({e: result(s) for e, s in zip(ENVS, statuses, strict=True)})
    assert found["verdict"] == "inconclusive"
    (change,) = found["transitions"]
    assert (change["before"], change["after"], change["candidates"]) == ("e2", "e5", ["e3", "e4"])
    assert [p["verdict"] for p in found["probes"]][3:5] == ["skip", "skip"]


def test_disagreeing_repeats_make_a_flaky_probe_and_a_candidate() -> None:
    results: dict[str, Any] = {e: [result("error")] * 2 for e in ENVS[:3]}
    results["e3"] = [result("error"), result("ok")]
    results.update({e: [result("ok")] * 2 for e in ENVS[4:]})
    found = bisect_all(results, repeat=2)
    assert found["probes"][3]["verdict"] == "flaky"
    assert found["probes"][3]["statuses"] == ["error", "ok"]
    assert found["transitions"][0]["candidates"] == ["e3"]
    assert found["verdict"] == "inconclusive"


def test_signature_oracle_compares_with_the_newest_failing_environment() -> None:
    statuses = {"e0": result("error", "A"), "e1": result("error", "B"), "e2": result("error", "B"),
                "e3": result("ok"), "e4": result("ok"), "e5": result("ok"), "e6": result("ok"),
                "e7": result("ok")}
    found = bisect_all(statuses, oracle="signature")
    assert found["reference"] == "e2" and found["reference_signature"] == "B"
    assert [p["verdict"] for p in found["probes"]][:4] == ["good", "bad", "bad", "good"]
    assert found["verdict"] == "non_monotonic"
    chosen = bisect_all(statuses, oracle="signature", reference="e0")
    assert [p["verdict"] for p in chosen["probes"]][:3] == ["bad", "good", "good"]


def test_signature_text_status_and_regex_oracles() -> None:
    run = result("error", "InternalError: Cannot find function vm.builtin.x",
                 message="Cannot find function", log_text="Traceback ... line 3")
    assert judge(parse_oracle("signature:vm.builtin"), run, None) is Verdict.BAD
    assert judge(parse_oracle("signature:other"), run, None) is Verdict.GOOD
    assert judge(parse_oracle("status:crash"), run, None) is Verdict.GOOD
    assert judge(parse_oracle("status:error"), run, None) is Verdict.BAD
    assert judge(parse_oracle("regex:line \\d"), run, None) is Verdict.BAD
    assert judge(parse_oracle("regex:^nothing$"), run, None) is Verdict.GOOD
    for always in ("incompatible", "infra_error"):
        assert judge(parse_oracle("failure"), result(always), None) is Verdict.SKIP


def summary(values: list[float], dtype: str = "float32") -> dict[str, Any]:
    """An output summary as the harness writes it (all values sampled)."""
    return {"shape": [len(values)], "dtype": dtype, "sha256": str(values), "sample": values}


def test_output_oracle_sees_through_float_noise_not_through_a_miscompile() -> None:
    reference = result("ok", outputs=[summary([1.0, 2.0, 3.0])])
    oracle = parse_oracle("output")
    noisy = result("ok", outputs=[summary([1.0, 2.0, 3.0 + 1e-6])])
    wrong = result("ok", outputs=[summary([1.0, 2.0, 3.5])])
    reshaped = result("ok", outputs=[summary([1.0, 2.0])])
    assert judge(oracle, noisy, reference) is Verdict.GOOD
    assert judge(oracle, wrong, reference) is Verdict.BAD
    assert judge(oracle, reshaped, reference) is Verdict.BAD
    assert judge(oracle, result("error"), reference) is Verdict.BAD  # no outputs at all


def test_output_oracle_judges_against_the_newest_environment_that_ran() -> None:
    results = {e: result("ok", outputs=[summary([1.0 if n >= 3 else 2.0])])
               for n, e in enumerate(ENVS)}
    results["e0"] = result("error")  # no outputs at all: they differ too
    found = bisect_all(results, oracle="output")
    assert found["reference"] == "e7"
    assert [p["verdict"] for p in found["probes"]] == ["bad"] * 3 + ["good"] * 5
    assert found["verdict"] == "changed" and found["first_changed"] == "e3"


@pytest.mark.parametrize("text", ["", "nope", "status:", "status:incompatible", "status:fine",
                                  "regex:(", "regex:", "signature:", "failure:x", "output:1"])
def test_a_bad_oracle_names_the_oracle(text: str) -> None:
    with pytest.raises(BadInput) as caught:
        parse_oracle(text)
    assert caught.value.field == "oracle"


def run_binary(statuses: list[str], **options: Any) -> tuple[dict[str, Any], list[list[str]]]:
    """Drive the binary strategy to its end on these statuses; the object and each round."""
    envs = [f"e{n}" for n in range(len(statuses))]
    opts = Options(envs, "v", strategy="binary", **options)
    by_env = dict(zip(envs, statuses, strict=True))
    rounds, observed = [initial_probes(opts)], []
    while rounds[-1]:
        observed += observe({e: result(by_env[e]) for e in rounds[-1]})
        found, upcoming = evaluate(opts, observed)
        rounds.append(upcoming)
    return found, rounds[:-1]


def test_binary_probes_both_ends_then_halves() -> None:
    statuses = ["error"] * 11 + ["ok"] * 5
    found, rounds = run_binary(statuses)
    assert rounds[0] == ["e0", "e15"]
    assert all(len(r) == 1 for r in rounds[1:])
    assert len(rounds) <= 6  # 2 ends, then about log2(14) halvings
    assert found["verdict"] == "changed"
    assert (found["last_before_change"], found["first_changed"]) == ("e10", "e11")
    assert found["finished"] and found["progress"]["done"] == found["progress"]["total"]


def test_binary_with_agreeing_ends_is_inconclusive_not_a_guess() -> None:
    found, rounds = run_binary(["error", "error", "ok", "ok", "error", "error"])
    assert rounds == [["e0", "e5"]]
    assert found["verdict"] == "inconclusive" and found["transitions"] == []
    assert found["finished"]


def test_binary_moves_inwards_from_a_skipped_end() -> None:
    found, rounds = run_binary(["incompatible", "error", "error", "ok", "ok"])
    assert rounds[0] == ["e0", "e4"] and rounds[1] == ["e1"]
    assert found["verdict"] == "changed" and found["first_changed"] == "e3"


def test_releases_the_range_left_out_are_named_not_hidden() -> None:
    # The page bisects over the served releases: three of ten. The answer names the others.
    served = ["tvm-0.25.0.post1-cpu", "tvm-0.26.0-cpu", "tvm-0.27.0.post1-cpu"]
    results = {served[0]: result("ok"), served[1]: result("ok"), served[2]: result("error")}
    found, _ = evaluate(Options(served, "v", "failure"), observe(results))
    assert found["verdict"] == "changed"
    between = ["tvm-0.27.0rc0-cpu", "tvm-0.27.0rc1-cpu", "tvm-0.27.0-cpu"]
    assert found["transitions"][0]["not_in_range"] == between
    assert found["not_in_range"] == ["tvm-0.26.0rc0-cpu", *between]
    every = [e.id for e in default_catalog().environments if e.device == "cpu"]
    whole, _ = evaluate(Options(every, "v", "failure"),
                        observe({e: result("ok") for e in every}))
    assert whole["not_in_range"] == []


def test_the_report_says_changed_between_when_releases_were_left_out() -> None:
    from tvmrepro.api.views import Bisection
    from tvmrepro.jobs.report import conclusion

    served = ["tvm-0.25.0.post1-cpu", "tvm-0.26.0-cpu", "tvm-0.27.0.post1-cpu"]
    found, _ = evaluate(Options(served, "v", "failure"), observe(
        {served[0]: result("ok"), served[1]: result("ok"), served[2]: result("error")}))
    job = job_of({"v": ["ok", "ok", "error"]})
    job.bisect = Bisection.model_validate(found)
    said = conclusion(job, default_catalog())
    assert "it changed between 0.26.0 and 0.27.0.post1; not probed between them: 0.27.0rc0, " \
           "0.27.0rc1, 0.27.0" in said, said
