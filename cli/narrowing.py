"""What `tvmrepro extract` and `tvmrepro reduce` share: their common options, the runtime of
a --local run, and the job that runs them through the service otherwise."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import click

from cli.output import SERVER_HELP, error_console, fingerprints_announced, shown
from cli.remote import ApiClient, ServiceError, connect, resumable
from cli.up import on_warm_up
from tvmrepro.cases import Case
from tvmrepro.environments import Environment
from tvmrepro.errors import BadInput
from tvmrepro.models import JobRequest, JobView
from tvmrepro.narrowed import Extracted, Reduced
from tvmrepro.narrowing import ProgressEvent
from tvmrepro.settings import Settings
from worker.runtimes.base import Runtime

Command = Callable[..., Any]
Progress = Callable[[ProgressEvent], None]
NarrowKind = Literal["reduce", "extract"]


def show_progress(event: ProgressEvent) -> None:
    """One line on stderr per step: the phase, the edit, and the size now."""
    style = "dim" if event.get("kind") == "try" else "bold"
    said = {"passes": event.get("passes"), "lines": event.get("lines"), "runs": event.get("runs")}
    sizes = ", ".join(f"{name} {value}" for name, value in said.items() if value is not None)
    error_console().print(f"[{style}]{shown('[' + str(event.get('phase')) + ']')} "
                          f"{shown(event.get('what', ''))}"
                          f"[/{style}]" + (f"  ({sizes})" if sizes else ""), highlight=False)


def narrowing_options(command: Command) -> Command:
    """--local, --runtime, --cold, --json, -o and --server (applied bottom-up, shown in this order)."""
    options = [
        click.option("--local", is_flag=True, help="Run here, without the service (on the "
                     "warm sandboxes of a `tvmrepro up` on this home when it serves ENV)."),
        click.option("--runtime", "runtime_name", type=click.Choice(["local", "docker"]),
                     default="local", help="With --local: a sandboxed local environment, or "
                                           "the environment's image."),
        click.option("--cold", is_flag=True, help="With --local: sandboxes of this command's "
                     "own even when a `tvmrepro up` on this home has warm ones."),
        click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON."),
        click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False),
                     default=None, help="Also write the case (JSON) here."),
        click.option("--server", default=None, help=SERVER_HELP),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@contextlib.contextmanager
def local_runtime(runtime_name: str, envs: list[Environment]) -> Iterator[Runtime]:
    """The runtime of a command that runs here, with envs provisioned where they are missing
    (said on stderr), closed at the end. Its runs share one TVM import per environment: where
    sandboxes are forked (the local runtime), each environment's zygote is started first and
    forks them all."""
    from worker.runtimes import make_runtime

    settings = Settings.from_env()
    runtime = make_runtime(runtime_name, settings)
    try:
        fingerprints_announced(runtime, settings, envs)
        runtime.start_zygotes(envs)
        yield runtime
    finally:
        runtime.close()


def write_case(output: Path | None, found: Reduced | Extracted) -> None:
    """Write the case found to -o's file, if one was given."""
    if output is not None:
        output.write_text(json.dumps(found.case.model_dump(mode="json"), indent=2) + "\n")


def follow_narrowing(client: ApiClient, job: JobView, kind: str, progress: Progress) -> JobView:
    """Poll the job until it is finished, telling `progress` each new step."""
    said = None
    while not job.status.finished:
        job = client.job_after(job)
        found = job.reduce if kind == "reduce" else job.extract
        shown = found.progress if found is not None else None
        if shown is not None and (shown.phase, shown.what) != said:
            said = (shown.phase, shown.what)
            progress({"kind": "step", "phase": shown.phase, "what": shown.what,
                      "steps": shown.steps, "runs": shown.runs, "passes": shown.passes,
                      "lines": shown.lines})
    return job


def narrow_remotely(kind: NarrowKind, case: Case, env: Environment, server: str | None,
                    progress: Progress, **fields: Any) -> Reduced | Extracted:
    """Submit a reduce or extract job, follow it, and give its answer (with the job's id).

    An answer that says why there is none is BadInput (the case does not show the bug, the
    script fails where no module is), as it is here; a run the service failed is ServiceError.
    """
    client = connect(server)
    job = client.submit(JobRequest(
        kind=kind, case=case.model_dump(mode="json", exclude_defaults=True),
        environments=[env.id], **{k: v for k, v in fields.items() if v is not None}))
    error_console().print(f"{kind} job {job.id} at {client.server}", highlight=False)
    with resumable(client, job.id, as_json=True):
        job = follow_narrowing(client, job, kind, progress)
    return narrowing_answer(job)


def narrow_on_up(kind: NarrowKind, case: Case, env: Environment, runtime_name: str,
                 progress: Progress, **fields: Any) -> Reduced | Extracted | None:
    """A reduce or extract job of a live `tvmrepro up` on this home whose worker serves env
    (TVM imported there already), as narrow_remotely gives it; None when there is no such `up`,
    or it stopped or refused (the command then runs here: where the refusal is the answer,
    that there is none, it comes again in this command's words)."""
    return on_warm_up(runtime_name, [env.id],
                      lambda url: narrow_remotely(kind, case, env, url, progress, **fields))


def narrowing_answer(job: JobView) -> Reduced | Extracted:
    """A finished reduce or extract job's answer (with the job's id), as --json prints it."""
    kind = job.kind
    found = job.reduce if kind == "reduce" else job.extract
    result = (job.runs[0].result or {}) if job.runs else {}
    if found is None or result.get("status") == "infra_error":
        raise ServiceError(f"the {kind} job {job.id} failed: {result.get('message')}")
    if found.state != "done":
        raise BadInput("CASE" if kind == "reduce" else "SCRIPT",
                       found.error or f"the {kind} job {job.id} ended without an answer")
    answer = {**found.model_dump(mode="json", exclude={"progress", "state"}), "job": job.id}
    return (Reduced if kind == "reduce" else Extracted).model_validate(answer)
