"""The bot's comments, in GitHub Markdown. Whatever a run or a report says (statuses, stages,
signatures, errors, titles, scripts) is shown through tvmrepro.escaping only: in code spans and
code blocks, so that no heading, link, image, HTML or @mention comes out of it. What is written
here (the verdict's words, links made of the service's address and job ids, issue numbers,
logins checked as logins) is the only text outside code."""

from __future__ import annotations

from tvmrepro.bot.commands import login_text
from tvmrepro.bot.state import BotState, Check, Command, Inbox
from tvmrepro.choice import over_markdown
from tvmrepro.escaping import code_block, code_span, table_cell

TRACKING_MARK = "<!-- tvm-repro:tracking -->"
STATUS_MARK = "<!-- tvm-repro:status -->"
CONFIRM_MARK = "<!-- tvm-repro:confirm -->"
HEADLINES = {
    "reproduces": "reproduces on the newest release",
    "fixed": "is fixed",
    "never_reproduced": "does not fail on any release run",
    "incompatible": "cannot run on the newest release",
    "no_code": "has no runnable reproducer",
}


def job_link(public_url: str, job_id: str, text: str = "job") -> str:
    """A link to a job's page on this service (a hex id: nothing to escape)."""
    return f"[{text} {job_id[:8]}]({public_url}/jobs/{job_id})"


def comment_link(tracker: str, number: int, comment: int | None) -> str:
    """#N, with a link to its tracking comment where it has one."""
    if comment is None:
        return f"#{number}"
    return f"#{number} ([its comment]({tracker}/issues/{number}#issuecomment-{comment}))"


def headline(check: Check) -> str:
    """The verdict in words, with the release of a fix."""
    text = HEADLINES.get(check.verdict, code_span(check.verdict))
    return text + (f" in {code_span(check.since)}" if check.since else "")


def matrix(check: Check) -> list[str]:
    """The check's releases, a row each."""
    lines = ["| release | status | stage | signature |", "| --- | --- | --- | --- |"]
    for row in check.rows:
        lines.append(f"| {table_cell(row.env)} | {table_cell(row.status)} | "
                     f"{table_cell(row.stage) if row.stage else ''} | "
                     f"{table_cell(row.signature) if row.signature else ''} |")
    return lines


def _facts(check: Check, inbox: Inbox, followers: list[int]) -> list[str]:
    lines = []
    if check.signature:
        lines.append(f"**Signature:** {code_span(check.signature)}")
    if check.incompatible:
        lines.append(f"**Why it cannot run:** {code_span(check.incompatible)}")
    if check.duplicates and not inbox.not_duplicate:
        shown = ", ".join(f"#{n}" for n in check.duplicates[:10])
        lines.append(f"**Likely duplicate of:** {shown} (known issues failing with this "
                     "signature)")
    if inbox.duplicate_of is not None:
        lines.append(f"**Duplicate of #{inbox.duplicate_of}**, as "
                     f"{login_text(inbox.duplicate_by or '')} said.")
    if followers:
        lines.append("**Also reported as:** " + ", ".join(f"#{n}" for n in followers)
                     + " (the same signature within the flood window)")
    return lines


def _reproducer(check: Check) -> list[str]:
    if not check.reproducer:
        return []
    return ["<details><summary>Reproducer on " + code_span(check.reproducer_env or "")
            + " (plain Python, without tvm-repro)</summary>", "",
            *code_block(check.reproducer, "python"), "", "</details>"]


def tracking_body(check: Check, inbox: Inbox, state: BotState, followers: list[int],
                  public_url: str) -> str:
    """The one comment that answers a report (edited as later checks come)."""
    if check.verdict == "no_code":
        return no_code_body(check.no_code or "no runnable code")
    lines = [TRACKING_MARK, f"### tvm-repro: this report {headline(check)}", "",
             over_markdown(check.environments, check.environments_why, check.not_probed), "",
             *matrix(check), "", *_facts(check, inbox, followers)]
    if state.failing_again:
        lines += ["", f"**Failing again:** {state.failing_again}."]
    if state.passes and check.verdict != "reproduces":
        lines += ["", f"Passing checks in a row: {state.passes}."]
    lines += ["", *_reproducer(check), "",
              f"{job_link(public_url, check.job, 'triage')} · "
              f"[report]({public_url}/api/v1/jobs/{check.run_job}/report.md)"
              if check.run_job else job_link(public_url, check.job, "triage")]
    return "\n".join(lines).strip() + "\n"


def no_code_body(reason: str) -> str:
    """The short answer to a report without runnable code: what is missing."""
    return "\n".join([
        TRACKING_MARK, f"tvm-repro could not run this report: {code_span(reason)}.", "",
        "Add the script as a fenced `python` block (with the files it reads attached) and "
        "edit the issue: tvm-repro runs it again.", ""])


def error_body(error: str) -> str:
    """The answer where the report could not be asked of the service."""
    return "\n".join([TRACKING_MARK, f"tvm-repro could not run this report: {code_span(error)}."
                      " Edit the issue to try again.", ""])


def follower_body(leader: int, leader_comment: int | None, check: Check, tracker: str) -> str:
    """A report of a flood: its own verdict and matrix (each report gets its answer), the rest
    (duplicates, reproducer, the group) in the comment of the group's first report."""
    return "\n".join([
        TRACKING_MARK, f"tvm-repro: this report {headline(check)}, with the signature "
        f"{code_span(check.signature or '')}, as {comment_link(tracker, leader, leader_comment)} "
        "reported within the flood window: the group is answered there.", "",
        *matrix(check), ""])


def confirm_body(inbox: Inbox, state: BotState, needed: int, public_url: str, bot: str) -> str:
    """The request to confirm a fix: the evidence (the passing checks), who may close."""
    people = [inbox.author, *inbox.assignees]
    asked = " ".join(dict.fromkeys(login_text(p) for p in people if p)) or "Maintainers"
    latest = state.latest
    since = f" since {code_span(latest.since)}" if latest and latest.since else ""
    jobs = ", ".join(job_link(public_url, check.job, "triage") for check in state.counted[-needed:])
    return "\n".join([
        CONFIRM_MARK, f"{asked}: the last {state.passes} check(s) of this report pass on the "
        f"newest release{since} ({jobs}). Could you confirm that it is fixed (the fixing change, "
        "or a run of your own)? tvm-repro does not close issues by itself: a maintainer closes "
        f"it with `@{bot} close`.", ""])


def command_line(command: Command, outcome: str, public_url: str) -> str:
    """One command of the status comment: who asked what, and where it stands."""
    asked = code_span(" ".join([command.name, *command.args]))
    job = f" {job_link(public_url, command.job, command.job_kind or 'job')}" if command.job else ""
    return f"- {asked} by {login_text(command.by)}:{job} {outcome}"


def status_body(lines: list[str]) -> str:
    """The status comment: the commands asked, newest last."""
    return "\n".join([STATUS_MARK, "**tvm-repro commands** (newest last):", "", *lines, ""])
