"""Where each command asked of the bot stands, in the status comment's words: its job's answer
once the job is done (a triage's verdict, a bisection's change, a reduction's sizes, an
extraction's case, a known-bug test), read from the store; run text in code only."""

from __future__ import annotations

from collections.abc import Callable

from tvmrepro.api.views import JobView
from tvmrepro.bot.render import HEADLINES, command_line
from tvmrepro.bot.state import MAX_COMMANDS, Command
from tvmrepro.environments import default_catalog
from tvmrepro.errors import BadInput
from tvmrepro.escaping import code_block, code_span
from tvmrepro.jobs.kinds import KINDS
from tvmrepro.jobs.tracker.export_test import export_test
from tvmrepro.store import Store

MAX_TEST_CHARS = 30_000


def command_lines(store: Store, commands: list[Command], public_url: str) -> list[str]:
    """A line per command (the newest MAX_COMMANDS), and any block a line refers to."""
    lines: list[str] = []
    extra: list[str] = []
    for command in commands[-MAX_COMMANDS:]:
        text, more = outcome(store, command)
        lines.append(command_line(command, text, public_url))
        extra += more
    return [*lines, *([""] if extra else []), *extra]


def outcome(store: Store, command: Command) -> tuple[str, list[str]]:
    """Where one command stands, and the block it shows (a known-bug test)."""
    if command.refused:
        return f"not taken: {command.refused}. Thank you for asking.", []
    if command.error:
        return f"could not be asked: {code_span(command.error)}", []
    if command.note:
        return command.note, []
    job = store.job(command.job) if command.job else None
    if job is None:
        return "its job is gone", []
    view = KINDS[job.kind].read(store, job)
    if not view.status.finished:
        return f"{view.status.value}", []
    if command.name == "test":
        return known_bug_test(view)
    return ANSWERS.get(job.kind, _done)(view), []


def _done(view: JobView) -> str:
    return f"{view.status.value}"


def _triage(view: JobView) -> str:
    answer = view.triage
    if answer is None or not answer.reports:
        return "done"
    line = answer.reports[0]
    text = HEADLINES.get(line.verdict.value, line.verdict.value)
    text += f" in {code_span(line.since)}" if line.since else ""
    return f"done: {text}: " + ", ".join(f"{code_span(status)} on {code_span(env)}"
                                         for env, status in line.statuses.items())


def _bisect(view: JobView) -> str:
    bisect = view.bisect
    if bisect is None:
        return "done"
    if bisect.verdict == "changed" and bisect.first_changed:
        return (f"done: it changed in {code_span(bisect.first_changed)} (last before: "
                f"{code_span(bisect.last_before_change or '')})")
    return f"done: {code_span(bisect.verdict.replace('_', '-'))} over " \
           f"{len(bisect.environments)} release(s)"


def _reduce(view: JobView) -> str:
    reduced = view.reduce
    if reduced is None or reduced.error or reduced.before is None or reduced.after is None:
        return f"done: no reduced case ({code_span(reduced.error if reduced else '')})"
    return (f"done: {reduced.before.passes} → {reduced.after.passes} passes, "
            f"{reduced.before.lines} → {reduced.after.lines} lines, signature "
            f"{code_span(reduced.signature or '')}")


def _extract(view: JobView) -> str:
    extracted = view.extract
    if extracted is None or extracted.case is None:
        return f"done: no module-mode case ({code_span(extracted.error if extracted else '')})"
    same = "gives the script's signature" if extracted.reproduces else "does not reproduce it"
    return f"done: the failing step as a module-mode case at {code_span(extracted.stage or '')}" \
           f" ({same}); reduce it from the job page"


def known_bug_test(view: JobView) -> tuple[str, list[str]]:
    """The known-bug pytest file of the report's run job (`tvmrepro export-test`)."""
    try:
        text = export_test(view, default_catalog())
    except BadInput as exc:
        return f"no test: {code_span(exc.problem)}", []
    return "the known-bug test below (xfails while the bug is there)", [
        "<details><summary>known-bug test (pytest)</summary>", "",
        *code_block(text[:MAX_TEST_CHARS], "python"), "", "</details>"]


ANSWERS: dict[str, Callable[[JobView], str]] = {
    "triage": _triage, "bisect": _bisect, "reduce": _reduce, "extract": _extract}
