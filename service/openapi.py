"""The OpenAPI document, made from the routes below and the pydantic models they name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema

from service.web import PassNames
from tvmrepro.api.bot import BotActionList, BotSweep, WebhookTaken
from tvmrepro.api.requests import CANCEL_HEADER, JobRequest
from tvmrepro.api.views import (
    Cancelled,
    Comparison,
    EnvironmentList,
    ErrorBody,
    Health,
    IRView,
    JobList,
    JobView,
    LogView,
)
from tvmrepro.cases import Case
from tvmrepro.jobs.bisect.given import GivenWindows
from tvmrepro.results import Result
from tvmrepro.settings import DEFAULT_PARTS_PAGE, MAX_PARTS_PAGE

OPENAPI_VERSION = "3.1.0"
REF = "#/components/schemas/{model}"


@dataclass(frozen=True)
class Route:
    """One operation: method, path (OpenAPI style), models in and out."""

    method: str
    path: str
    summary: str
    responses: dict[int, type[BaseModel]]
    request: str | None = None  # the name of a schema of UNIONS (the request body)
    query: dict[str, str] = field(default_factory=dict)
    text: str | None = None  # a 200 that is text of this media type, not a model
    optional: tuple[str, ...] = ()  # query parameters that may be left out
    headers: dict[str, str] = field(default_factory=dict)  # required request headers


# Request bodies that are a union of models, each shown as the schema of that name.
UNIONS: dict[str, Any] = {"JobRequest": JobRequest, "GivenWindows": GivenWindows}
_JOB = "/api/v1/jobs/{job_id}"
_RUN = _JOB + "/runs/{run_id}"
ROUTES = (
    Route("post", "/api/v1/jobs", "Submit a job: run, bisect, reduce or extract a case "
                                  "(the maintainer's with `Authorization: Bearer TOKEN`; 429: "
                                  "the queue is full, or the submitter's budget is spent)",
          request="JobRequest",
          responses={202: JobView, 400: ErrorBody, 403: ErrorBody, 409: ErrorBody,
                     413: ErrorBody, 429: ErrorBody}),
    Route("get", "/api/v1/jobs", "Jobs, newest first, a page at a time",
          query={"limit": "jobs per page (1-200, default 20)", "offset": "jobs to skip"},
          optional=("limit", "offset"),
          responses={200: JobList, 400: ErrorBody}),
    Route("delete", _JOB, "Cancel the runs of a job that have no result yet (its submitter: "
                          f"the header {CANCEL_HEADER} holds the cancel_token of the POST's answer)",
          headers={CANCEL_HEADER: "the job's cancel token, as its submission answered"},
          responses={200: Cancelled, 403: ErrorBody, 404: ErrorBody}),
    Route("get", _JOB, "A job: status, runs and the variant x environment matrix",
          query={"offset": "a triage's or sweep's first report or case listed (default 0)",
                 "limit": f"how many it lists (1-{MAX_PARTS_PAGE}, default "
                          f"{DEFAULT_PARTS_PAGE})"},
          optional=("offset", "limit"),
          responses={200: JobView, 400: ErrorBody, 404: ErrorBody}),
    Route("get", _RUN, "One run's full result (log and per-pass IR included)",
          responses={200: Result, 404: ErrorBody}),
    Route("get", _RUN + "/log", "One run's stdout and stderr",
          responses={200: LogView, 404: ErrorBody}),
    Route("get", _RUN + "/ir", "One run's TVMScript after each pass",
          responses={200: IRView, 404: ErrorBody}),
    Route("get", _JOB + "/compare", "Where two runs' IR first differs, with a diff",
          query={"a": "a run of the job: its id, or VARIANT@ENVIRONMENT",
                 "b": "another run of the job, named the same ways"},
          responses={200: Comparison, 400: ErrorBody, 404: ErrorBody}),
    Route("put", _JOB + "/windows", "Keep the commit windows and suspects that a bisect job's "
                                    "submitter computed from a history of its own (the "
                                    f"header {CANCEL_HEADER} holds the job's cancel_token)",
          request="GivenWindows", headers={CANCEL_HEADER: "the job's cancel token"},
          responses={200: JobView, 400: ErrorBody, 403: ErrorBody, 404: ErrorBody}),
    Route("get", _JOB + "/report.md", "The job's report, ready to paste into a TVM issue",
          responses={404: ErrorBody}, text="text/markdown"),
    Route("get", "/api/v1/environments", "Pinned environments and the workers serving them",
          responses={200: EnvironmentList}),
    Route("get", "/api/v1/passes", "The pass names of each environment's TVM (for completion)",
          responses={200: PassNames}),
    Route("get", "/healthz", "Whether the store and the broker answer",
          responses={200: Health, 503: Health}),
    Route("get", "/metrics", "The service's gauges in Prometheus' text format, read from the "
          "store and the broker at each scrape (any Host; docs/deployment.md#metrics)",
          responses={}, text="text/plain"),
    Route("post", "/api/v1/github/webhook", "The GitHub App's webhook (docs/bot.md): a delivery "
          "signed with the App's secret, taken once (401: no or a wrong signature; 409: a "
          "replayed delivery id; 404: no secret set)",
          headers={"X-Hub-Signature-256": "sha256=HMAC of the body under the webhook secret",
                   "X-GitHub-Event": "the event's name", "X-GitHub-Delivery": "its id"},
          responses={202: WebhookTaken, 400: ErrorBody, 401: ErrorBody, 404: ErrorBody,
                     409: ErrorBody, 415: ErrorBody}),
    Route("get", "/api/v1/github/actions", "The GitHub bot's actions, newest first",
          query={"limit": "actions per page (1-500, default 50)", "offset": "actions to skip"},
          optional=("limit", "offset"), responses={200: BotActionList, 400: ErrorBody}),
    Route("post", "/api/v1/github/sweep", "Check every open issue the bot answers again (the "
          "maintainer's: `Authorization: Bearer TOKEN`)",
          responses={202: BotSweep, 403: ErrorBody, 429: ErrorBody}),
)


# What a path parameter may be, where it is more than its name says.
PATH_PARAMETERS = {"run_id": "the run's id, or VARIANT@ENVIRONMENT as the command line names it"}


def _parameters(route: Route) -> list[dict[str, Any]]:
    params = [{"name": name.strip("{}"), "in": "path", "required": True,
               **({"description": PATH_PARAMETERS[name.strip("{}")]}
                  if name.strip("{}") in PATH_PARAMETERS else {}),
               "schema": {"type": "string"}}
              for name in route.path.split("/") if name.startswith("{")]
    params += [{"name": name, "in": "query", "required": name not in route.optional,
                "description": text,
                "schema": {"type": "string"}} for name, text in route.query.items()]
    params += [{"name": name, "in": "header", "required": True, "description": text,
                "schema": {"type": "string"}} for name, text in route.headers.items()]
    return params


def _operation(route: Route) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": route.summary, "responses": {
        str(code): {"description": model.__doc__.splitlines()[0] if model.__doc__ else "",
                    "content": {"application/json": {
                        "schema": {"$ref": REF.format(model=model.__name__)}}}}
        for code, model in route.responses.items()}}
    if route.text is not None:
        op["responses"]["200"] = {"description": route.summary,
                                  "content": {route.text: {"schema": {"type": "string"}}}}
    if params := _parameters(route):
        op["parameters"] = params
    if route.request is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": {"$ref": REF.format(model=route.request)}}}}
    return op


def openapi_document() -> dict[str, Any]:
    """The whole OpenAPI 3.1 document of the service."""
    models: set[type[BaseModel]] = {Case}
    for route in ROUTES:
        models.update(route.responses.values())
    ordered = sorted(models, key=lambda m: m.__name__)
    # Answers as they are written, request bodies as they are read; one set of schemas.
    inputs: list[tuple[Any, Any, Any]] = [(m, "serialization", m.__pydantic_core_schema__)
                                          for m in ordered]
    inputs += [(name, "validation", TypeAdapter(union).core_schema)
               for name, union in UNIONS.items()]
    found, defined = GenerateJsonSchema(ref_template=REF).generate_definitions(inputs)
    schemas: dict[str, Any] = {str(name): schema for name, schema in defined.items()}
    schemas.update({name: found[(name, "validation")] for name in UNIONS})
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        paths.setdefault(route.path, {})[route.method] = _operation(route)
    return {"openapi": OPENAPI_VERSION,
            "info": {"title": "tvm-repro", "version": "1",
                     "description": "Run TVM bug reports on pinned TVM versions."},
            "paths": paths, "components": {"schemas": schemas}}
