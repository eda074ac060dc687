"""The tracker's Markdown reports, ready to paste into a tracker: a triage job's (a row per
report: verdict, since, group, the statuses; the groups of one bug and the issues in the wrong
state) and a sweep job's (each stored case whose outcome changed)."""

from __future__ import annotations

import re

from tvmrepro.choice import over_markdown
from tvmrepro.escaping import code_span, table_cell
from tvmrepro.jobs.tracker.sweep import Change, SweepJobAnswer
from tvmrepro.jobs.tracker.triage_job import TriageJobAnswer

# A link only to a plain web address (the URL came from an issue export), as the page does.
_PLAIN_URL = re.compile(r"https://[\w.-]+/[\w./#-]*")


def _named(number: int | None, url: str | None = None) -> str:
    if number is None:
        return "the report"
    return f"[#{number}]({url})" if url and _PLAIN_URL.fullmatch(url) else f"#{number}"


def _rows(answer: TriageJobAnswer) -> list[str]:
    envs = answer.environments
    lines = ["| report | state | verdict | group | quoted error now | "
             + " | ".join(code_span(env) for env in envs) + " |",
             "| --- " * (5 + len(envs)) + "|"]
    for line, title, url in zip(answer.reports, answer.titles, answer.urls, strict=True):
        verdict = line.verdict.value + (f" since {code_span(line.since)}" if line.since else "")
        verdict += f": {table_cell(line.incompatible)}" if line.incompatible else ""
        quoted = {True: "yes", False: "no", None: ""}[line.quoted_error_reproduced]
        statuses = " | ".join(code_span(line.statuses[env]) if env in line.statuses else ""
                              for env in envs)
        lines.append(f"| {_named(line.number, url)} {table_cell(title)} | "
                     f"{code_span(line.state) if line.state else ''} | {verdict} | "
                     f"{line.group or ''} | {quoted} | {statuses} |")
    return lines


def render_triage(answer: TriageJobAnswer, job_id: str, title: str) -> str:
    """The report of a triage job (of the reports done so far while it runs)."""
    progress = answer.progress
    done = "" if answer.finished else \
        f" (so far: {progress.reports_done} of {progress.reports} reports done)"
    lines = [f"**Triage of {progress.reports} reports on {len(answer.environments)} pinned TVM "
             f"environment(s){done}**: {title and code_span(title)}, job {code_span(job_id)}.",
             "", over_markdown(answer.environments, answer.environments_why, answer.not_probed),
             "", *_rows(answer), ""]
    shared = [group for group in answer.groups if len(group.reports) > 1]
    if shared:
        lines += ["One bug, many reports:", ""]
        lines += [f"- group {group.id}: "
                  + ", ".join(_named(number) for number in group.reports)
                  + f"; representative {_named(group.representative)}: "
                  + code_span(group.signature) for group in shared]
        lines.append("")
    if answer.audit:
        lines += ["Issues in the wrong state:", ""]
        lines += [f"- {_named(entry.number)} {code_span(entry.state or '')}: "
                  f"{entry.finding.value.replace('_', ' ')}"
                  + (f" (since {code_span(entry.since)})" if entry.since else "")
                  for entry in answer.audit]
        lines.append("")
    return "\n".join(lines)


def render_sweep(answer: SweepJobAnswer, job_id: str, title: str) -> list[str]:
    """The report of a sweep job: each stored case whose outcome changed, and the counts."""
    progress = answer.progress
    done = "" if answer.finished else \
        f" (so far: {progress.cases_done} of {progress.cases} cases done)"
    lines = [f"**Sweep of {progress.cases} stored cases, {code_span(answer.since)} → "
             f"{code_span(answer.env)}{done}**: {title and code_span(title)}, job "
             f"{code_span(job_id)}.", ""]
    changed = [line for line in answer.cases if line.change != Change.SAME]
    lines += [f"- {line.change.value.replace('_', ' ')}: {table_cell(line.title or line.job)} "
              f"({code_span(line.variant)}): {code_span(line.old.status)} → "
              f"{code_span(line.new.status)}"
              + (f", {code_span(line.new.signature)}" if line.new.signature else "")
              for line in changed]
    counts = ", ".join(f"{n} {change}" for change, n in answer.changed.items()) or "no cases"
    return [*lines, *([""] if changed else []), f"Changes: {counts}.", ""]
