"""A run's life and identity, shared by the API and the workers.

A job fans out into runs; each run is `queued`, then `running` (claimed by one
worker process), then `done` (it has a result). A job's status follows from its
runs. Two runs are the same (the cache key) when the case as run, the variant,
the environment's pins and the harness's code are the same.

The cache serves only decisive results: what the case does by itself. A `timeout`
(a loaded host runs a case slower), a `crash` by SIGKILL (the host's OOM killer)
and an `infra_error` (the service's fault) say as much about the host as about the
case, so they are stored but never served; and the first decisive result of a key
is the one served, so a later run (beside a CPU hog, say) cannot replace it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import Enum
from functools import cache
from typing import Any

from images import HARNESS_DIR
from tvmrepro.cases import Case
from tvmrepro.environments import Environment
from tvmrepro.results import Status

# What a cache hit may be: the statuses a case decides by itself.
CACHED_STATUSES = (Status.OK, Status.ERROR, Status.CRASH, Status.OOM, Status.INCOMPATIBLE)
# Signatures of those that load can still make (the host's OOM killer's SIGKILL): not served.
UNCACHED_SIGNATURES = ("crash: SIGKILL",)


class RunState(str, Enum):
    """Where a run is in its life."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"


class JobStatus(str, Enum):
    """A job's status, following from its runs."""

    QUEUED = "queued"  # no run has started
    RUNNING = "running"
    DONE = "done"  # every run has a result
    FAILED = "failed"  # every run has a result, and each is an infra_error

    @property
    def finished(self) -> bool:
        """Whether every run has its result (done or failed): a client stops waiting."""
        return self in (JobStatus.DONE, JobStatus.FAILED)


class Action(str, Enum):
    """What a worker should do with a delivered run."""

    RUN = "run"
    SKIP = "skip"  # done already, or held by a live claimer: acknowledge and drop
    EXHAUSTED = "exhausted"  # delivered too often: store infra_error instead of running


@dataclass(frozen=True)
class Claim:
    """A worker's claim on a run, with what it needs to run it and its job's kind (what is
    done after it: tvmrepro.jobs.kinds)."""

    action: Action
    run_id: str
    job_id: str = ""
    kind: str = ""  # its job's; "" for a run that is skipped
    case: dict[str, Any] | None = None
    variant: str = ""
    environment: str = ""
    deliveries: int = 0


@cache
def harness_digest() -> str:
    """A hash of the harness's code: a changed harness makes earlier results stale."""
    digest = hashlib.sha256()
    for path in sorted(HARNESS_DIR.rglob("*.py")):
        digest.update(path.relative_to(HARNESS_DIR).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_key(case: Case, variant: str, env: Environment) -> str:
    """What makes two runs the same: the case as run (title aside), the variant, the pins;
    the case's files by name, digest and size (a case without files keeps the key it had, as
    one that asks no layer verdict does)."""
    spec = case.variant(variant)
    unasked = (set() if case.files else {"files"}) | (set() if case.layer else {"layer"})
    excluded: dict[str, Any] = {name: True for name in {"title", "variants"} | unasked}
    if not case.inputs.files:  # inputs from the case's files: a key only where there are some
        excluded["inputs"] = {"files"}
    material = {
        "case": case.model_dump(mode="json", exclude=excluded),
        "variant": spec.model_dump(mode="json") if spec else variant,
        "environment": env.id, "packages": env.packages, "target": env.target,
        "harness": harness_digest(),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()
