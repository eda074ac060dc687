"""Triage as pure functions over runs: each report's verdict, the groups of reports that fail
with one signature (one bug, many reports), and the audit of the issues' states."""

from __future__ import annotations

import difflib
import re
from enum import Enum
from typing import Any

from pydantic import BaseModel, Field

from tvmrepro.jobs.tracker.importing import ImportedReport
from tvmrepro.results import FAILING, NOT_MEASURED

# How alike a quoted error's message and a run's must be to be one error (difflib's ratio):
# releases reword messages ("PackedFunc" became "ffi::Function") without changing the bug.
SAME_MESSAGE_RATIO = 0.6
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


class Verdict(str, Enum):
    """What a report's runs say of it."""

    REPRODUCES = "reproduces"  # fails on the newest environment
    FIXED = "fixed"  # failed on an older one, not on the newest
    NEVER_REPRODUCED = "never_reproduced"
    INCOMPATIBLE = "incompatible"
    NO_CODE = "no_code"


class Finding(str, Enum):
    """An issue whose state its runs contradict."""

    OPEN_BUT_FIXED = "open_but_fixed"
    CLOSED_BUT_REPRODUCES = "closed_but_reproduces"


class TriageRun(BaseModel):
    """One report's run on one environment, as triage needs it."""

    env: str
    status: str
    signature: str | None = None
    error: str | None = None  # "InternalError: Check failed: ..." (the message's first line)


class ReportTriage(BaseModel):
    """One report's line of the answer."""

    number: int | None
    state: str | None
    verdict: Verdict
    quoted_error_reproduced: bool | None
    since: str | None
    group: int | None
    signature: str | None
    statuses: dict[str, str]
    no_code: str | None = None
    # Why the newest environment could not run the script, where the verdict is incompatible:
    # its run's error ("RelayRemoved: Relay (tvm.relay) was removed in TVM 0.20.0 ...").
    incompatible: str | None = None


class Group(BaseModel):
    """Reports that fail with one signature; the representative has the smallest script."""

    id: int
    signature: str
    reports: list[int | None]
    representative: int | None


class AuditEntry(BaseModel):
    """An issue in the wrong state."""

    number: int | None
    state: str | None
    finding: Finding
    # Only where a fix was seen (docs/contract.md, "Tracker"), in a triage job's JSON too.
    since: str | None = Field(default=None, exclude_if=lambda v: v is None)


class TriageAnswer(BaseModel):
    """What `tvmrepro triage --json` prints."""

    reports: list[ReportTriage]
    groups: list[Group]
    audit: list[AuditEntry]

    def to_json(self) -> dict[str, Any]:
        """The answer as docs/contract.md shows it (an audit entry's `since` only where known)."""
        data = self.model_dump(mode="json")
        data["audit"] = [entry.model_dump(mode="json", exclude_none=True) | {"number": entry.number}
                         for entry in self.audit]
        return data


def fails(run: TriageRun, quoted_crash: bool) -> bool:
    """Whether the run shows the report's bug. A report that quotes a crash is about the crash:
    the same script now stopped by a clean error is the fix."""
    if quoted_crash:
        return run.status == "crash"
    return run.status in FAILING


def _normalised(text: str) -> str:
    text = _ADDRESS.sub("0x", text).split(":", 1)[-1] if ":" in text else text
    return " ".join(text.split()).lower()


def matches_quoted(report: ImportedReport, run: TriageRun) -> bool:
    """Whether the run ends with the error the report quotes."""
    if report.quoted_error_type == "crash":
        return run.status == "crash"
    if run.status not in FAILING or run.error is None or report.quoted_error is None:
        return False
    quoted, now = _normalised(report.quoted_error), _normalised(run.error)
    if quoted and now and (quoted in now or now in quoted):
        return True
    return difflib.SequenceMatcher(None, quoted[:200], now[:200]).ratio() >= SAME_MESSAGE_RATIO


def verdict_of(report: ImportedReport, runs: list[TriageRun]) -> tuple[Verdict, str | None]:
    """The verdict and, for a fix, the first environment (oldest first) where it no longer fails."""
    if report.script is None:
        return Verdict.NO_CODE, None
    measured = [run for run in runs if run.status not in NOT_MEASURED]
    # Whether it fails now is the newest environment's answer alone: a script that newest
    # release cannot run (its API moved on) neither reproduces nor is fixed there.
    if not measured or runs[-1].status in NOT_MEASURED:
        return Verdict.INCOMPATIBLE, None
    crash = report.quoted_error_type == "crash"
    if fails(measured[-1], crash):
        return Verdict.REPRODUCES, None
    failed = [i for i, run in enumerate(measured) if fails(run, crash)]
    if failed:
        return Verdict.FIXED, measured[failed[-1] + 1].env
    return Verdict.NEVER_REPRODUCED, None


def bug_signature(report: ImportedReport, runs: list[TriageRun]) -> str | None:
    """The signature of the report's bug: that of its newest run that fails."""
    crash = report.quoted_error_type == "crash"
    failing = [run for run in runs if fails(run, crash)]
    return failing[-1].signature if failing else None


def _groups(reports: list[ImportedReport], signatures: list[str | None]) -> list[Group]:
    by_signature: dict[str, list[int]] = {}
    for index, signature in enumerate(signatures):
        if signature is not None:
            by_signature.setdefault(signature, []).append(index)
    groups = []
    for group_id, (signature, members) in enumerate(by_signature.items(), start=1):
        smallest = min(members, key=lambda i: (len(reports[i].script or ""), reports[i].number or 0))
        groups.append(Group(id=group_id, signature=signature,
                            reports=[reports[i].number for i in members],
                            representative=reports[smallest].number))
    return groups


def audit_entry(line: ReportTriage) -> AuditEntry | None:
    """The finding on a report whose state its runs contradict, or None."""
    state = (line.state or "").upper()
    if state == "OPEN" and line.verdict in (Verdict.FIXED, Verdict.NEVER_REPRODUCED):
        return AuditEntry(number=line.number, state=line.state, finding=Finding.OPEN_BUT_FIXED,
                          since=line.since)
    if state == "CLOSED" and line.verdict == Verdict.REPRODUCES:
        return AuditEntry(number=line.number, state=line.state,
                          finding=Finding.CLOSED_BUT_REPRODUCES)
    return None


def triage(reports: list[ImportedReport], runs: list[list[TriageRun]]) -> TriageAnswer:
    """The answer for `reports`, given each one's runs (environments oldest first; none for a
    report without code)."""
    signatures = [bug_signature(r, rs) for r, rs in zip(reports, runs, strict=True)]
    groups = _groups(reports, signatures)
    group_of = {group.signature: group.id for group in groups}
    lines = []
    for report, report_runs, signature in zip(reports, runs, signatures, strict=True):
        verdict, since = verdict_of(report, report_runs)
        newest = report_runs[-1] if report_runs else None
        lines.append(ReportTriage(
            number=report.number, state=report.state, verdict=verdict,
            quoted_error_reproduced=(matches_quoted(report, newest)
                                     if newest and report.quoted_error else None),
            since=since, group=group_of.get(signature) if signature else None,
            signature=newest.signature if newest and newest.status in FAILING else None,
            statuses={run.env: run.status for run in report_runs}, no_code=report.no_code,
            incompatible=newest.error if newest and verdict == Verdict.INCOMPATIBLE else None))
    audit = [entry for line in lines if (entry := audit_entry(line)) is not None]
    return TriageAnswer(reports=lines, groups=groups, audit=audit)
