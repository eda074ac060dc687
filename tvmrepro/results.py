"""The result of one run (one case variant in one environment), as docs/contract.md shapes it."""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, Field


class Status(str, Enum):
    """How a run ended."""

    OK = "ok"
    ERROR = "error"  # TVM or Python raised
    CRASH = "crash"  # killed by a signal
    TIMEOUT = "timeout"
    OOM = "oom"
    INCOMPATIBLE = "incompatible"  # not expressible on this TVM, even after porting
    INFRA_ERROR = "infra_error"  # the service failed, not the case


# The statuses that say the case failed (a status string is one of them as well: `"error" in
# FAILING`), and those that say nothing of the case: it could not be measured there.
FAILING = frozenset({Status.ERROR, Status.CRASH, Status.TIMEOUT, Status.OOM})
NOT_MEASURED = frozenset({Status.INCOMPATIBLE, Status.INFRA_ERROR})


class FunctionInfo(BaseModel):
    """One function of the module after a pass."""

    name: str
    kind: str
    attrs: dict[str, Any] = Field(default_factory=dict)


class PassRecord(BaseModel):
    """A top-level pass that completed: its time, the function table and the IR after it."""

    index: int
    name: str
    seconds: float
    functions: list[FunctionInfo]
    ir: str


class Log(BaseModel):
    """What the run printed, each stream capped."""

    stdout: str = ""
    stderr: str = ""
    truncated: bool = False


class LayerPath(BaseModel):
    """One path of a layer verdict: the script run one way, and how it ended."""

    path: str = Field(description="default (the script as written), unoptimised (the imported "
                                  "module with its lowering alone), cut:<k>:<Pass> (the first k "
                                  "optimisations kept, the last of them named) or reference")
    status: str | None = None
    stage: str | None = None
    outputs: Literal["same", "noise", "differs"] | None = Field(
        default=None, description="against the reference on the path's own inputs (null: "
                                  "no outputs, or no reference)")
    failed_in: str | None = Field(
        default=None, description="frontend, pass:<Name>, codegen, run, or check (the script's "
                                  "own check after the model ran)")
    signature: str | None = None
    kind: str | None = Field(default=None, description="the reference's framework")
    seconds: float | None = None


class LayerVerdict(BaseModel):
    """Which layer first shows a script's failure or wrong output (docs/layers.md)."""

    layer: str | None = Field(description="import, pass:<Name>, codegen or runtime; null: "
                                          "nothing to place, or the paths could not tell")
    reason: str
    passes: list[str] = Field(default_factory=list,
                              description="the optimisations the script ran, in order: the cuts")
    evidence: list[LayerPath] = Field(default_factory=list)
    runs: int = Field(default=0, description="sandboxed runs the verdict took beyond the run")
    seconds: float = Field(default=0.0, description="their wall time")


class Result(BaseModel):
    """One run's outcome."""

    environment: str
    variant: str
    status: Status
    stage: str | None = None
    pass_path: list[str] | None = None  # the passes running when it failed, outermost first
    error_type: str | None = None
    message: str | None = None
    signature: str | None = None
    signature_frame: str | None = None  # the TVM C++ function that raised, normalised
    signature_message: str | None = None  # the message, normalised
    signal: str | None = None
    # A crash's innermost native TVM frames (innermost first), from the backtrace TVM's signal
    # handler printed; None when its log holds none.
    native_frames: list[str] | None = None
    # Why this failure is its environment's, not the report's: the wheel fails its canary the
    # same way (worker.environments.health). Oracles skip such a run; triage does not count it.
    environment_defect: str | None = None
    rewrites: list[str] = Field(default_factory=list)
    # The case as a plain script for this release (ported), runnable without tvm-repro.
    reproducer: str | None = None
    passes: list[PassRecord] = Field(default_factory=list)
    outputs: Any = None
    # What the reference computed on the same inputs, summarized: the case's NumPy expression,
    # or (script mode) the framework of a model imported with TVM's frontends, which
    # `reference_kind` names ("onnxruntime 1.31.1", "torch 2.13.0+cpu eager"; None: NumPy).
    reference_outputs: Any = None
    reference_kind: str | None = None
    reference_note: str | None = None  # how it was run, where not as given (a lowered IR version)
    reference_error: str | None = None  # why the framework gave no reference_outputs
    tvm: dict[str, Any] | None = None
    # The frontend packages the run had (torch, onnx, onnxruntime: their pins), where the case
    # imports them and so ran in its environment's frontend flavour; None for a plain run.
    frontends: dict[str, str] | None = None
    # Where the failure first shows, for a case that asked (`layer`): its paths and verdict.
    layer: LayerVerdict | None = None
    seconds: dict[str, float] = Field(default_factory=dict)
    isolation: dict[str, Any] = Field(default_factory=dict)
    log: Log = Field(default_factory=Log)

    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON data."""
        return self.model_dump(mode="json")
