"""A job's fan-out: the (variant, environment) runs a case makes, its pass names checked first.

The one place where the API, the command line and anything else that runs a case
on several environments decide what runs: each variant (in the order asked, each
once) on each selected environment. Pass names are checked against the selected
environments only: a pass that none of them has is bad input. An environment
without a fingerprint (nobody has served or provisioned it yet) may have any
pass, so while one is selected, no pass is refused for being unknown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tvmrepro.cases import Case, check_pass_names
from tvmrepro.environments import Environment
from tvmrepro.errors import BadInput


@dataclass(frozen=True)
class PlannedRun:
    """One run of a job: a variant of the case in an environment."""

    variant: str
    env: Environment


def known_passes(envs: Sequence[Environment],
                 fingerprints: Mapping[str, Mapping[str, Any] | None]) -> set[str] | None:
    """The pass names the selected environments have together; None if one of them is unknown."""
    known: set[str] = set()
    for env in envs:
        fingerprint = fingerprints.get(env.id)
        if not fingerprint or fingerprint.get("passes") is None:
            return None
        known.update(fingerprint["passes"])
    return known


def select_variants(case: Case, names: Sequence[str] | None, field: str = "variants") -> list[str]:
    """The variants asked for (all of the case's when none), each once; BadInput names a wrong one."""
    for index, name in enumerate(names or []):
        try:
            case.variant(name)
        except BadInput as exc:
            raise BadInput(f"{field}[{index}]", exc.problem) from exc
    return list(dict.fromkeys(names or case.variant_names))


def check_requires(case: Case, envs: Sequence[Environment], field: str) -> None:
    """BadInput naming the first package version the case requires that an environment it
    would run on does not pin (the environments' own pins, and their frontend pins)."""
    for name, version in case.requires.items():
        pins = {env.id: {**env.packages, **env.frontend_packages}.get(name) for env in envs}
        lacking = [env_id for env_id, pin in pins.items() if pin != version]
        if lacking:
            pinned = sorted({pin for pin in pins.values() if pin})
            raise BadInput(f"{field}.{name}", f"no pinned environment has {name} {version} "
                           f"({', '.join(lacking)} pin {', '.join(pinned) or 'no ' + name})")


def fan_out(case: Case, envs: Sequence[Environment],
            fingerprints: Mapping[str, Mapping[str, Any] | None],
            variants: Sequence[str] | None = None, variant_field: str = "variants",
            case_field: str = "") -> list[PlannedRun]:
    """Every (variant, environment) run, variant by variant; BadInput for a wrong variant or pass.

    `fingerprints` maps environment ids to what their TVM has (others are ignored);
    `variant_field` is what an error about a requested variant names, `case_field`
    what a wrong pass's field is under (e.g. "case" for "case.variants[0].passes[1]").
    """
    chosen = select_variants(case, variants, variant_field)
    check_requires(case, envs, f"{case_field}.requires" if case_field else "requires")
    known = known_passes(envs, fingerprints)
    try:
        if known is not None:
            check_pass_names(case, known)
    except BadInput as exc:
        if not case_field:
            raise
        raise BadInput(f"{case_field}.{exc.field}", exc.problem) from exc
    return [PlannedRun(variant, env) for variant in chosen for env in envs]
