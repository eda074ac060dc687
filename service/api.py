"""The HTTP views: thin, each validating, calling the JobService and answering JSON."""

from __future__ import annotations

import json
import logging
from typing import Any

from flask import Blueprint, Flask, Response, current_app, g, jsonify, request, url_for
from pydantic import BaseModel
from werkzeug.exceptions import (
    ClientDisconnected,
    HTTPException,
    RequestEntityTooLarge,
    RequestTimeout,
    UnsupportedMediaType,
)

from service.clients import admission_of
from service.hosts import AllowedHosts
from service.jobs import JobService
from service.metrics import METRICS_PATH
from service.openapi import openapi_document
from service.query_args import ascii_int, int_arg
from service.waiting import MAX_WAIT_S
from tvmrepro.api.pages import EVERY_PART, PageAsked
from tvmrepro.api.requests import CANCEL_HEADER
from tvmrepro.api.views import ErrorBody, ErrorDetail, IRView
from tvmrepro.errors import BadInput, Forbidden, NotServed
from tvmrepro.jobs.report import render_report
from tvmrepro.settings import DEFAULT_PARTS_PAGE, MAX_PARTS_PAGE
from tvmrepro.store import QueueFull

log = logging.getLogger(__name__)
RETRY_AFTER_S = 10  # what a 429 suggests
READ_CHUNK = 64 * 1024
DEFAULT_PAGE, MAX_PAGE = 20, 200  # jobs per page of GET /api/v1/jobs
MAX_JSON_DEPTH = 32  # a case nests about 5 levels; deeper is an attack on the parsers
# Every answer: no content sniffing, and nothing of an API answer may run or be framed.
SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff"}
API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'"

api = Blueprint("api", __name__, url_prefix="/api/v1")
health = Blueprint("health", __name__)


def service() -> JobService:
    """The JobService of the running app."""
    found: JobService = current_app.extensions["tvmrepro"]
    return found


def answer(model: BaseModel, status: int = 200) -> tuple[Response, int]:
    """A pydantic model as a JSON response."""
    return jsonify(model.model_dump(mode="json")), status


def error(status: int, message: str, field: str | None = None) -> tuple[Response, int]:
    """The one error shape: {"error": {"status", "message", "field"}}."""
    return answer(ErrorBody(error=ErrorDetail(status=status, message=message, field=field)),
                  status)


def _read_body() -> bytes:
    """The body, counted against the size cap whether or not it says its length (chunked)."""
    limit = current_app.config["MAX_CONTENT_LENGTH"]
    data = bytearray()
    try:
        while chunk := request.stream.read(min(READ_CHUNK, limit + 1 - len(data))):
            data += chunk
            if len(data) > limit:
                raise RequestEntityTooLarge()
    except (TimeoutError, ClientDisconnected) as exc:
        # The server's read timeout (service/server.py) ended a slow client's body; werkzeug
        # reports a failed read as a disconnect, the timeout its context.
        timeout = exc if isinstance(exc, TimeoutError) else exc.__context__
        if not isinstance(timeout, TimeoutError):
            raise
        raise RequestTimeout(f"the request's body did not arrive in time: {timeout}; the "
                             "connection is closed") from exc
    return bytes(data)


def _depth(value: Any) -> int:
    """How deeply lists and objects nest in a decoded JSON value (iteratively: no recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in
                         (item.values() if isinstance(item, dict) else item))
    return deepest


def _nul_at(value: Any) -> str | None:
    """Where a decoded JSON value first holds a NUL in a string or a key ("case.title",
    "reports[2]"), else None (iteratively: no recursion)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str) and "\x00" in item:
            return path or "body"
        if isinstance(item, list):
            stack.extend((child, f"{path}[{index}]") for index, child in enumerate(item))
        elif isinstance(item, dict):
            for key, child in item.items():
                where = f"{path}.{key}" if path else str(key)
                if "\x00" in key:  # named with its NUL written out, not echoed
                    return where.replace("\x00", "\\x00")
                stack.append((child, where))
    return None


def _json_body() -> Any:
    """The request's JSON: 415 unless it says application/json; any malformed body is a 400."""
    if request.mimetype != "application/json":
        # A form or text/plain POST is what a foreign web page can send without asking:
        # only JSON is taken, so a page a user visits cannot submit to their service.
        raise UnsupportedMediaType(f"send Content-Type: application/json, not "
                                   f"{request.mimetype or 'none'}")
    try:
        raw = _read_body()
        g.body_bytes = len(raw)  # what the submitter's budget counts at least
        data = json.loads(raw)
        # A lone surrogate ("\ud800") decodes, then fails every later encode: refuse it now.
        json.dumps(data, ensure_ascii=False).encode("utf-8", "strict")
    except UnicodeError as exc:
        raise BadInput("body", "not valid UTF-8 text (or a string holds a lone surrogate)") from exc
    except json.JSONDecodeError as exc:
        raise BadInput("body", f"not JSON: {exc.msg} at line {exc.lineno} "
                               f"column {exc.colno}") from exc
    except RecursionError as exc:
        raise BadInput("body", f"nested more than {MAX_JSON_DEPTH} levels deep") from exc
    except ValueError as exc:  # e.g. an integer with thousands of digits
        raise BadInput("body", f"not acceptable JSON: {exc}") from exc
    if _depth(data) > MAX_JSON_DEPTH:
        raise BadInput("body", f"nested more than {MAX_JSON_DEPTH} levels deep")
    # PostgreSQL's text and JSON cannot hold NUL, SQLite's can: refused here, for every store.
    if (where := _nul_at(data)) is not None:
        raise BadInput(where, "holds a NUL character (\\u0000): a job's text cannot contain "
                              "null bytes")
    return data


@api.post("/jobs")
def submit_job() -> tuple[Response, int]:
    """Submit a job; 202 with the job (runs served from the cache say so)."""
    body = _json_body()
    job = service().submit(body, admission_of(request, service().settings,
                                              g.get("body_bytes", 0)))
    response, status = answer(job, 202)
    response.headers["Location"] = url_for("api.get_job", job_id=job.id)
    return response, status


@api.get("/jobs")
def list_jobs() -> tuple[Response, int]:
    """Jobs, newest first, a page at a time (?limit=, ?offset=)."""
    limit = int_arg("limit", DEFAULT_PAGE, 1, MAX_PAGE)
    return answer(service().jobs(limit, int_arg("offset", 0, 0, 10 ** 9)))


@api.delete("/jobs/<job_id>")
def cancel_job(job_id: str) -> tuple[Response, int]:
    """Cancel the runs of a job that have no result yet."""
    cancelled = service().cancel(job_id, request.headers.get(CANCEL_HEADER))
    return answer(cancelled) if cancelled else error(404, f"no job {job_id!r}")


@api.put("/jobs/<job_id>/windows")
def give_windows(job_id: str) -> tuple[Response, int]:
    """A bisect job's commit windows and suspects, as its submitter's command line computed
    them from a history of its own (X-Cancel-Token: the job's); the job as it now reads."""
    found = service().give_windows(job_id, _json_body(), request.headers.get(CANCEL_HEADER))
    return answer(found) if found else error(404, f"no job {job_id!r}")


def _page_arg() -> PageAsked:
    """Which reports of a triage (or stored cases of a sweep) a read of the job shows."""
    return PageAsked(int_arg("offset", 0, 0, 10 ** 9),
                     int_arg("limit", DEFAULT_PARTS_PAGE, 1, MAX_PARTS_PAGE))


def _seconds_arg(name: str, high: float) -> float:
    text = request.args.get(name, "0")
    # As ASCII writes a number: `float` also reads "١", "1_0", "1e3" and "nan".
    whole, point, fraction = text.partition(".")
    seconds = -1.0
    if ascii_int(whole) is not None and (not point or ascii_int(fraction) is not None):
        seconds = float(text)
    if not 0 <= seconds <= high:
        raise BadInput(name, f"must be a number of seconds from 0 to {high:g}, got "
                             f"{text[:40]!r}")
    return seconds


@api.get("/jobs/<job_id>")
def get_job(job_id: str) -> tuple[Response, int]:
    """A job with its runs and matrix, with its ETag. With ?wait=S (seconds) and the ETag last
    seen in If-None-Match: answered once the job differs from that, or after S seconds (304 if
    it did not change); with &every=E, a change comes no sooner than E seconds after the
    request unless every run has ended (service/waiting.py)."""
    seen = request.headers.get("If-None-Match")
    job = service().waits.view_after(job_id, seen, int_arg("wait", 0, 0, MAX_WAIT_S),
                                     _seconds_arg("every", MAX_WAIT_S), _page_arg())
    if job is None:
        return error(404, f"no job {job_id!r}")
    if job.etag == seen:
        return Response(status=304, headers={"ETag": job.etag}), 304
    return Response(job.body, mimetype="application/json", headers={"ETag": job.etag}), 200


@api.get("/jobs/<job_id>/report.md")
def get_report(job_id: str) -> Response | tuple[Response, int]:
    """The job's Markdown report, ready to paste into a TVM issue."""
    job = service().job(job_id, EVERY_PART)  # pasted whole (at most a triage's cap)
    if job is None:
        return error(404, f"no job {job_id!r}")
    return Response(render_report(job, service().catalog), mimetype="text/markdown")


def _result_id(job_id: str, run_id: str) -> str | None:
    return service().result_id(job_id, run_id)


@api.get("/jobs/<job_id>/runs/<run_id>")
def get_run(job_id: str, run_id: str) -> tuple[Response, int]:
    """One run's full result."""
    result_id = _result_id(job_id, run_id)
    result = service().store.result(result_id) if result_id else None
    if result is None:
        return error(404, f"no finished run {run_id!r} in job {job_id!r}")
    return jsonify(result), 200


@api.get("/jobs/<job_id>/runs/<run_id>/log")
def get_log(job_id: str, run_id: str) -> tuple[Response, int]:
    """One run's stdout and stderr."""
    result_id = _result_id(job_id, run_id)
    found = service().store.log(result_id) if result_id else None
    if found is None:
        return error(404, f"no finished run {run_id!r} in job {job_id!r}")
    return jsonify(found), 200


@api.get("/jobs/<job_id>/runs/<run_id>/ir")
def get_ir(job_id: str, run_id: str) -> tuple[Response, int]:
    """One run's TVMScript after each pass."""
    result_id = _result_id(job_id, run_id)
    if result_id is None:
        return error(404, f"no finished run {run_id!r} in job {job_id!r}")
    return answer(IRView.model_validate({"run": run_id,
                                         "passes": service().store.passes(result_id)}))


@api.get("/jobs/<job_id>/compare")
def compare_runs(job_id: str) -> tuple[Response, int]:
    """Where two runs' IR first differs (?a=RUN&b=RUN)."""
    a, b = request.args.get("a"), request.args.get("b")
    if not a or not b:
        raise BadInput("a" if not a else "b", "name two run ids of the job: ?a=RUN&b=RUN")
    found = service().compare(job_id, a, b)
    return answer(found) if found else error(404, f"no finished runs {a!r} and {b!r} in "
                                                  f"job {job_id!r}")


@api.get("/environments")
def environments() -> tuple[Response, int]:
    """Pinned environments, with live workers and waiting runs."""
    return answer(service().environments())


@api.get("/openapi.json")
def openapi() -> tuple[Response, int]:
    """The OpenAPI document."""
    return jsonify(openapi_document()), 200


@health.get("/healthz")
def healthz() -> tuple[Response, int]:
    """200 when the store and the broker answer, else 503."""
    found = service().health()
    return answer(found, 200 if found.status == "ok" else 503)


def check_host() -> tuple[Response, int] | None:
    """400 for a Host this service does not answer to (a page rebinding its own name to this
    address); a request without Host (HTTP/1.0, never a browser's) is answered."""
    header = request.environ.get("HTTP_HOST")
    hosts: AllowedHosts = current_app.extensions["tvmrepro.hosts"]
    # /metrics answers any Host: it holds counts only, and a scraper names a pod by its address.
    if header is None or request.path == METRICS_PATH or hosts.allows(header):
        return None
    return error(400, hosts.refusal(header), "Host")


def secure_headers(response: Response) -> Response:
    """nosniff on every answer; a strict CSP unless a page set its own."""
    response.headers.update(SECURITY_HEADERS)
    response.headers.setdefault("Content-Security-Policy", API_CSP)
    return response


def register_errors(app: Flask) -> None:
    """Every error answers in the one JSON shape; bad input is never a 500."""

    @app.errorhandler(BadInput)
    def _bad_input(exc: BadInput) -> tuple[Response, int]:
        return error(400, str(exc), exc.field or None)

    @app.errorhandler(Forbidden)
    def _forbidden(exc: Forbidden) -> tuple[Response, int]:
        return error(403, str(exc), exc.field)

    @app.errorhandler(NotServed)
    def _not_served(exc: NotServed) -> tuple[Response, int]:
        return error(409, str(exc), exc.field)

    @app.errorhandler(QueueFull)
    def _queue_full(exc: QueueFull) -> tuple[Response, int]:
        response, status = error(429, str(exc))
        response.headers["Retry-After"] = str(RETRY_AFTER_S)
        return response, status

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> tuple[Response, int]:
        code = exc.code or 500
        if code == 413:
            limit = current_app.config["MAX_CONTENT_LENGTH"]
            return error(413, f"the request is larger than {limit} bytes, the service's "
                              f"TVMREPRO_MAX_REQUEST_BYTES; a case this large runs without "
                              f"the service: tvmrepro run --local")
        return error(code, exc.description or exc.name)

    @app.errorhandler(Exception)
    def _fault(exc: Exception) -> tuple[Response, int]:
        log.exception("internal error")
        return error(500, f"internal error ({type(exc).__name__}); the request was not "
                          "at fault")
