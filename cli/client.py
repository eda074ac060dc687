"""The command line's HTTP client of the service: its API's calls as the shared models, its
errors as ReproError, a restart waited through, and the way back to a job a wait left (the
service it talks to is found by discovery.py; the cancel tokens it keeps are cancel_tokens.py's)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from cli.cancel_tokens import cancel_token_file, keep_cancel_token, kept_cancel_token
from cli.output import error_console
from tvmrepro.api.requests import CANCEL_HEADER, EnvironmentsRequest, JobRequest
from tvmrepro.api.views import (
    Bisection,
    Cancelled,
    Comparison,
    EnvironmentList,
    EnvironmentView,
    IRView,
    JobList,
    JobView,
    LogView,
)
from tvmrepro.errors import BadInput, ReproError
from tvmrepro.settings import MAX_PARTS_PAGE, variable_name

POLL_S = 0.25
WARM_POLL_S = 0.05  # a run on a warm sandbox answers within a second or two: poll close behind
HTTP_TIMEOUT_S = 30.0
LONG_POLL_S = 20  # how long a request for a job's next change waits (under HTTP_TIMEOUT_S)
# A service that never answered is asked a few times in quick succession, then named as absent:
# most likely nothing listens there, and a minute of silent retries only hides that.
FIRST_CONTACT_ATTEMPTS = 3
FIRST_CONTACT_PAUSE_S = 0.3
# One that answered before and stops (an API restarting) is asked this long before the client
# gives up, saying so every RECONNECT_SAY_S.
RECONNECT_S = 60.0
RECONNECT_SAY_S = 10.0


Model = TypeVar("Model", bound=BaseModel)


def maintainer_headers() -> dict[str, str]:
    """`Authorization: Bearer ...` where TVMREPRO_MAINTAINER_TOKEN is set here: the service
    then keeps this client's triages as its known issues (docs/api.md)."""
    token = os.environ.get(variable_name("maintainer_token"), "").strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


class ServiceError(ReproError):
    """The service answered with an error that is not the input's fault (or did not answer)."""


def _validated(model: type[Model], answer: Any, what: str) -> Model:
    """The service's answer as the shared model says it is; ServiceError naming what is off."""
    try:
        return model.model_validate(answer)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "answer"
        raise ServiceError(f"the service's answer to {what} is not a {model.__name__} "
                           f"({where}: {error['msg']}); is it another version?") from exc


@dataclass(frozen=True)
class Service:
    """The service a client command talks to, and how it was chosen (its messages say both)."""

    url: str
    how: str  # words that follow the URL: "given by --server", "from TVMREPRO_PORT", ...
    explicit: bool = True  # named by the user (--server, TVMREPRO_SERVER): nothing to announce
    # The `tvmrepro up` on this home, serving what is provisioned here: what it does not serve
    # yet, a provisioning here makes it serve (its refusals say so).
    serves_provisioned: bool = False


class ApiClient:
    """The service's HTTP API, with errors translated into ReproError."""

    def __init__(self, server: Service | str, reconnect_s: float = RECONNECT_S) -> None:
        self.service = server if isinstance(server, Service) else Service(server, "given")
        self.server = self.service.url.rstrip("/")
        self.reconnect_s = reconnect_s
        self.answered = False  # once it has, a silence is a restart worth waiting through
        self.seen: dict[str, tuple[str | None, JobView]] = {}  # a job's last view, its ETag
        # A plain http:// service needs no TLS context, whose CA bundle takes a quarter of a
        # second to load; redirects are not followed, so no request leaves plain HTTP.
        plain = self.server.startswith("http://")
        self.http = httpx.Client(base_url=self.server, timeout=HTTP_TIMEOUT_S, verify=not plain,
                                 headers=maintainer_headers())

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        """The answer's JSON (ServiceError or BadInput for an error)."""
        return self._send(method, path, **kwargs).json()

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        started, attempts, said = time.monotonic(), 0, -RECONNECT_SAY_S
        while True:
            try:
                response = self.http.request(method, path, **kwargs)
                break
            except httpx.TransportError as exc:
                attempts += 1
                waited = time.monotonic() - started
                if not self.answered and attempts >= FIRST_CONTACT_ATTEMPTS:
                    raise ServiceError(f"no answer from the service at {self.server}, "
                                       f"{self.service.how} ({exc}); is it running? "
                                       "(tvmrepro up)") from exc
                if self.answered and waited >= self.reconnect_s:
                    raise ServiceError(f"the service at {self.server} stopped answering "
                                       f"({exc}); gave up after {waited:.0f} s") from exc
                if self.answered and waited - said >= RECONNECT_SAY_S:
                    said = waited
                    error_console().print(
                        f"no answer from the service at {self.server} for {waited:.0f} s ({exc}); "
                        f"asking again until {self.reconnect_s:.0f} s", highlight=False)
                time.sleep(1.0 if self.answered else FIRST_CONTACT_PAUSE_S)
        self.answered = True
        if response.status_code >= 400:
            self._raise(response)
        return response

    @staticmethod
    def _raise(response: httpx.Response) -> NoReturn:
        try:
            detail = response.json()["error"]
        except (ValueError, KeyError, TypeError):
            detail = {"message": response.text[:500]}
        message, field = detail.get("message", ""), detail.get("field")
        if response.status_code in (400, 413):
            raise BadInput(field or "", message.removeprefix(f"{field}: ") if field else message)
        if response.status_code == 409:  # no worker for an environment: the user's choice
            raise BadInput(field or "--env", message)
        raise ServiceError(f"HTTP {response.status_code}: {message}")

    def submit(self, request: JobRequest) -> JobView:
        """POST a job (the fields it was given, the service's defaults for the rest); the job
        as the service stored it. Its cancel token (given this once) is kept under
        TVMREPRO_HOME, for `tvmrepro cancel JOB`."""
        # The kind always: a body without one asks for a run.
        body = {"kind": request.kind, **request.model_dump(mode="json", exclude_unset=True)}
        try:
            answer = self._call("POST", "/api/v1/jobs", json=body)
        except BadInput as exc:
            advice = self._up_advice(request, exc.problem) \
                if self.service.serves_provisioned and exc.field.startswith("environments") \
                else None
            if advice is None:
                raise
            raise BadInput(exc.field, advice) from None
        job = _validated(JobView, answer, "POST /jobs")
        keep_cancel_token(job)
        return job

    def _up_advice(self, request: JobRequest, problem: str) -> str | None:
        """The refusal of a job for its environments, saying what makes the `tvmrepro up` on
        this home serve them (None: nothing would)."""
        served = {env.id for env in self.environments() if env.workers}
        if not served:  # naming environments would not help: its worker is starting
            return ("no worker is live yet: the worker of the `tvmrepro up` on this home "
                    "provisions its environments first (a minute or two the first time), then "
                    "serves them; try again then")
        asked = request.environments if isinstance(request, EnvironmentsRequest) else "all"
        missing = [env_id for env_id in asked if env_id not in served] \
            if isinstance(asked, list) else []
        if not missing:
            return None
        return (f"{problem}; or provision them here (tvmrepro env provision {' '.join(missing)}):"
                f" the `tvmrepro up` on this home serves them within seconds of that")

    def job(self, job_id: str) -> JobView:
        """A job with runs and matrix (a triage's or sweep's first page of parts)."""
        path = f"/api/v1/jobs/{job_id}"
        return self._job_view(self._send("GET", path), path)

    def job_page(self, job_id: str, offset: int) -> JobView:
        """A triage's or sweep's view with the page of its parts from `offset` (the largest
        page the service gives)."""
        path = f"/api/v1/jobs/{job_id}"
        answer = self._call("GET", path, params={"offset": offset, "limit": MAX_PARTS_PAGE})
        return _validated(JobView, answer, f"GET {path}")

    def _job_view(self, response: httpx.Response, path: str) -> JobView:
        job = _validated(JobView, response.json(), f"GET {path}")
        self.seen[job.id] = (response.headers.get("ETag"), job)
        return job

    def job_after(self, job: JobView, poll_s: float = POLL_S, every_s: float = 0.0) -> JobView:
        """The job once it differs from `job` (the last view of it this client got): asked of
        the service as a long-poll (service/waiting.py), which answers when it changes (no
        sooner than `every_s` after asking, unless all its runs ended); a service that cannot
        wait now (or does not: no ETag) is asked again after `poll_s`."""
        path = f"/api/v1/jobs/{job.id}"
        etag, last = self.seen.get(job.id, (None, None))
        if last is not job:  # not read by this client since (a submission's answer): read now
            return self.job(job.id)
        if etag is None:  # a service that does not long-poll
            time.sleep(poll_s)
            return self.job(job.id)
        started = time.monotonic()
        params: dict[str, float] = {"wait": LONG_POLL_S}
        if every_s:
            params["every"] = every_s
        response = self._send("GET", path, params=params, headers={"If-None-Match": etag})
        if response.status_code != 304:
            return self._job_view(response, path)
        if time.monotonic() - started < LONG_POLL_S / 2:  # it did not wait: no thread free
            time.sleep(poll_s)
        return job

    def environments(self) -> list[EnvironmentView]:
        """The service's environments, with their live workers."""
        answer = self._call("GET", "/api/v1/environments")
        return _validated(EnvironmentList, answer, "GET /environments").environments

    def result(self, job_id: str, run_id: str) -> dict[str, Any]:
        """One run's full result."""
        found: dict[str, Any] = self._call("GET", f"/api/v1/jobs/{job_id}/runs/{run_id}")
        return found

    def results(self, job: JobView) -> list[dict[str, Any]]:
        """The full results of a finished job's runs, in its order."""
        return [self.result(job.id, run.id) for run in job.runs]


    def jobs(self, limit: int, offset: int = 0) -> JobList:
        """A page of jobs, newest first."""
        answer = self._call("GET", "/api/v1/jobs", params={"limit": limit, "offset": offset})
        return _validated(JobList, answer, "GET /jobs")

    def cancel(self, job_id: str, token: str | None = None) -> Cancelled:
        """Cancel a job's runs that have no result yet, with its cancel token: `token`, else
        the one kept when this machine submitted it (BadInput naming --token if none)."""
        token = token or kept_cancel_token(job_id)
        if not token:
            raise BadInput("--token", f"no cancel token of job {job_id} is kept here "
                                      f"({cancel_token_file(job_id)}): only whoever submitted "
                                      "a job can cancel it, with the cancel_token its "
                                      "submission answered")
        path = f"/api/v1/jobs/{job_id}"
        return _validated(Cancelled, self._call("DELETE", path, headers={CANCEL_HEADER: token}),
                          f"DELETE {path}")

    def give_windows(self, job_id: str, found: Bisection) -> JobView | None:
        """Keep the windows and suspects of `found` (computed here) with the bisect job this
        machine submitted (PUT .../windows); None where no cancel token of it is kept here."""
        token = kept_cancel_token(job_id)
        if not token:
            return None
        given = [{"before": t.before, "after": t.after,
                  "window": t.window.model_dump(mode="json"),
                  "suspects": [s.model_dump(mode="json") for s in t.suspects or []]}
                 for t in found.transitions if t.window is not None]
        path = f"/api/v1/jobs/{job_id}/windows"
        answer = self._call("PUT", path, json={"transitions": given},
                            headers={CANCEL_HEADER: token})
        return _validated(JobView, answer, f"PUT {path}")

    def log(self, job_id: str, run_id: str) -> LogView:
        """A run's output."""
        path = f"/api/v1/jobs/{job_id}/runs/{run_id}/log"
        return _validated(LogView, self._call("GET", path), f"GET {path}")

    def ir(self, job_id: str, run_id: str) -> IRView:
        """A run's TVMScript after each pass."""
        path = f"/api/v1/jobs/{job_id}/runs/{run_id}/ir"
        return _validated(IRView, self._call("GET", path), f"GET {path}")

    def compare(self, job_id: str, a: str, b: str) -> Comparison:
        """Where two runs' IR first differs."""
        path = f"/api/v1/jobs/{job_id}/compare"
        return _validated(Comparison, self._call("GET", path, params={"a": a, "b": b}),
                          f"GET {path}")


def resume_command(client: ApiClient, job_id: str, as_json: bool) -> str:
    """The command that waits for the job again (on the same service when the user named it)."""
    return (f"tvmrepro wait {job_id}" + (" --json" if as_json else "")
            + (f" --server {client.server}" if client.service.explicit else ""))


@contextlib.contextmanager
def resumable(client: ApiClient, job_id: str, as_json: bool) -> Iterator[None]:
    """Around waiting for a job: when the wait ends before the job does (the service gone,
    Ctrl-C), say how to get back to it; the job itself is the service's and goes on."""
    try:
        yield
    except (ServiceError, KeyboardInterrupt):
        cancel = f"tvmrepro cancel {job_id}" + (f" --server {client.server}"
                                                 if client.service.explicit else "")
        error_console().print(f"stopped waiting for job {job_id}; to wait for it again: "
                              f"{resume_command(client, job_id, as_json)} (or to cancel "
                              f"it: {cancel})", highlight=False)
        raise
