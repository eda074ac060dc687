"""What the HTTP API takes: a job request, one model per kind, told apart by `kind`.

POST /api/v1/jobs reads `JobRequest`, a union discriminated on `kind` (a body without one
asks for a run). Each member forbids fields it does not take, so a field of another kind is
refused by the union itself; `parse_request` turns what pydantic says into a BadInput that
names the field, and the kinds that do take it. The OpenAPI document shows the union.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
)
from pydantic_core import ErrorDetails

from tvmrepro.cases import error_input
from tvmrepro.errors import BadInput, did_you_mean

# The case is validated by tvmrepro.cases (errors name case.<field>); its schema is Case's.
CaseJson = Annotated[dict[str, Any],
                     WithJsonSchema({"allOf": [{"$ref": "#/components/schemas/Case"}]})]
# How a bisection probes: every environment at once, or both ends then halves (the names,
# spelled here only: tvmrepro.jobs.bisect.logic.STRATEGIES, the CLI's --strategy).
Strategy = Literal["all", "binary"]
Environments = Annotated[list[str] | Literal["all"] | None, Field(
    description="environment ids, or 'all': every environment a live worker serves; left out, "
                "a run or triage takes the default (the newest release of each minor version, "
                "those a live worker serves), another kind 'all'")]
DEFAULT_KIND = "run"  # what a request without `kind` asks for (docs/contract.md)


class RequestBase(BaseModel):
    """What every job request may say, whatever its kind."""

    model_config = ConfigDict(extra="forbid", strict=True)  # "yes" is not a boolean here
    kind: str
    bypass_cache: bool = Field(default=False, description="run again even if a result exists")
    wait: bool = Field(default=False, description="queue runs for environments that no live "
                                                   "worker serves (else 409)")


class EnvironmentsRequest(RequestBase):
    """A request whose runs go to environments it names."""

    environments: Environments = None


class CaseRequest(EnvironmentsRequest):
    """A request about one case."""

    case: CaseJson = Field(description="the case")


class RunRequest(CaseRequest):
    """Run a case's variants in environments (docs/contract.md, "HTTP")."""

    kind: Literal["run"] = "run"
    variants: list[str] | None = Field(default=None, description="variant names (default all)")


class BisectRequest(CaseRequest):
    """Find the releases between which a case's behaviour changed (docs/contract.md, "Bisection")."""

    kind: Literal["bisect"]
    variant: str | None = Field(default=None, description="the variant (may be left out when "
                                "the case has one variant or is a script)")
    oracle: str | None = Field(default=None, description="failure (default), status:<s>, "
                               "signature, signature:<text>, regex:<pattern> or output")
    reference: str | None = Field(default=None, description="the environment whose run the "
                                  "signature and output oracles compare with (default: the "
                                  "newest that fails; for output, the newest that ran)")
    repeat: int = Field(default=1, ge=1, le=10, description="runs per environment")
    strategy: Strategy = Field(default="all", description="probe every environment at once "
                               "(all), or both ends then halves (binary)")


class ReduceRequest(CaseRequest):
    """Shrink a failing case while it fails the same way (docs/contract.md, "Reduction")."""

    kind: Literal["reduce"]
    variant: str | None = Field(default=None, description="the variant (may be left out when "
                                "the case has one variant or is a script)")
    oracle: str | None = Field(default=None, description="as a bisection's, but output "
                               "(default signature)")
    budget_s: int | None = Field(default=None, description="the time budget in seconds "
                                 "(default 900, 10 to 1800); when spent, the best case so far")


class ExtractRequest(CaseRequest):
    """Cut a script's failing step out as a case of its own (docs/contract.md, "Reduction")."""

    kind: Literal["extract"]
    at: str | None = Field(default=None, description="where the case starts: chain (default: "
                           "the module its failing step's passes began with), failing (the "
                           "failing step), inner (the innermost pass that raised)")


class TriageRequest(EnvironmentsRequest):
    """Run every report of an issue tracker and group them by bug (docs/contract.md, "Tracker")."""

    kind: Literal["triage"]
    # Items checked one by one (tvmrepro.jobs.tracker.triage_job), so that an error names
    # the report.
    reports: list[Any] = Field(description="the reports, each an issue's Markdown body, an "
                               "issue as `gh issue list --json number,title,state,body,url` "
                               "gives it, or a report as `tvmrepro import --json` prints "
                               "it; at most TVMREPRO_MAX_TRIAGE_REPORTS (default 200)")


class SweepRequest(RequestBase):
    """Run every stored case on a new environment and the one before it (docs/contract.md)."""

    kind: Literal["sweep"]
    env: str = Field(description="the new environment")
    since: str | None = Field(default=None, description="the environment to compare with "
                              "(default: the release of the same device before env)")
    offset: int = Field(default=0, ge=0, le=10 ** 9, description="the first stored case it "
                        "runs (oldest first): a sweep runs at most TVMREPRO_MAX_SWEEP_CASES "
                        "(default 200), so a store holding more is swept in parts")


MEMBERS: tuple[type[RequestBase], ...] = (RunRequest, BisectRequest, ReduceRequest,
                                          ExtractRequest, TriageRequest, SweepRequest)


def with_kind(body: Any) -> Any:
    """The body, asking for a run when it names no kind."""
    if isinstance(body, dict) and "kind" not in body:
        return {**body, "kind": DEFAULT_KIND}
    return body


JobRequest = Annotated[
    RunRequest | BisectRequest | ReduceRequest | ExtractRequest | TriageRequest | SweepRequest,
    Field(discriminator="kind"), BeforeValidator(with_kind)]
READER: TypeAdapter[JobRequest] = TypeAdapter(JobRequest)


def kind_of(member: type[RequestBase]) -> str:
    """The kind a member of the union is for."""
    return str(get_args(member.model_fields["kind"].annotation)[0])


MEMBER_OF = {kind_of(member): member for member in MEMBERS}


def refusal(error: ErrorDetails, kind: str) -> BadInput | None:
    """A field the kind does not take or needs, said in the union's words (None: another
    error)."""
    loc = error["loc"]
    if len(loc) != 2 or loc[0] != kind or not isinstance(loc[1], str):
        return None
    field, fields = loc[1], MEMBER_OF[kind].model_fields
    if error["type"] == "missing":
        return BadInput(field, f"a {kind} job needs it")
    if error["type"] != "extra_forbidden":
        return None
    takers = [repr(other) for other, member in MEMBER_OF.items() if field in member.model_fields]
    listed = ", ".join(takers[:-1]) + " and " + takers[-1] if len(takers) > 1 else "".join(takers)
    which = f" (only {listed} jobs do)" if takers else ""
    return BadInput(field, f"a {kind} job does not take it{which}"
                           f"{did_you_mean(field, fields)}")


def parse_request(body: Any) -> JobRequest:
    """Validate a decoded body as a job request; BadInput names the first wrong field."""
    if not isinstance(body, dict):
        raise BadInput("body", f"must be a JSON object, got {type(body).__name__}")
    try:
        return READER.validate_python(body)
    except ValidationError as exc:
        kind = with_kind(body)["kind"]
        error = exc.errors()[0]
        if error["type"] == "union_tag_invalid":  # the tag names no member (or is no string)
            raise BadInput("kind", f"must be one of {', '.join(map(repr, MEMBER_OF))}, got "
                                   f"{kind!r:.80}") from exc
        # The member's tag leads every location (e.g. ('run', 'environments', 0)).
        raise (refusal(error, kind)
               or error_input({**error, "loc": error["loc"][1:]}, "body")) from exc


# The header of a DELETE /api/v1/jobs/<id> that holds the job's cancel_token.
CANCEL_HEADER = "X-Cancel-Token"
