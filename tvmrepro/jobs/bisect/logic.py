"""Bisection across releases, as pure logic: probes, transitions, the verdict.

An oracle (oracles.py) judges one run `bad`, `good` or `skip`; a probe is every run (the
repeats) of one environment; transitions are the changes of verdict between
neighbouring decided (good or bad) probes, with the environments between them
that could hide the change as `candidates`. Nothing here does I/O: the
service, the workers and the command line feed it results and store or print
what it says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from itertools import pairwise
from typing import Any, get_args

from tvmrepro.api.requests import Strategy
from tvmrepro.cases import Case
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.jobs.oracles import Oracle, OracleTooSlow, Verdict, combine, judge, parse_oracle
from tvmrepro.results import FAILING, Status

STRATEGIES: tuple[Strategy, ...] = get_args(Strategy)
ALL, BINARY = STRATEGIES  # every environment at once; both ends, then halves
DEFAULT_ORACLE = "failure"


class Outcome(str, Enum):
    """What a bisection found."""

    UNCHANGED = "unchanged"
    CHANGED = "changed"
    NON_MONOTONIC = "non_monotonic"
    INCONCLUSIVE = "inconclusive"


# Probes ----------------------------------------------------------------------

@dataclass
class Observation:
    """One run of a bisection: its environment, id, and result (None until it has one)."""

    environment: str
    run_id: str
    result: dict[str, Any] | None = None


@dataclass
class Probe:
    """Every run of one environment, and the verdict they give."""

    environment: str
    runs: list[Observation] = field(default_factory=list)
    verdict: Verdict | None = None  # None while a run is unfinished

    @property
    def done(self) -> bool:
        """Every run of the probe has a result."""
        return all(run.result is not None for run in self.runs)

    def first(self) -> dict[str, Any]:
        """The first run's result (the probe's status, stage and signature)."""
        return self.runs[0].result or {}

    def to_json(self) -> dict[str, Any]:
        """The probe as docs/contract.md shapes it (plus every repeat's status)."""
        first = self.first()
        found = {"environment": self.environment, "verdict": self.verdict.value if self.verdict
                 else None, "status": first.get("status"), "stage": first.get("stage"),
                 "signature": first.get("signature"), "runs": [r.run_id for r in self.runs]}
        if len(self.runs) > 1:
            found["statuses"] = [(r.result or {}).get("status") for r in self.runs]
        if first.get("environment_defect"):  # skipped: the environment cannot run it
            found["environment_defect"] = first["environment_defect"]
        return found


def group_probes(environments: list[str], observations: list[Observation]) -> dict[str, Probe]:
    """Environment -> its probe, for the environments of the range that have runs."""
    probes: dict[str, Probe] = {}
    for obs in observations:
        if obs.environment in environments:
            probes.setdefault(obs.environment, Probe(obs.environment)).runs.append(obs)
    return {env: probes[env] for env in environments if env in probes}


def pick_reference(oracle: Oracle, probes: dict[str, Probe],
                   chosen: str | None) -> tuple[str | None, dict[str, Any] | None]:
    """The reference environment and run: the one chosen, else the newest that fails
    (for `output`: the newest that ran to the end with outputs)."""
    if not oracle.needs_reference:
        return None, None
    if chosen is not None:
        probe = probes.get(chosen)
        return chosen, (probe.first() if probe and probe.done else None)
    for env in reversed(list(probes)):
        probe = probes[env]
        if not probe.done:
            continue
        first = probe.first()
        if oracle.kind == "signature" and Status(first["status"]) in FAILING:
            return env, first
        if oracle.kind == "output" and first["status"] == Status.OK and first.get("outputs"):
            return env, first
    return None, None


# Transitions and the verdict -------------------------------------------------

def transitions(environments: list[str], probes: dict[str, Probe]) -> list[dict[str, Any]]:
    """Every change of verdict between neighbouring decided probes, with its candidates."""
    decided = [p for p in probes.values() if p.verdict in (Verdict.GOOD, Verdict.BAD)]
    index = {env: n for n, env in enumerate(environments)}
    found = []
    for before, after in pairwise(decided):
        if before.verdict is after.verdict:
            continue
        assert before.verdict is not None and after.verdict is not None
        # Between two neighbouring decided probes everything is skipped, flaky or unprobed.
        between = environments[index[before.environment] + 1:index[after.environment]]
        found.append({"before": before.environment, "after": after.environment,
                      "from": before.verdict.value, "to": after.verdict.value,
                      "candidates": between})
    return found


def outside_the_range(environments: list[str], before: str, after: str) -> list[str]:
    """Releases of the catalog (of `before`'s device) between two probes that the range left
    out (the page bisects over the releases a worker serves): nobody probed them, so the
    change may lie there too."""
    catalog = default_catalog()
    if before not in catalog.ids or after not in catalog.ids:
        return []
    device = catalog.get(before).device
    ordered = [e.id for e in catalog.environments if e.device == device]
    if before not in ordered or after not in ordered:
        return []
    low, high = sorted((ordered.index(before), ordered.index(after)))
    return [env for env in ordered[low + 1:high] if env not in environments]


def outcome(environments: list[str], probes: dict[str, Probe],
            changes: list[dict[str, Any]]) -> Outcome:
    """unchanged, changed, non_monotonic or inconclusive (docs/contract.md, "Bisection")."""
    if len(changes) > 1:
        return Outcome.NON_MONOTONIC
    if len(changes) == 1:
        return Outcome.INCONCLUSIVE if changes[0]["candidates"] else Outcome.CHANGED
    decided = [p for p in probes.values() if p.verdict in (Verdict.GOOD, Verdict.BAD)]
    unprobed = [env for env in environments if env not in probes or not probes[env].done]
    # Agreeing ends with unprobed releases between them could hide a bug that came and went.
    return Outcome.UNCHANGED if decided and not unprobed else Outcome.INCONCLUSIVE


def next_probes(environments: list[str], probes: dict[str, Probe]) -> list[str]:
    """The binary strategy's next environments: both ends first, then halves (none: done)."""
    if any(not p.done for p in probes.values()):
        return []  # decide on finished probes only
    unprobed = [env for env in environments if env not in probes]
    ends = [env for env in (environments[0], environments[-1]) if env in unprobed]
    decided = [p for p in probes.values() if p.verdict in (Verdict.GOOD, Verdict.BAD)]
    if ends or not decided:  # skipped ends: move inwards from the outside
        return list(dict.fromkeys(ends or unprobed[:1] + unprobed[-1:]))
    if len(decided) == 1:  # look for a second decided probe on the side of a skipped end
        cut = environments.index(decided[0].environment)
        left = [e for e in unprobed if environments.index(e) < cut]
        right = [e for e in unprobed if environments.index(e) > cut]
        return left[:1] or right[-1:]
    if decided[0].verdict is decided[-1].verdict:
        return []  # the ends agree: say inconclusive rather than guess
    index = {env: n for n, env in enumerate(environments)}
    for before, after in pairwise(decided):
        if before.verdict is after.verdict:
            continue
        gap = [env for env in environments[index[before.environment] + 1:
                                           index[after.environment]] if env in unprobed]
        if gap:
            return [gap[len(gap) // 2]]
    return []


@dataclass(frozen=True)
class Options:
    """What a bisection was asked: the range, the variant, the oracle, and how to probe."""

    environments: list[str]
    variant: str
    oracle: str = DEFAULT_ORACLE
    reference: str | None = None
    repeat: int = 1
    strategy: Strategy = ALL
    bypass_cache: bool = False  # the first repeat too runs again


# What an error names for each option: the API's fields by default, the CLI passes its flags.
API_FIELDS = {"variant": "variant", "environments": "environments", "reference": "reference",
              "oracle": "oracle", "repeat": "repeat", "strategy": "strategy"}
MAX_REPEAT = 10


def choose_variant(case: Case, name: str | None, field: str) -> str:
    """The variant named (checked), or the case's only one; BadInput naming `field` if neither."""
    if name is not None:
        try:
            case.variant(name)
        except BadInput as exc:
            raise BadInput(field, exc.problem) from exc
        return name
    if len(case.variant_names) != 1:
        raise BadInput(field, f"the case has {len(case.variant_names)} variants; name one of "
                              f"{case.variant_names}")
    return case.variant_names[0]


def make_options(case: Case, envs: list[Environment], variant: str | None = None,
                 oracle: str = DEFAULT_ORACLE, reference: str | None = None, repeat: int = 1,
                 strategy: str = ALL, bypass_cache: bool = False,
                 fields: dict[str, str] | None = None) -> Options:
    """A bisection's options, each checked; BadInput names the wrong field (or flag)."""
    names = fields or API_FIELDS
    if len({env.device for env in envs}) > 1:
        raise BadInput(names["environments"], "a bisection follows one device's releases; "
                                              "name environments of one device")
    if len(envs) < 2:
        raise BadInput(names["environments"], "a bisection needs at least two environments")
    ids = [env.id for env in envs]
    if reference is not None and reference not in ids:
        raise BadInput(names["reference"], f"{reference!r} is not one of the bisected "
                                           f"environments {ids}")
    if not 1 <= repeat <= MAX_REPEAT:
        raise BadInput(names["repeat"], f"must be 1 to {MAX_REPEAT}")
    chosen = next((name for name in STRATEGIES if name == strategy), None)
    if chosen is None:
        raise BadInput(names["strategy"], f"must be one of {', '.join(STRATEGIES)}")
    try:
        text = parse_oracle(oracle).text
    except BadInput as exc:
        raise BadInput(names["oracle"], exc.problem) from exc
    return Options(ids, choose_variant(case, variant, names["variant"]), text, reference,
                   repeat, chosen, bypass_cache)


def initial_probes(options: Options) -> list[str]:
    """The environments probed first: every one (all), or both ends (binary)."""
    if options.strategy == ALL:
        return list(options.environments)
    first = next_probes(options.environments, {})
    if options.reference and options.reference not in first:
        first.append(options.reference)  # the reference's run judges the others
    return first


def judge_probes(oracle: Oracle, probes: dict[str, Probe],
                 ref_run: dict[str, Any] | None) -> list[str]:
    """Give each finished probe its verdict; the oracle's error if it exceeded its budget
    (every verdict then `skip`, those given before it too)."""
    too_slow: list[str] = []

    def verdict_of(result: dict[str, Any]) -> Verdict:
        # A pattern that ran out of time once is not tried again in this evaluation: each
        # step of a bisection pays for at most one budget, and every run reads `skip`.
        if too_slow:
            return Verdict.SKIP
        try:
            return judge(oracle, result, ref_run)
        except OracleTooSlow as exc:
            too_slow.append(exc.problem)
            return Verdict.SKIP

    for probe in probes.values():
        if probe.done:
            probe.verdict = combine([verdict_of(run.result or {}) for run in probe.runs])
    if too_slow:
        for probe in probes.values():
            if probe.verdict is not None:
                probe.verdict = Verdict.SKIP
    return too_slow


def evaluate(options: Options, observations: list[Observation]) -> tuple[dict[str, Any], list[str]]:
    """The bisect object (docs/contract.md) for these runs, and the environments to probe next."""
    oracle = parse_oracle(options.oracle)
    envs = options.environments
    probes = group_probes(envs, observations)
    ref_env, ref_run = pick_reference(oracle, probes, options.reference)
    # A chosen reference judges the others only once its own run is in.
    waiting = oracle.needs_reference and options.reference is not None and ref_run is None
    too_slow = [] if waiting else judge_probes(oracle, probes, ref_run)
    upcoming = (next_probes(envs, probes)
                if options.strategy == BINARY and not waiting and not too_slow else [])
    pending = [p for p in probes.values() if not p.done]
    changes = transitions(envs, probes)
    verdict = outcome(envs, probes, changes)
    for change in changes:
        change["not_in_range"] = outside_the_range(envs, change["before"], change["after"])
    changed = verdict is Outcome.CHANGED
    done = sum(p.done for p in probes.values())
    found = {
        "oracle": oracle.text, "environments": envs, "variant": options.variant,
        "probes": [p.to_json() for p in probes.values() if p.verdict is not None],
        "transitions": changes, "verdict": verdict.value,
        "not_in_range": outside_the_range(envs, envs[0], envs[-1]) if envs else [],
        "first_changed": changes[0]["after"] if changed else None,
        "last_before_change": changes[0]["before"] if changed else None,
        "reference": ref_env,
        "reference_signature": (ref_run or {}).get("signature") if oracle.kind == "signature"
        else None,
        "strategy": options.strategy, "repeat": options.repeat,
        "progress": {"done": done, "total": len(probes) + len(upcoming)},
        "finished": not pending and not upcoming and not waiting,
        "oracle_error": too_slow[0] if too_slow else None,
    }
    return found, upcoming


# Runs (or queues) a round's probes, `options.repeat` runs each: their observations, as each
# is known (a queued run's has no result yet, and the bisection waits for it).
ProbeRound = Callable[[list[str]], Iterable[Observation]]


def bisect_rounds(options: Options, probe: ProbeRound, observed: list[Observation],
                  todo: list[str] | None = None,
                  seen: Callable[[dict[str, Any]], None] | None = None,
                  ) -> tuple[dict[str, Any], list[Observation]]:
    """The one loop of a bisection: probe `todo` (default: what the observations so far ask
    for next), judge, and probe what that asks for, until nothing is asked (the answer is
    found, or a probe waits for its result). `seen` gets the bisect object after each
    observation. The bisect object, and every observation."""
    observed = list(observed)
    found, upcoming = evaluate(options, observed)
    upcoming = upcoming if todo is None else todo
    while upcoming:
        for observation in probe(upcoming):
            observed.append(observation)
            if seen is not None:
                seen(evaluate(options, observed)[0])
        found, upcoming = evaluate(options, observed)
    return found, observed
