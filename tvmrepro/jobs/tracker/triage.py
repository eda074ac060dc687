"""Triage as pure functions over runs: each report's verdict, the groups of reports that fail
with one signature (one bug, many reports), and the audit of the issues' states."""

from __future__ import annotations

import difflib
import re
from enum import Enum, IntEnum
from typing import Any

from pydantic import BaseModel, Field

from tvmrepro.jobs.tracker.importing import ImportedReport
from tvmrepro.jobs.tracker.stages import earlier
from tvmrepro.results import FAILING, NOT_MEASURED, Status

# How alike a quoted error's message and a run's must be to be one error (difflib's ratio):
# releases reword messages ("PackedFunc" became "ffi::Function") without changing the bug.
SAME_MESSAGE_RATIO = 0.6
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
# TVM's own checks failing: ICHECK raises InternalError ("Check failed: ..."; older releases
# raised TVMError with the same words).
_INTERNAL = re.compile(r"(?:^|\.)InternalError\b|\bCheck failed\b")
# The classes TVM raises to tell its user what is wrong with the input: TVMScript's
# diagnostics, ValueError and TypeError, and TVMError (older releases' one class for them).
_DIAGNOSTIC = re.compile(r"^(?:[\w.]*\.)?(?:DiagnosticError|ValueError|TypeError|TVMError)\s*:")


class Kind(IntEnum):
    """How badly a run failed, or the quoted error says the report's run did (worst last)."""

    OK = 0
    DIAGNOSTIC = 1  # an error that says what is wrong with the input (ValueError, TVMError)
    ERROR = 2  # any other exception (AttributeError, AssertionError, ...)
    INTERNAL = 3  # TVM's own invariant broken (InternalError), or no answer at all (timeout)
    CRASH = 4  # the process died by a signal (segfault, abort)


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
    stage: str | None = None  # where it ended ("parse", "pass:2:FuseOps", "build")
    # The environment's own defect where the run failed as its canary does (a broken wheel):
    # such a run says nothing of the report and is left out of its verdict.
    environment_defect: str | None = None


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
    # The environments whose runs were left out, each with its defect (a broken wheel).
    environment_defects: dict[str, str] = Field(default_factory=dict)


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
    # What it is over (tvmrepro.choice): the environments, why those, and the releases of
    # their device it never probed (a verdict says nothing of them).
    environments: list[str] = Field(default_factory=list, description="oldest first")
    environments_why: str | None = None
    not_probed: list[str] = Field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The answer as docs/contract.md shows it (an audit entry's `since` only where known)."""
        data = self.model_dump(mode="json")
        data["audit"] = [entry.model_dump(mode="json", exclude_none=True) | {"number": entry.number}
                         for entry in self.audit]
        return data


def error_kind(line: str) -> Kind:
    """The kind of an error's line ("InternalError: Check failed: ...", "ValueError: ...")."""
    first = line.split("\n", 1)[0]
    if _INTERNAL.search(first):
        return Kind.INTERNAL
    return Kind.DIAGNOSTIC if _DIAGNOSTIC.match(first) else Kind.ERROR


def quoted_kind(report: ImportedReport) -> Kind | None:
    """The kind of the error the report quotes, or None where it quotes none."""
    if report.quoted_error_type == "crash":
        return Kind.CRASH
    return error_kind(report.quoted_error) if report.quoted_error else None


def run_kind(run: TriageRun) -> Kind | None:
    """The kind of the run's end, or None for an error whose line the run did not keep."""
    if run.status not in FAILING:
        return Kind.OK
    if run.status == Status.CRASH:
        return Kind.CRASH
    if run.status != Status.ERROR:  # a timeout, an oom: no diagnostic either
        return Kind.INTERNAL
    return error_kind(run.error) if run.error else None


def quoted_stage(report: ImportedReport, runs: list[TriageRun]) -> str | None:
    """Where the quoted error is raised: the stage of the newest run that ends with it, else
    the one its quoted traceback shows."""
    quoting = [run.stage for run in runs
               if run.stage and run.status == Status.ERROR and matches_quoted(report, run)]
    return quoting[-1] if quoting else report.quoted_stage


def fails(report: ImportedReport, run: TriageRun, where: str | None = None) -> bool:
    """Whether the run shows the report's bug (`where`: the quoted error's stage). A report is
    about what it quotes, so a run shows it where it fails at least as badly (a crash, TVM's
    own check failing, any other exception, then a diagnostic), and not where the same script
    now stops less badly (a segfault now a Python error, an InternalError now a ValueError) or
    stops with a diagnostic before the stage the quoted error came from (the input rejected
    up front): those are the fix, unless the run ends with the very error quoted."""
    if run.status not in FAILING:
        return False
    quoted, now = quoted_kind(report), run_kind(run)
    if now is None:  # an error whose class is not known: less than a crash, else the bug
        return quoted != Kind.CRASH
    if quoted is None or matches_quoted(report, run):
        return True
    if now < quoted:
        return False
    return not (now == Kind.DIAGNOSTIC and earlier(run.stage, where))


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


def sound(runs: list[TriageRun]) -> list[TriageRun]:
    """The runs that say something of the report: not those its environment's defect decided."""
    return [run for run in runs if not run.environment_defect]


def verdict_of(report: ImportedReport, runs: list[TriageRun]) -> tuple[Verdict, str | None]:
    """The verdict and, for a fix, the first environment (oldest first) where it no longer fails."""
    if report.script is None:
        return Verdict.NO_CODE, None
    runs = sound(runs)
    measured = [run for run in runs if run.status not in NOT_MEASURED]
    # Whether it fails now is the newest environment's answer alone: a script that newest
    # release cannot run (its API moved on) neither reproduces nor is fixed there.
    if not measured or runs[-1].status in NOT_MEASURED:
        return Verdict.INCOMPATIBLE, None
    where = quoted_stage(report, measured)
    if fails(report, measured[-1], where):
        return Verdict.REPRODUCES, None
    failed = [i for i, run in enumerate(measured) if fails(report, run, where)]
    if failed:
        return Verdict.FIXED, measured[failed[-1] + 1].env
    return Verdict.NEVER_REPRODUCED, None


def bug_signature(report: ImportedReport, runs: list[TriageRun]) -> str | None:
    """The signature of the report's bug: that of its newest run that fails."""
    runs = sound(runs)
    where = quoted_stage(report, runs)
    failing = [run for run in runs if fails(report, run, where)]
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
        measured = sound(report_runs)
        newest = measured[-1] if measured else None
        lines.append(ReportTriage(
            number=report.number, state=report.state, verdict=verdict,
            quoted_error_reproduced=(matches_quoted(report, newest)
                                     if newest and report.quoted_error else None),
            since=since, group=group_of.get(signature) if signature else None,
            signature=newest.signature if newest and newest.status in FAILING else None,
            statuses={run.env: run.status for run in report_runs}, no_code=report.no_code,
            incompatible=newest.error if newest and verdict == Verdict.INCOMPATIBLE else None,
            environment_defects={run.env: run.environment_defect for run in report_runs
                                 if run.environment_defect}))
    audit = [entry for line in lines if (entry := audit_entry(line)) is not None]
    return TriageAnswer(reports=lines, groups=groups, audit=audit)
