"""What a narrowing found: the answers of reduce and extract jobs as their JSON shows them
(docs/contract.md, "Reduction"). Wire models only: no logic, so that the store and the API's
models may import them without the narrowing's checks (bisection, oracles) coming along.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tvmrepro.cases import Case

NarrowState = Literal["queued", "running", "done", "failed"]


class NarrowProgress(BaseModel):
    """Where a narrowing is: its phase, the last thing it did, and the sizes so far."""

    phase: str
    what: str = ""
    steps: int = Field(default=0, description="edits kept so far")
    runs: int = Field(default=0, description="candidate runs so far")
    passes: int | None = None
    lines: int | None = Field(default=None, description="module lines of the best case so far")
    seconds: float = 0.0


class Size(BaseModel):
    """A case's size: its passes and its module's lines (blank lines not counted)."""

    passes: int
    lines: int


class Reduction(BaseModel):
    """A reduce job's answer so far (docs/contract.md, "Reduction"); the final one when `state` is
    done."""

    model_config = ConfigDict(extra="allow")  # the reducer's own numbers (checks, ...)
    state: NarrowState
    oracle: str
    environment: str
    variant: str
    budget_s: int
    progress: NarrowProgress | None = None
    case: Case | None = Field(default=None, description="the reduced case (while "
                                        "running: the best case so far)")
    signature: str | None = Field(default=None, description="the signature the oracle keeps")
    before: Size | None = None
    after: Size | None = None
    steps: int = 0
    runs: int = 0
    finished: bool | None = Field(default=None, description="the reducer tried every edit "
                                  "(false: its time budget ended it with the best case so far)")
    log: list[str] = Field(default_factory=list)
    error: str | None = Field(default=None, description="why there is no reduced case")


class Reduced(BaseModel):
    """What a reduction found: the reduced case and its numbers (a reduce job's answer once
    it is done; while it runs, the best case so far without `finished` and `log`). As a
    service's job gives it, it carries the job's own fields too (budget_s, error, job)."""

    model_config = ConfigDict(extra="allow")
    case: Case
    oracle: str
    signature: str | None
    environment: str
    variant: str
    before: Size
    after: Size
    steps: int
    runs: int
    checks: int
    finished: bool
    seconds: float
    log: list[str]


class CaseRun(BaseModel):
    """How an extracted case ran, as it is."""

    status: str
    stage: str | None = None
    signature: str | None = None


class Extracted(BaseModel):
    """What an extraction found (an extract job's answer once it is done): the case and
    whether it reproduces the script. As a service's job gives it, it carries the job's own
    fields too (at, error, job)."""

    model_config = ConfigDict(extra="allow")
    case: Case
    signature: str | None
    stage: str | None
    environment: str
    reproduces: bool
    case_run: CaseRun
    notes: list[str]
    module_from: str


class Extraction(BaseModel):
    """An extract job's answer (docs/contract.md, "Reduction")."""

    model_config = ConfigDict(extra="allow")
    state: NarrowState
    environment: str
    at: str
    progress: NarrowProgress | None = None
    case: Case | None = Field(default=None, description="the module-mode case")
    signature: str | None = Field(default=None, description="the script's signature")
    stage: str | None = None
    reproduces: bool | None = Field(default=None, description="the case, run as it is, gives "
                                    "the script's signature")
    case_run: CaseRun | None = None
    notes: list[str] = Field(default_factory=list)
    module_from: str | None = Field(default=None, description="where the case's module came "
                                    "from: the failing release's printer, another release's, "
                                    "tvm.ir.save_json, or the script's own class")
    error: str | None = Field(default=None, description="why the script cannot be extracted")
