"""A sweep: every stored case (the cases of the store's run jobs) on a new environment, and what
changed against an older one: fixed, regressed, a new signature, or the same."""

from __future__ import annotations

import hashlib
import json
from enum import Enum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from tvmrepro.api.pages import PageShown
from tvmrepro.environments import Catalog, Environment
from tvmrepro.errors import BadInput
from tvmrepro.jobs.tracker.known import bug_signature
from tvmrepro.results import FAILING, NOT_MEASURED

if TYPE_CHECKING:
    from tvmrepro.store.rows import JobRow


class Change(str, Enum):
    """What happened to one case's variant between the two environments."""

    FIXED = "fixed"  # failed on the old one, passes on the new one
    REGRESSED = "regressed"  # passed on the old one, fails on the new one
    NEW_SIGNATURE = "new_signature"  # fails on both, another way on the new one (or status)
    SAME = "same"
    NOT_MEASURED = "not_measured"  # incompatible or an infrastructure error on either


class Outcome(BaseModel):
    """One run's status and the signature its failure is known by."""

    status: str
    signature: str | None = None


class StoredCase(BaseModel):
    """One variant of a case that the store holds, and the first job that ran it."""

    job: str
    title: str
    case: dict[str, Any]
    variant: str


class SweepLine(BaseModel):
    """One stored case's variant on both environments."""

    job: str
    title: str
    variant: str
    old: Outcome
    new: Outcome
    change: Change


class SweepAnswer(BaseModel):
    """What `tvmrepro sweep --json` prints."""

    env: str
    since: str
    cases: list[SweepLine]
    changed: dict[str, int]  # change -> how many cases' variants


def outcome(result: dict[str, Any]) -> Outcome:
    """A result (as stored or returned) as the sweep compares it."""
    status = str(result.get("status"))
    return Outcome(status=status, signature=bug_signature(status, result.get("signature"),
                                                          result.get("stage")))


def change_of(old: Outcome, new: Outcome) -> Change:
    """What changed from `old` to `new`."""
    if old.status in NOT_MEASURED or new.status in NOT_MEASURED:
        return Change.NOT_MEASURED
    failed, fails = old.status in FAILING, new.status in FAILING
    if failed and not fails:
        return Change.FIXED
    if fails and not failed:
        return Change.REGRESSED
    if fails and (old.status, old.signature) != (new.status, new.signature):
        return Change.NEW_SIGNATURE
    return Change.SAME


def _content_key(case: dict[str, Any], variant: str) -> str:
    """What makes two stored cases one: the case without its title, and the variant."""
    material = {k: v for k, v in case.items() if k != "title"}
    text = json.dumps([material, variant], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def stored_cases(jobs: list[JobRow]) -> list[StoredCase]:
    """Each variant of each case the jobs ran, once (the oldest job that ran it named)."""
    found: dict[str, StoredCase] = {}
    for job in sorted(jobs, key=lambda job: job.created_at):
        for variant in job.variants:
            found.setdefault(_content_key(job.case, variant), StoredCase(
                job=job.id, title=job.title, case=job.case, variant=variant))
    return list(found.values())


def sweep_answer(env: str, since: str, cases: list[StoredCase],
                 outcomes: list[tuple[Outcome, Outcome]]) -> SweepAnswer:
    """The answer, given each stored case's outcome on `since` and on `env`."""
    lines = [SweepLine(job=case.job, title=case.title, variant=case.variant, old=old, new=new,
                       change=change_of(old, new))
             for case, (old, new) in zip(cases, outcomes, strict=True)]
    changed = {change.value: sum(line.change == change for line in lines) for change in Change}
    return SweepAnswer(env=env, since=since, cases=lines,
                       changed={k: v for k, v in changed.items() if v})


class SweepProgress(BaseModel):
    """How far a sweep job is: stored cases with both outcomes, and runs."""

    cases: int
    cases_done: int
    runs: int
    runs_done: int


class SweepJobAnswer(SweepAnswer):
    """A sweep job's `sweep` field: the answer over the cases done so far (all of them once
    `finished`), each case's run job beside it, and the progress."""

    jobs: list[str] = Field(description="jobs[i]: the run job of cases[i] (its runs on both "
                                        "environments, stored)")
    progress: SweepProgress
    finished: bool = Field(description="every stored case has both outcomes")
    page: PageShown | None = Field(
        default=None, description="which of the cases done so far cases and jobs list "
                                  "(?offset=&limit=); null: all of them")
    next_offset: int | None = Field(
        default=None, description="the store held more stored cases than one sweep runs "
                                  "(TVMREPRO_MAX_SWEEP_CASES): the `offset` of a sweep of the "
                                  "next ones; null: none are left")

    def answer(self) -> SweepAnswer:
        """The part that `tvmrepro sweep --json` prints."""
        return SweepAnswer(env=self.env, since=self.since, cases=self.cases,
                           changed=self.changed)


def previous_environment(catalog: Catalog, new: Environment, field: str) -> Environment:
    """The newest final release of the same device before `new` (else any release before it);
    BadInput naming `field` where there is none."""
    older = [env for env in catalog.spanning(new.device) if env.version < new.version]
    older = older or [env for env in catalog.environments
                      if env.device == new.device and env.version < new.version]
    if not older:
        raise BadInput(field, f"no environment before {new.id}: name one")
    return max(older, key=lambda env: env.version)


def sweep_job_answer(env: str, since: str, cases: list[StoredCase], jobs: list[str],
                     results: list[list[dict[str, Any] | None]]) -> SweepJobAnswer:
    """The answer over the cases whose two runs (on `since`, then on `env`) are done."""
    chosen = [i for i, found in enumerate(results)
              if len(found) == 2 and all(result is not None for result in found)]
    answer = sweep_answer(env, since, [cases[i] for i in chosen],
                          [(outcome(results[i][0] or {}), outcome(results[i][1] or {}))
                           for i in chosen])
    progress = SweepProgress(cases=len(cases), cases_done=len(chosen),
                             runs=sum(len(found) for found in results),
                             runs_done=sum(r is not None for found in results for r in found))
    return SweepJobAnswer(**answer.model_dump(), jobs=[jobs[i] for i in chosen],
                          progress=progress, finished=len(chosen) == len(cases))
