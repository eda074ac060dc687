"""KINDS: every job kind's name -> its handler (tvmrepro.jobs.kind.Kind), the one place the
service, the worker, the command line and the page find what a kind does.

    submit (service/jobs.py)   the request union's member for the kind, then `Kind.start`
    read (service/jobs.py)     `Kind.read`: the common view (tvmrepro.jobs.views) + the answer
    after a run (worker/tasks.py, the claim carries the kind)   `Kind.after_run`
    the worker's run           a narrowing where `Kind.narrowing` (worker/narrowing/run.py)
    report.md (tvmrepro.jobs.report)   `Kind.report` below the common part (alone: `parts`)
    the page (service/web.py)  `Kind.template`
    `tvmrepro wait` (cli/commands/jobs.py)      `Kind.cli`

Adding a kind takes: a package tvmrepro/jobs/<kind>/ (its name as a constant in __init__.py,
its logic, its store-driven steps, and handler.py with its Kind), one line here, one member
of the request union (tvmrepro.api.requests) and a field of the view if it has an answer
(tvmrepro.api.views), a store module for its rows (tvmrepro/store/) with a migration
(tvmrepro/store/migrations/versions/), and a CLI command that submits it and the function
its `cli` names. Nothing else lists the kinds.
"""

from __future__ import annotations

from typing import Any

from tvmrepro.jobs.bisect.handler import BISECT_KIND
from tvmrepro.jobs.kind import Kind
from tvmrepro.jobs.narrow.handler import EXTRACT_KIND, REDUCE_KIND
from tvmrepro.jobs.run.handler import RUN_KIND
from tvmrepro.jobs.tracker.handler import SWEEP_KIND, TRIAGE_KIND

KINDS: dict[str, Kind[Any]] = {kind.name: kind for kind in (
    RUN_KIND, BISECT_KIND, REDUCE_KIND, EXTRACT_KIND, TRIAGE_KIND, SWEEP_KIND)}
