"""`tvmrepro bisect`: since when, fixed when, and whether a bug came and went.

Locally (`--local`) the probes run here, every environment at once on a few
threads (or both ends, then halves, with `--strategy binary`); otherwise the
service runs them as a bisect job. Either way the answer is the bisect object
of docs/contract.md, judged by the same code (tvmrepro.jobs.bisect.logic).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cli.client import WARM_POLL_S, ApiClient, ServiceError, resumable
from cli.commands.history import history_said
from cli.discovery import connect, on_warm_up
from cli.local import fingerprints_announced
from cli.output import (
    SERVER_HELP,
    STATUS_STYLE,
    error_console,
    plain,
    print_json,
    reports_errors,
    shown,
)
from tvmrepro.attachments import WITH_CONTENTS, attach, read_files
from tvmrepro.cases import Case, load_case_file
from tvmrepro.choice import FLAG_WHY
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.history import History, history_source, open_history
from tvmrepro.jobs.bisect.logic import (
    ALL,
    STRATEGIES,
    Observation,
    Options,
    ProbeRound,
    bisect_rounds,
    initial_probes,
    make_options,
)
from tvmrepro.jobs.bisect.windows import annotate
from tvmrepro.jobs.fanout import fan_out
from tvmrepro.settings import Settings

if TYPE_CHECKING:
    from tvmrepro.api.views import Bisection, BisectTransition, JobView
    from worker.runtimes.base import Runtime

CLI_FIELDS = {"variant": "--variant", "environments": "--env", "reference": "--reference",
              "oracle": "--oracle", "repeat": "--repeat", "strategy": "--strategy"}
POLL_S = 0.5
_VERDICT_STYLE = {"bad": "red", "good": "green", "skip": "blue", "flaky": "yellow"}
Tick = Callable[[int, int], None]
HistoryGetter = Callable[[], History | None]  # waits for the history where it is being read


def _run_one(case: Case, options: Options, env: Environment, runtime: Runtime) -> Observation:
    from worker.runner import oracle_view, run_variant

    run_id = uuid.uuid4().hex
    result = run_variant(case, options.variant, env, runtime, run_id=run_id)
    return Observation(env.id, run_id, oracle_view(result))


def bisect_locally(case: Case, options: Options, runtime_name: str, tick: Tick,
                   history: HistoryGetter = lambda: None) -> Bisection:
    """Run the probes here (in parallel), round after round (tvmrepro.jobs.bisect.logic's
    loop, as a bisect job's steps do), and judge them; with a history, each transition gets
    its commit window and suspects."""
    from tvmrepro.api.views import Bisection
    from worker.runtimes import make_runtime

    settings = Settings.from_env()
    runtime = make_runtime(runtime_name, settings)
    envs = {env.id: env for env in default_catalog().select(options.environments)}
    # The local runtime provisions what is missing; Docker asks each environment's image.
    fingerprints = fingerprints_announced(runtime, settings, list(envs.values()))
    fan_out(case, list(envs.values()), fingerprints, [options.variant], "--variant")
    try:
        if options.repeat > 1 and options.strategy == ALL:
            # One zygote per release for the command (where the runtime forks sandboxes),
            # started from this thread, which outlives the runs: a release's repeats share its
            # TVM import. Not for one probe per release: waiting for ten zygotes before the
            # first probe was slower than ten sandboxes each importing TVM as it starts; nor
            # for the binary strategy, which probes a few of them.
            runtime.start_zygotes(list(envs.values()))
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            found, observed = bisect_rounds(
                options, _prober(pool, runtime, case, options, envs), [],
                initial_probes(options),
                lambda now: tick(now["progress"]["done"], now["progress"]["total"]))
    finally:
        runtime.close()
    firsts: dict[str, Observation] = {}
    for obs in observed:
        firsts.setdefault(obs.environment, obs)
    commits = {env_id: facts.get("commit") for env_id, facts in fingerprints.items()}
    return Bisection.model_validate(annotate(
        found, lambda env_id: (firsts[env_id].result or {}) if env_id in firsts else None,
        _case_json(case), history(), commits))


def _prober(pool: ThreadPoolExecutor, runtime: Runtime, case: Case, options: Options,
            envs: dict[str, Environment]) -> ProbeRound:
    """How a round of probes runs here: every run of it at once on the pool, each observed as
    it ends."""
    def probe(todo: list[str]) -> Iterator[Observation]:
        _reserve(runtime, case, [envs[env_id] for env_id in todo], options.repeat)
        futures = [pool.submit(_run_one, case, options, envs[env_id], runtime)
                   for env_id in todo for _ in range(options.repeat)]
        for future in as_completed(futures):
            yield future.result()
    return probe


def _case_json(case: Case) -> dict[str, Any]:
    return case.model_dump(mode="json", exclude_defaults=True)


def history_when_needed(flag: str | None) -> HistoryGetter:
    """The history the windows and suspects come from, for when the probes are done: one that
    --history names is read at once (a bad one is refused before any probe runs), the default
    one on a thread of its own while the probes run (reading it takes 0.1 to 0.3 s)."""
    if flag is not None:
        named = chosen_history(flag)
        return lambda: named
    reading = ThreadPoolExecutor(max_workers=1)
    read = reading.submit(_history_aside)
    reading.shutdown(wait=False)
    return read.result


def _history_aside() -> History | None:
    """The default history, read at the lowest priority (this thread only, on Linux): the
    probes' sandboxes on these cores come first, and it is read in their gaps or at their end."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    return chosen_history(None)


def chosen_history(flag: str | None) -> History | None:
    """--history, else TVMREPRO_TVM_HISTORY, else the shipped commit index."""
    settings = Settings.from_env()
    try:
        return open_history(flag or settings.tvm_history, settings.home)
    except BadInput as exc:
        raise BadInput("--history" if flag else "TVMREPRO_TVM_HISTORY", exc.problem) from exc


def annotate_remote(client: ApiClient, job_id: str, found: Bisection, case: Case,
                    history: History) -> Bisection:
    """A service's bisect object given windows and suspects here, from this history: the
    failing runs' results and logs are read back from the service."""
    firsts = {p.environment: p.runs[0] for p in found.probes if p.runs}

    def result_of(env_id: str) -> dict[str, Any] | None:
        if env_id not in firsts:
            return None
        result = dict(client.result(job_id, firsts[env_id]))
        result = dict(result.get("result") or result)
        if result.get("signature_frame"):
            log = client.log(job_id, firsts[env_id])
            result["log_text"] = f"{log.stdout}\n{log.stderr}"
        return result

    annotated = found.model_validate(annotate(found.model_dump(mode="json"), result_of,
                                              _case_json(case), history))
    keep_windows(client, job_id, annotated)
    return annotated


def keep_windows(client: ApiClient, job_id: str, found: Bisection) -> None:
    """Keep the windows and suspects computed here with the job, so that its page and its
    report show what this command shows; a service that does not take them is said, and the
    answer stands."""
    if not any(change.window for change in found.transitions):
        return
    try:
        kept = client.give_windows(job_id, found)
    except (ServiceError, BadInput) as exc:
        kept, why = None, str(exc)
    else:
        why = "no cancel token of it is kept here (it was submitted elsewhere)"
    if kept is None:
        error_console().print(f"the windows and suspects are not kept with job {job_id}: "
                              f"{why}", highlight=False)


def _reserve(runtime: Runtime, case: Case, envs: list[Environment], repeat: int) -> None:
    """Start every probe's sandbox of this round now, from this (long-lived) thread: their TVM
    imports overlap each other and the runs before them."""
    for env in envs:
        runtime.reserve(env, case.timeout_s, case.memory_mb, count=repeat)


def bisect_remotely(case: Case, options: Options, server: str | None, tick: Tick,
                    as_json: bool = False, queue: bool = False,
                    last_poll_s: float = POLL_S) -> tuple[str, Bisection | None]:
    """Submit a bisect job (to --server, or the service that find_service finds) and wait for
    its answer (polled every `last_poll_s` once its last probes run); the job id and the bisect
    object."""
    from tvmrepro.api.requests import BisectRequest

    client = connect(server)
    request = BisectRequest(
        kind="bisect", case=case.model_dump(mode="json", exclude_defaults=True,
                                            context=WITH_CONTENTS),
        environments=options.environments, variant=options.variant, oracle=options.oracle,
        repeat=options.repeat, strategy=options.strategy,
        bypass_cache=options.bypass_cache, wait=queue)
    if options.reference:  # else left out: the service picks one
        request = request.model_copy(update={"reference": options.reference})
    job = client.submit(request)
    error_console().print(f"job {job.id} at {client.server}", highlight=False)
    with resumable(client, job.id, as_json):
        served = {env.id for env in client.environments() if env.workers}
        for env_id in sorted(set(options.environments) - served):
            error_console().print(f"[yellow]warning:[/yellow] no live worker serves {env_id}; "
                                  "its probes wait until one does", highlight=False)
        return job.id, follow_bisect(client, job, tick, last_poll_s)


def bisect_on_up(case: Case, options: Options, runtime_name: str, tick: Tick, as_json: bool,
                 history: HistoryGetter) -> Bisection | None:
    """The bisection as a job of a live `tvmrepro up` on this home whose worker serves every
    release asked for (its zygotes have TVM imported; the cache bypassed, as a run here would
    be), annotated from `history`; None when there is no such `up` or it refused."""

    def on(url: str) -> Bisection | None:
        job_id, found = bisect_remotely(case, dataclasses.replace(options, bypass_cache=True),
                                        url, tick, as_json, last_poll_s=WARM_POLL_S)
        known = history()
        if found is None or known is None:
            return found
        return annotate_remote(connect(url), job_id, found, case, known)

    return on_warm_up(runtime_name, options.environments, on)


def follow_bisect(client: ApiClient, job: JobView, tick: Tick,
                  last_poll_s: float = POLL_S) -> Bisection | None:
    """Follow a bisect job (long-poll) until it is finished, telling `tick` its progress; its
    bisect object (None: the service gave none). While more than two probes are left, a change
    is answered at most every POLL_S (each answer is a whole bisection to build, send and read,
    on the cores the probes run on), its end at once; then every change at once, and where the
    service cannot wait, it is asked every `last_poll_s` (a local `up`: closer behind its end)."""
    while True:
        found = job.bisect
        if found is not None:
            tick(found.progress.done, found.progress.total)
        if job.status.finished:
            return found
        left = found.progress.total - found.progress.done if found is not None else None
        poll_s, every_s = (last_poll_s, 0.0) if left is not None and left <= 2 else (POLL_S, POLL_S)
        job = client.job_after(job, poll_s, every_s)


def wait_bisect(client: ApiClient, job: JobView, as_json: bool) -> None:
    """`tvmrepro wait` on a bisect job: its probes' progress, then its probes (or JSON)."""
    with resumable(client, job.id, as_json), probe_progress(as_json) as tick:
        found = follow_bisect(client, job, tick)
    show_bisect(found, job.title or f"job {job.id}", as_json)


def bisect_view(found: Bisection, title: str) -> Table:
    """The probes as a table, the transitions and the verdict as its caption."""
    table = Table(title=shown(title))
    for column in ("environment", "verdict", "status", "stage", "signature"):
        table.add_column(column, overflow="fold")
    for probe in found.probes:
        style = _VERDICT_STYLE.get(probe.verdict, "")
        status_style = STATUS_STYLE.get(probe.status or "", "")
        table.add_row(plain(probe.environment), plain(probe.verdict, style),
                      plain(probe.status, status_style),
                      plain(probe.stage or ""), plain(probe.signature or ""))
    lines = []
    for t in found.transitions:
        lines.append(shown(f"{t.before} ({t.from_}) -> {t.after} ({t.to})"
                           + (f", candidates: {', '.join(t.candidates)}" if t.candidates else "")
                           + (f", not probed (outside the range): {', '.join(t.not_in_range)}"
                              if t.not_in_range else "")))
    lines += [shown(f"skipped, a broken environment: {p.environment} ({p.environment_defect})")
              for p in found.probes if p.environment_defect]
    lines.append(shown(f"verdict: {found.verdict} (oracle {found.oracle}"
                       + (f", reference {found.reference}" if found.reference else "") + ")"))
    table.caption = "\n".join(lines)
    return table


def _environments(env_ids: tuple[str, ...], device: str) -> list[Environment]:
    catalog = default_catalog()
    if not env_ids:
        return catalog.select(None, device=device)
    return catalog.select([catalog.get(env_id, "--env").id for env_id in env_ids])


@click.argument("case_file", type=click.Path(path_type=Path))
@click.option("--variant", default=None, help="Variant (needed when the case has several).")
@click.option("--env", "env_ids", multiple=True,
              help="Environment id (repeatable; default every one of --device).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu",
              help="Without --env: this device's environments.")
@click.option("--oracle", default="failure", help="failure, status:<s>, signature, "
              "signature:<text>, regex:<pattern> or output.")
@click.option("--reference", default=None, help="Environment the signature and output "
              "oracles compare with (default: the newest that fails / that ran).")
@click.option("--repeat", type=int, default=1, help="Runs per environment (disagreeing: flaky).")
@click.option("--strategy", type=click.Choice(STRATEGIES), default=ALL,
              help="Probe every environment at once, or both ends then halves.")
@click.option("--local", is_flag=True, help="Run here, without the service (on the warm "
              "sandboxes of a `tvmrepro up` on this home when it serves every release).")
@click.option("--runtime", "runtime_name", type=click.Choice(["local", "docker"]), default="local",
              help="With --local: a sandboxed local environment, or the environment's image.")
@click.option("--cold", is_flag=True, help="With --local: sandboxes of this command's own even "
              "when a `tvmrepro up` on this home has warm ones.")
@click.option("--json", "as_json", is_flag=True, help="Print the bisect object as JSON.")
@click.option("--server", default=None, help=SERVER_HELP)
@click.option("--queue", is_flag=True,
              help="Queue the probes of releases that no live worker serves yet (else refused).")
@click.option("--history", default=None, help="apache/tvm's history for each transition's "
              "commit window and suspects: a commit index (JSON lines), a git clone, or a URL "
              "(default: TVMREPRO_TVM_HISTORY).")
@click.option("--file", "file_paths", multiple=True, type=click.Path(path_type=Path),
              help="A file the case reads from its working directory (a model, pickled "
                   "inputs), written there read-only under its name (repeatable).")
def bisect(case_file: Path, variant: str | None, env_ids: tuple[str, ...], device: str,
                   oracle: str, reference: str | None, repeat: int, strategy: str, local: bool,
                   runtime_name: str, cold: bool, as_json: bool, server: str | None, queue: bool,
                   history: str | None, file_paths: tuple[Path, ...] = ()) -> None:
    """Which releases show the bug, and where it changed (every transition)."""
    case = attach(load_case_file(case_file), read_files(file_paths))
    envs = _environments(env_ids, device)
    why = FLAG_WHY if env_ids else f"bisect's range: every {device} release, in version order"
    error_console().print(f"bisecting over {len(envs)} releases, {envs[0].id} to "
                          f"{envs[-1].id} ({why})", highlight=False)
    if reference is not None:
        default_catalog().get(reference, "--reference")
    options = make_options(case, envs, variant, oracle, reference, repeat, strategy,
                           fields=CLI_FIELDS)
    # The service's own history answers a job; --history asks for this one instead.
    known = history_when_needed(history) if local or history else (lambda: None)
    with probe_progress(as_json) as tick:
        on_up = None if not local or cold else bisect_on_up(case, options, runtime_name, tick,
                                                            as_json, known)
        found: Bisection | None
        if on_up is not None:
            found = on_up
        elif local:
            found = bisect_locally(case, options, runtime_name, tick, known)
        else:
            job_id, found = bisect_remotely(case, options, server, tick, as_json, queue)
            named = known()
            if named is not None and found is not None:
                found = annotate_remote(connect(server), job_id, found, case, named)
    said = history_used(found, known if local or history else None, history)
    if said:
        error_console().print(said, highlight=False)
    show_bisect(found, case.title or case_file.name, as_json)


def history_used(found: Bisection | None, known: HistoryGetter | None,
                 flag: str | None) -> str | None:
    """Which history the windows came from and how fresh it is, in words (None: the service's,
    and no window says which)."""
    span = next((t.window for t in found.transitions if t.window), None) if found else None
    if span is not None:
        return f"history: {span.history}, newest commit {span.history_newest or 'unknown'}"
    if known is None:
        return None
    settings = Settings.from_env()
    source = ("--history" if flag else "TVMREPRO_TVM_HISTORY" if settings.tvm_history
              else history_source(None, settings.home))
    return history_said(known(), source)


def window_lines(change: BisectTransition, top: int = 3) -> list[str]:
    """A transition's commit window and its best suspects, in a few lines."""
    span = change.window
    if not span:
        return []
    lines = [f"  window: {span.commits} commits"
             + (f" ({span.picked} already in the earlier release)" if span.picked else "")
             + (f", {span.compare_url}" if span.compare_url else "")]
    if span.open_ended:
        lines.append(f"  open-ended: {span.missing}")
    for n, suspect in enumerate((change.suspects or [])[:top], 1):
        lines.append(f"  suspect {n}: {suspect.score:.2f} {suspect.subject} {suspect.url}")
    return lines


@contextlib.contextmanager
def probe_progress(as_json: bool) -> Iterator[Tick]:
    """A progress bar of the probes on stderr (gone at the end with --json); yields its tick."""
    columns = (TextColumn("probes"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=error_console(), transient=as_json) as progress:
        task = progress.add_task("probes", total=None)
        yield lambda done, total: progress.update(task, completed=done, total=total)


def show_bisect(found: Bisection | None, title: str, as_json: bool) -> None:
    """A bisection's answer: the table of probes, or the bisect object as JSON."""
    if found is None:
        raise BadInput("job", "the service answered without a bisect object")
    if as_json:
        print_json(found.model_dump(mode="json"))
        return
    console = Console(width=max(Console().width, 140))
    console.print(bisect_view(found, title))
    # Each transition's commit window and best suspects, below the table (URLs unwrapped).
    for change in found.transitions:
        lines = window_lines(change)
        if lines:
            console.print(shown(f"{change.before} -> {change.after}:"), soft_wrap=True)
        for line in lines:
            console.print(shown(line), soft_wrap=True, highlight=False)


bisect_command: click.Command = click.command("bisect")(reports_errors(bisect))
