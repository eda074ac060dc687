"""Known issues: the signature of each triaged report's bug, kept with its issue, so that a new
report failing with that signature is named a likely duplicate of the issue."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from tvmrepro.api.issues import KnownIssue
from tvmrepro.results import FAILING

if TYPE_CHECKING:
    from tvmrepro.jobs.tracker.importing import ImportedReport
    from tvmrepro.jobs.tracker.triage import TriageAnswer

# A crash, a timeout or an oom has no Python error to tell it from another: its signature
# carries the stage it happened at, so that a crash in the VM and one while parsing are not
# one bug.
_WITH_STAGE = ("crash", "timeout", "oom")


def bug_signature(status: str, signature: str | None, stage: str | None) -> str | None:
    """The signature a run's failure is known by, in triage and among known issues (None: the
    run did not fail)."""
    if status not in FAILING:
        return None
    if status in _WITH_STAGE and stage:
        return f"{signature or status} at {stage}"
    return signature


def result_bug_signature(result: dict[str, Any] | None) -> str | None:
    """`bug_signature` of a stored result (a job's run's summary; None while it has none)."""
    if not result:
        return None
    return bug_signature(str(result.get("status")), result.get("signature"), result.get("stage"))


def known_issues(reports: list[ImportedReport], answer: TriageAnswer) -> list[KnownIssue]:
    """The issues among `reports` that a triage saw fail, each with its bug's signature (that
    of its newest failing run: a fixed bug is still known by it)."""
    signature_of_group = {group.id: group.signature for group in answer.groups}
    found = []
    for report, line in zip(reports, answer.reports, strict=True):
        signature = signature_of_group.get(line.group) if line.group is not None else None
        if report.number is None or signature is None:
            continue
        found.append(KnownIssue(number=report.number, url=report.url, title=report.title,
                                state=report.state, signature=signature))
    return found


def likely_duplicates(signatures: Iterable[str], known: list[KnownIssue],
                      own_title: str = "") -> list[KnownIssue]:
    """The known issues that fail with one of `signatures`, in their order then by number. A
    job made from an issue's own report (titled "#N", as import names it, or run from the
    file import wrote: N.py, N.json) is no duplicate of that issue."""
    own = re.fullmatch(r"#?(\d+)(?:\.py|\.json)?", own_title.strip())
    own_number = int(own.group(1)) if own else None
    by_signature: dict[str, list[KnownIssue]] = {}
    for issue in sorted(known, key=lambda issue: issue.number):
        by_signature.setdefault(issue.signature, []).append(issue)
    found: dict[int, KnownIssue] = {}
    for signature in signatures:
        for issue in by_signature.get(signature, []):
            if issue.number != own_number:
                found.setdefault(issue.number, issue)
    return list(found.values())
