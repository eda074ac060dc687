"""What the HTTP API answers: pydantic models (the OpenAPI document is made from them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tvmrepro.api.issues import KnownIssue
from tvmrepro.api.narrowed import Extraction, Reduction
from tvmrepro.api.requests import Strategy
from tvmrepro.api.traced import SymbolTrace
from tvmrepro.jobs.tracker.sweep import SweepJobAnswer
from tvmrepro.jobs.tracker.triage_job import TriageJobAnswer
from tvmrepro.lifecycle import JobStatus, RunState
from tvmrepro.results import FunctionInfo


class CellRef(BaseModel):
    """One cell of the matrix: a variant in an environment."""

    variant: str
    environment: str


class OutputError(BaseModel):
    """How far a cell's outputs are from those it was compared with."""

    against: CellRef
    reason: str = Field(description="values, non-finite (only NaN or infinities disagree), "
                                    "shape, dtype or structure; values for noise")
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mismatches: int = Field(default=0, description="sampled elements beyond the tolerance")


class Cell(CellRef):
    """What happened in one cell."""

    run: str
    state: RunState
    status: str | None = None
    stage: str | None = None
    signature: str | None = None
    cached: bool = False
    outputs: Literal["same", "noise", "differs"] | None = Field(
        default=None, description="the outputs against the row's majority, the first "
                                  "variant's in the same environment and the run's reference "
                                  "(noise: within tolerance, not bitwise; null: no outputs)")
    output_error: OutputError | None = None


class SignatureGroup(BaseModel):
    """Cells that failed the same way: one bug, many places."""

    signature: str
    status: str
    cells: list[CellRef]


class PassStep(BaseModel):
    """The pass at one index of the two cells compared (None: that cell has no such pass)."""

    index: int
    a: str | None
    b: str | None


class Comparison(BaseModel):
    """Where two cells' IR first differs, with a unified diff of the IR after that pass."""

    a: CellRef
    b: CellRef
    identical: bool = Field(description="the IR agrees after every pass both ran")
    first_differing_pass: PassStep | None = None
    diff: str = ""
    truncated: bool = False


class Matrix(BaseModel):
    """Variants (rows) by environments (columns)."""

    variants: list[str]
    environments: list[str]
    cells: list[list[Cell]] = Field(description="cells[i][j]: variants[i] in environments[j]")
    groups: list[SignatureGroup]
    comparisons: list[Comparison] = Field(
        description="in each environment, the first variant against every other variant; "
                    "computed once when the job's last run is stored (empty until then)")


class AttachedFile(BaseModel):
    """A file the job's case carries beside its code (its content is kept once, by digest, and
    not served)."""

    name: str
    sha256: str
    size: int = Field(description="bytes")


class RunView(BaseModel):
    """One run of a job; `result` is its result without log and IR (see /log and /ir)."""

    id: str
    variant: str
    environment: str
    state: RunState
    cached: bool = Field(description="served from an earlier identical run")
    cached_from: str | None = None
    deliveries: int
    host: str | None = Field(default=None, description="the host whose worker took the run "
                             "last (several hosts may serve one environment)")
    finished_at: str | None = Field(default=None, description="when its result was stored")
    result: dict[str, Any] | None = None


class BisectProbe(BaseModel):
    """Every run (repeat) of one environment of a bisection, and its verdict."""

    environment: str
    verdict: Literal["good", "bad", "skip", "flaky"]
    status: str | None
    stage: str | None
    signature: str | None
    runs: list[str] = Field(description="the run ids of its repeats")
    statuses: list[str | None] | None = Field(default=None,
                                              description="each repeat's status (repeat > 1)")
    environment_defect: str | None = Field(
        default=None, description="why the probe is skipped: its environment's wheel fails its "
        "canary the way the run failed (a broken release, not the report)")


class CommitWindow(BaseModel):
    """The commits between the two releases' builds of a transition."""

    from_commit: str | None = Field(description="the earlier release's commit")
    to_commit: str | None = Field(description="the later release's commit")
    commits: int = Field(description="reachable from to_commit and not from from_commit")
    open_ended: bool = Field(description="a commit is not in the history: the window runs to "
                                         "the history's end (`missing` says what is missing)")
    compare_url: str | None = None
    picked: int = Field(default=0, description="of them, changes the earlier release already "
                                               "has as cherry-picks (never suspects)")
    history: str | None = None
    history_newest: str | None = Field(default=None, description="the date of the history's "
                                       "newest commit: how fresh it is")
    missing: str | None = None


class Suspect(BaseModel):
    """A commit of the window, ranked by the transition's evidence."""

    sha: str
    pr: int | None = None
    subject: str
    url: str
    date: str | None = None
    score: float = Field(description="the share of the evidence it accounts for (README)")
    reasons: list[str]


class BisectTransition(BaseModel):
    """A change of verdict between two neighbouring decided probes."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)
    before: str
    after: str
    from_: Literal["good", "bad"] = Field(alias="from")
    to: Literal["good", "bad"]
    candidates: list[str] = Field(description="environments between them that were skipped, "
                                              "flaky or not probed: the change may lie there")
    not_in_range: list[str] = Field(
        default_factory=list, description="releases between them that the range left out "
        "(no worker served them): never probed, the change may lie there too")
    # With a history only (docs/contract.md, "Commit windows and suspects"); absent otherwise.
    window: CommitWindow | None = Field(default=None, exclude_if=lambda v: v is None)
    suspects: list[Suspect] | None = Field(default=None, exclude_if=lambda v: v is None)


class BisectProgress(BaseModel):
    """Probes done of the probes planned (the binary strategy plans as it goes)."""

    done: int
    total: int


class Bisection(BaseModel):
    """A bisect job's answer (docs/contract.md, "Bisection"); computed when a probe finishes."""

    oracle: str
    environments: list[str] = Field(description="the range, in version order")
    variant: str
    probes: list[BisectProbe]
    transitions: list[BisectTransition]
    verdict: Literal["unchanged", "changed", "non_monotonic", "inconclusive"]
    first_changed: str | None = None
    last_before_change: str | None = None
    reference: str | None = Field(default=None,
                                  description="the reference environment (signature, output)")
    reference_signature: str | None = None
    strategy: Strategy
    repeat: int
    not_in_range: list[str] = Field(
        default_factory=list, description="releases of the device between the range's ends "
        "that the range left out (no worker served them): the answer says nothing of them")
    progress: BisectProgress
    finished: bool = Field(description="no probe runs or remains to be planned")
    oracle_error: str | None = Field(
        default=None, description="why the oracle judged nothing (a regex pattern that ran "
                                  "past its time budget on a run's text): every probe is skip")


class JobView(BaseModel):
    """GET /api/v1/jobs/<id> (and the answer to POST)."""

    id: str
    kind: str
    title: str
    status: JobStatus
    created_at: str
    environments: list[str]
    environments_why: str | None = Field(
        default=None, description="why these environments: the default (the newest release of "
        "each minor version), named by the request, or every one a live worker serves")
    not_probed: list[str] = Field(
        default_factory=list, description="the releases of the environments' device that the "
        "job leaves out (its answer says nothing of them)")
    variants: list[str]
    bypass_cache: bool
    cached_runs: int
    runs: list[RunView]
    matrix: Matrix
    case: dict[str, Any]
    files: list[AttachedFile] = Field(
        default_factory=list, description="the files the case carries (its `files`), written "
                                          "read-only into each run's work directory")
    bisect: Bisection | None = Field(default=None, description="a bisect job's answer so far")
    reduce: Reduction | None = Field(default=None, description="a reduce job's answer so far")
    extract: Extraction | None = Field(default=None, description="an extract job's answer")
    triage: TriageJobAnswer | None = Field(
        default=None, description="a triage job's answer over the reports done so far")
    sweep: SweepJobAnswer | None = Field(
        default=None, description="a sweep job's answer over the cases done so far")
    symbols: list[SymbolTrace] = Field(
        default_factory=list, description="every global function an error names, followed "
                                          "through the passes of each variant and environment")
    likely_duplicates: list[KnownIssue] = Field(
        default_factory=list, description="issues that a triage saw fail with a signature of "
                                          "this job's failures: each a likely duplicate")
    cancel_token: str | None = Field(
        default=None, description="in the answer to POST only: the token that DELETE "
                                  "/api/v1/jobs/<id> needs (header X-Cancel-Token) to cancel "
                                  "the job; the service keeps only its hash")


class JobSummary(BaseModel):
    """One line of the job list."""

    id: str
    kind: str
    title: str
    created_at: str
    runs: int
    done: int = Field(description="runs with a result")


class JobList(BaseModel):
    """GET /api/v1/jobs: a page of jobs, newest first."""

    jobs: list[JobSummary]
    total: int
    next_offset: int | None = Field(description="the offset of the next page (null: last page)")


class Cancelled(BaseModel):
    """DELETE /api/v1/jobs/<id>: what was cancelled."""

    id: str
    cancelled_runs: int = Field(description="runs that had no result and now end as cancelled")


class LogView(BaseModel):
    """A run's output, each stream capped."""

    stdout: str
    stderr: str
    truncated: bool


class PassIR(BaseModel):
    """One pass of a run: its function table and the TVMScript after it."""

    index: int
    name: str
    seconds: float
    functions: list[FunctionInfo]
    ir: str


class IRView(BaseModel):
    """A run's per-pass IR."""

    run: str
    passes: list[PassIR]


class EnvironmentView(BaseModel):
    """One pinned environment, and who serves it."""

    id: str
    tvm: str
    device: str
    image: str
    packages: dict[str, str]
    workers: int = Field(description="live workers serving it (consuming its queue, or "
                                     "building its image first)")
    state: Literal["served", "building", "unserved"] = Field(
        default="unserved", description="served: a live worker runs its jobs; building: a live "
        "worker is building its image, and its jobs wait for it; unserved: no live worker")
    step: str | None = Field(default=None, description="the image build's current step "
                                                       "(while building)")
    waiting: int = Field(description="runs waiting for a worker")
    fingerprint: dict[str, Any] | None = Field(
        default=None, description="what a worker found in it (TVM version, libinfo)")
    default: bool = Field(default=False, description="one of the default set: what a run or "
                          "triage that names no environments takes (`default_why`)")


class EnvironmentList(BaseModel):
    """GET /api/v1/environments."""

    environments: list[EnvironmentView]
    default_why: str = Field(default="", description="what the default set is")


class Health(BaseModel):
    """GET /healthz: the store and the broker answer."""

    status: Literal["ok", "unavailable"]
    store: str
    broker: str
    waiting_runs: int | None = None
    unserved: list[str] = Field(default_factory=list,
                                description="environments with waiting runs and no live worker")


class ErrorDetail(BaseModel):
    """What was wrong; `field` names the part of the request (e.g. case.variants[0].passes[1])."""

    status: int
    message: str
    field: str | None = None


class ErrorBody(BaseModel):
    """Every 4xx and 5xx answer."""

    error: ErrorDetail
