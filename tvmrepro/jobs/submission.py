"""What a kind's `start` has at hand on the API's side: the store, the catalog, the limits,
how to publish runs, and the checks every kind makes of a request (its case, its
environments, whether a live worker serves them)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from tvmrepro.api.requests import CaseRequest, EnvironmentsRequest
from tvmrepro.attachments import contents_of, without_contents
from tvmrepro.cases import Case, parse_case
from tvmrepro.choice import NAMED_WHY, SERVED_WHY, Choice, default_choice
from tvmrepro.environments import Catalog, Environment
from tvmrepro.errors import BadInput, NotServed
from tvmrepro.jobs.fanout import PlannedRun
from tvmrepro.jobs.kind import Publish
from tvmrepro.lifecycle import RunState, cache_key
from tvmrepro.settings import Settings
from tvmrepro.store import Store
from tvmrepro.store.rows import RunRow


def prefixed(exc: BadInput, prefix: str) -> BadInput:
    """`exc` with its field under `prefix` (parse_case names the whole case "case" already)."""
    if not exc.field or exc.field == prefix:
        return BadInput(prefix, exc.problem)
    return BadInput(f"{prefix}.{exc.field}", exc.problem)


@dataclass(frozen=True)
class Submission:
    """The API's side of one submission."""

    settings: Settings
    store: Store
    catalog: Catalog
    publish: Publish
    now: float

    @property
    def cap(self) -> int:
        """How many runs the queue holds per environment."""
        return self.settings.max_queued_runs

    def served(self) -> dict[str, int]:
        """Environment id -> its live workers."""
        return self.store.live_environments(self.settings.worker_stale_s)

    def environments(self, chosen: list[str] | str | None) -> list[Environment]:
        """The environments named, or for "all" (and left out) every one a live worker
        serves."""
        if chosen is None or chosen == "all":
            served = self.served()
            envs = [env for env in self.catalog.environments if env.id in served]
            if not envs:
                raise BadInput("environments", "'all' means every environment a live worker "
                                               "serves, and no worker is live; name them")
            return envs
        if not chosen:
            raise BadInput("environments", "name at least one environment")
        return self.catalog.select(list(chosen))

    def choose(self, request: EnvironmentsRequest) -> Choice:
        """A run's or triage's environments and why: those named, every served one ("all"),
        or, left out, the default set (those of it a live worker serves, unless it waits)."""
        if request.environments is None:
            return default_choice(self.catalog, None if request.wait else self.served())
        why = SERVED_WHY if request.environments == "all" else NAMED_WHY
        return Choice(self.environments(request.environments), why)

    def check_served(self, envs: list[Environment], request: EnvironmentsRequest) -> None:
        """409 for environments no live worker serves, unless the job asked to wait for one."""
        if request.wait or not isinstance(request.environments, list):  # served ones already
            return
        served = self.served()
        unserved = [env.id for env in envs if env.id not in served]
        if unserved:
            index = list(request.environments).index(unserved[0])
            raise NotServed(unserved, f"environments[{index}]")

    def case(self, request: CaseRequest) -> Case:
        """The request's case, checked, its files stored (as `stored_files`); BadInput names
        its field under "case"."""
        try:
            case = parse_case(request.case)
        except BadInput as exc:
            raise prefixed(exc, "case") from exc
        return self.stored_files(case, "case")

    def stored_files(self, case: Case, field: str) -> Case:
        """The case as the job keeps it: each file's content in the store (once by its
        SHA-256), the case naming it by digest. A file must come with its content: naming a
        stored digest alone would let anyone who saw it on a job run it (BadInput under
        `field`)."""
        for index, entry in enumerate(case.files):
            if entry.content is None:
                raise BadInput(f"{field}.files[{index}].content",
                               f"missing: give {entry.name!r} itself (base64), not only its "
                               "sha256")
        self.store.put_blobs(contents_of(case))
        return without_contents(case)

    def runs(self, job_id: str, case: Case, planned: list[PlannedRun],
             bypass_cache: bool) -> list[RunRow]:
        """A run row for each planned run, done at once where the cache has its result."""
        keys = [cache_key(case, run.variant, run.env) for run in planned]
        hits = {} if bypass_cache else self.store.cached_results(keys)
        runs: list[RunRow] = []
        for run, key in zip(planned, keys, strict=True):
            hit = hits.get(key)
            runs.append(RunRow(
                id=uuid.uuid4().hex, job_id=job_id, ordinal=len(runs), variant=run.variant,
                environment=run.env.id, state=RunState.DONE if hit else RunState.QUEUED,
                cache_key=key, cached=hit is not None, result_id=hit, timeout_s=case.timeout_s,
                created_at=self.now, published_at=None,  # held until released
                finished_at=self.now if hit else None))
        return runs

    def published(self, runs: list[RunRow]) -> None:
        """Release the runs that wait for a worker (those from the cache are done): stored
        held, each goes to its queue as its lane has room (tvmrepro.jobs.release)."""
        self.publish([run for run in runs if run.state == RunState.QUEUED])
