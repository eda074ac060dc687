"""A check: the issue's report as a finished triage (of one report, or a sweep's of many) says
it is, read from the store into what the comment shows; and the labels a check gives. A label
comes from the verdict and the catalog's release names only: nothing a run printed chooses
one."""

from __future__ import annotations

from typing import Any

from tvmrepro.api.views import JobView
from tvmrepro.bot.state import Check, Row
from tvmrepro.environments import Catalog, default_catalog
from tvmrepro.jobs.kinds import KINDS
from tvmrepro.jobs.run import RUN
from tvmrepro.jobs.tracker.known import result_bug_signature
from tvmrepro.jobs.tracker.steps import read_triage
from tvmrepro.jobs.tracker.triage_job import TriageJobAnswer
from tvmrepro.reproducer import reproducer
from tvmrepro.results import FAILING
from tvmrepro.store import Store

REPRODUCES_LABEL = "reproduces-on-latest"
NEEDS_REPRODUCER_LABEL = "needs-reproducer"
DUPLICATE_LABEL = "likely-duplicate"
FIXED_PREFIX = "fixed-on-"
MAX_REPRODUCER_CHARS = 20_000  # a comment holds 65,536 characters


def run_view(store: Store, job_id: str | None) -> JobView | None:
    """A run job's view (None: no such job)."""
    job = store.job(job_id) if job_id else None
    return KINDS[RUN].read(store, job) if job is not None and job.kind == RUN else None


def read_check(store: Store, job_id: str, number: int) -> Check | None:
    """The check of issue `number` by triage `job_id`, once its report's runs are all done
    (None until then, or where the triage has no such report)."""
    job = store.job(job_id)
    if job is None:
        return None
    answer = read_triage(store, job)
    index = next((i for i, line in enumerate(answer.reports) if line.number == number), None)
    if index is None:
        return None
    return check_of(answer, index, job_id, run_view(store, answer.jobs[index]))


def check_of(answer: TriageJobAnswer, index: int, job_id: str, view: JobView | None) -> Check:
    """The check of `answer.reports[index]`, its run job's view beside it. Its likely
    duplicates are the known issues failing with its signature that were opened before it (a
    lower number): a later report of the bug is the duplicate, not the report it repeats."""
    line = answer.reports[index]
    group = {g.id: g.signature for g in answer.groups}.get(line.group) if line.group else None
    check = Check(job=job_id, run_job=answer.jobs[index], verdict=line.verdict.value,
                  since=line.since, environments=answer.environments,
                  environments_why=answer.environments_why, not_probed=answer.not_probed,
                  signature=group, quoted_error_reproduced=line.quoted_error_reproduced,
                  no_code=line.no_code, incompatible=line.incompatible)
    if view is None:
        return check
    return check.model_copy(update={
        "rows": rows_of(view),
        "duplicates": [i.number for i in view.likely_duplicates
                       if line.number is None or i.number < line.number],
        **reproducer_of(view)})


def rows_of(view: JobView) -> list[Row]:
    """A release per row, oldest first: each run's status, stage and signature."""
    by_env = {run.environment: run.result or {} for run in view.runs}
    return [Row(env=env, status=str(by_env[env].get("status") or "waiting"),
                stage=by_env[env].get("stage"),
                signature=result_bug_signature(by_env[env]) or by_env[env].get("signature"))
            for env in view.environments if env in by_env]


def reproducer_of(view: JobView) -> dict[str, Any]:
    """The plain-Python script of the newest release that fails (else the newest), made from
    the case (never a run's own text)."""
    runs = [run for run in view.runs if run.result]
    failing = [run for run in runs if run.result and run.result.get("status") in FAILING]
    if not runs:
        return {}
    chosen = (failing or runs)[-1]
    catalog = default_catalog()
    env = catalog.get(chosen.environment) if chosen.environment in catalog.ids else None
    script = reproducer(view.case, chosen.variant, env.release if env else chosen.environment,
                        env.target if env else "llvm", (chosen.result or {}).get("rewrites"))
    return {"reproducer": script[:MAX_REPRODUCER_CHARS], "reproducer_env": chosen.environment}


def fixed_label(env_id: str, catalog: Catalog) -> str:
    """`fixed-on-<release>` (the release of a catalog environment; its id otherwise)."""
    release = catalog.get(env_id).release if env_id in catalog.ids else env_id
    return FIXED_PREFIX + release


def is_bot_label(name: str) -> bool:
    """Whether the bot chooses this label (it removes only its own)."""
    return name in (REPRODUCES_LABEL, NEEDS_REPRODUCER_LABEL, DUPLICATE_LABEL) or \
        name.startswith(FIXED_PREFIX)


def labels_of(check: Check | None, duplicate: bool, catalog: Catalog) -> list[str]:
    """The labels a check gives: its verdict's, and likely-duplicate where known issues fail
    with its signature (`duplicate`: a maintainer did not say otherwise)."""
    if check is None:
        return []
    found = []
    if check.verdict == "reproduces":
        found.append(REPRODUCES_LABEL)
    elif check.verdict == "fixed" and check.since:
        found.append(fixed_label(check.since, catalog))
    elif check.verdict == "no_code":
        found.append(NEEDS_REPRODUCER_LABEL)
    if duplicate and check.duplicates:
        found.append(DUPLICATE_LABEL)
    return found
