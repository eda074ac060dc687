"""A Relay-era report (apache/tvm#10398, tests/cases/tvm-10398) triaged on a release without
Relay: `incompatible`, and the answer says why (Relay-era, removed in 0.20.0), in its JSON, on
the command line and in the Markdown report."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from cli.commands.tracker import print_answer
from tests.conftest import NEW_ENV, case_path
from tvmrepro.environments import Environment, default_catalog
from tvmrepro.jobs.tracker.importing import ImportedReport, export_entry
from tvmrepro.jobs.tracker.report import render_triage
from tvmrepro.jobs.tracker.triage import Verdict
from tvmrepro.jobs.tracker.triage_job import triage_job_answer
from tvmrepro.settings import Settings

if TYPE_CHECKING:
    from worker.runtimes.local import LocalRuntime

pytestmark = pytest.mark.tvm
WHY = ("RelayRemoved: Relay (tvm.relay) was removed in TVM 0.20.0 (TVM pull request #17656); "
       "this Relay-era script needs it")


def relay_report() -> ImportedReport:
    """#10398 as an export gives it: its script (the issue's first block), the crash it quotes."""
    script = case_path("tvm-10398/report.py").read_text()
    body = (f"Below is my script:\n```\n{script}```\nCrash message is\n"
            "```\nSegmentation fault (core dumped)\n```\n")
    return export_entry({"number": 10398, "state": "CLOSED", "body": body,
                         "title": "[Bug] InferType crashes when a relay function calls an global "
                                  "identity function",
                         "url": "https://github.com/apache/tvm/issues/10398"}, 0)


@pytest.fixture(scope="module")
def runtime(settings: Settings) -> Iterator[tuple[Environment, LocalRuntime]]:
    """The newest founding environment, provisioned, and a local runtime of cold sandboxes."""
    from worker.environments.provision import provision
    from worker.runtimes.local import LocalRuntime

    env = default_catalog().get(NEW_ENV)
    provision(settings, env)
    local = LocalRuntime(settings.model_copy(update={"warm_sandboxes": 0}))
    yield env, local
    local.close()


def test_a_relay_era_report_is_incompatible_and_says_so(
        runtime: tuple[Environment, LocalRuntime], capsys: pytest.CaptureFixture[str]) -> None:
    from worker.runner import run_variant

    env, local = runtime
    report = relay_report()
    assert report.script is not None and report.no_code is None  # Relay is TVM's own import
    result = run_variant(report.case(), "script", env, local)
    assert result.status == "incompatible", result.log.stderr[-2000:]
    answer = triage_job_answer([report], ["job-1"], [[result.to_json()]], [NEW_ENV])
    line = answer.reports[0]
    assert (line.verdict, line.statuses, line.incompatible) == \
        (Verdict.INCOMPATIBLE, {NEW_ENV: "incompatible"}, WHY)
    assert answer.audit == [] and answer.groups == []  # not measured: neither fixed nor open
    assert answer.answer().to_json()["reports"][0]["incompatible"] == WHY
    print_answer(answer.answer())
    assert capsys.readouterr().out == \
        f"on {NEW_ENV}\n#10398 CLOSED: incompatible ({NEW_ENV}: incompatible): {WHY}\n"
    markdown = render_triage(answer, "job-t", "relay")
    assert f"| incompatible: `{WHY}` |" in markdown
