"""The layer verdict's search over a script's cuts (tvmrepro/layers.py), on paths given as the
worker's runs would give them: which cuts it runs, in which order, and what it concludes.
The verdict on real reports and real TVM is tests/frontends/test_layers.py."""

from __future__ import annotations

from tvmrepro.layers import LINEAR_CUTS, Probe, cut_name, place
from tvmrepro.results import LayerPath

FAILING = LayerPath(path="default", status="error", stage="build", failed_in="pass:P12")


def cuts_failing_from(first_bad: int, passes: list[str], probed: list[int],
                      unmeasured: int | None = None) -> Probe:
    """A probe whose cuts agree below `first_bad` and fail from it on; `probed` records them."""
    def probe(keep: int) -> LayerPath:
        probed.append(keep)
        if keep == unmeasured:
            return LayerPath(path=cut_name(keep, passes), status="infra_error")
        if keep >= first_bad:
            return LayerPath(path=cut_name(keep, passes), status="error", failed_in="codegen")
        return LayerPath(path=cut_name(keep, passes), status="ok", outputs="same")
    return probe


def test_a_long_pipeline_is_cut_by_halves_then_one_by_one() -> None:
    passes = [f"P{i}" for i in range(20)]
    probed: list[int] = []
    layer, why, evidence = place(FAILING, passes, cuts_failing_from(13, passes, probed))
    # Halves while more than LINEAR_CUTS cuts are left, then the next one each time.
    assert LINEAR_CUTS < 10 and probed == [0, 10, 15, 11, 12, 13]
    assert layer == "pass:P12"  # cut 13 keeps P0..P12: the first that fails
    assert why == "the module agrees up to cut:12:P11 and shows the failure once P12 has run"
    assert [p.path for p in evidence] == ["unoptimised", "cut:10:P9", "cut:15:P14",
                                          "cut:11:P10", "cut:12:P11", "cut:13:P12"]


def test_a_short_pipeline_is_cut_one_by_one() -> None:
    passes = ["A", "B", "C", "D"]
    probed: list[int] = []
    layer, _, _ = place(FAILING, passes, cuts_failing_from(4, passes, probed))
    assert (layer, probed) == ("pass:D", [0, 1, 2, 3])  # cut 4 is the script as written


def test_a_path_that_cannot_be_measured_leaves_it_undecided() -> None:
    passes = ["A", "B", "C", "D"]
    probed: list[int] = []
    layer, why, evidence = place(FAILING, passes, cuts_failing_from(4, passes, probed, 2))
    assert layer is None and probed == [0, 1, 2]
    assert why == "the path cut:2:B could not be measured (infra_error)"
    assert evidence[-1].status == "infra_error"


def test_nothing_to_place_takes_no_run() -> None:
    probed: list[int] = []
    agrees = LayerPath(path="default", status="ok", outputs="noise")
    layer, why, evidence = place(agrees, ["A"], cuts_failing_from(0, ["A"], probed))
    assert (layer, evidence, probed) == (None, [], [])
    assert "nothing to place" in why


def test_a_module_that_fails_unoptimised_names_where() -> None:
    for failed_in, layer in (("pass:LegalizeOps", "import"), ("codegen", "codegen"),
                             ("run", "runtime"), ("check", "import")):
        def probe(keep: int, failed_in: str = failed_in) -> LayerPath:
            return LayerPath(path=cut_name(keep, ["A"]), status="error", failed_in=failed_in)
        assert place(FAILING, ["A"], probe)[0] == layer, failed_in


def test_a_spent_budget_leaves_it_undecided() -> None:
    passes = ["A", "B", "C", "D"]
    probed: list[int] = []
    run = cuts_failing_from(4, passes, probed)

    def probe(keep: int) -> LayerPath | None:
        return run(keep) if keep < 2 else None  # the time is spent before cut 2

    layer, why, evidence = place(FAILING, passes, probe)
    assert layer is None and probed == [0, 1] and [p.path for p in evidence] == [
        "unoptimised", "cut:1:A"]
    assert why.endswith("was spent before this path: cut:2:B")
