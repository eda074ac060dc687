"""Bisect jobs through the real service: API, Celery workers, real TVM on every CPU release."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from tests.bisect_support import (
    CPU_RELEASES,
    SKIP_RANGE,
    fixed_in_027,
    skip_in_the_middle,
    start_worker_for,
)
from tests.conftest import HISTORY_INDEX, NEW_ENV, OLD_ENV
from tests.service.conftest import own_backend
from tests.service.stack import Stack, dump, make_home
from tvmrepro.api.views import JobView
from tvmrepro.jobs.report import render_report
from tvmrepro.settings import Settings

pytestmark = [pytest.mark.tvm, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def cpu_releases(settings: Settings) -> list[str]:
    """Every CPU release, provisioned (about 100 MB each the first time)."""
    from tvmrepro.environments import default_catalog
    from worker.environments.provision import provision

    for env_id in CPU_RELEASES:
        provision(settings, default_catalog().get(env_id))
    return CPU_RELEASES


@pytest.fixture(scope="module")
def releases(cpu_releases: list[str], tmp_path_factory: pytest.TempPathFactory,
             test_home: Path) -> Iterator[Stack]:
    """The API and one worker serving every CPU release, on Redis and PostgreSQL, shared by the
    tests that only submit and read (each submits cases of its own)."""
    with own_backend("redis+postgres") as backend:
        running = Stack(backend, make_home(tmp_path_factory.mktemp("releases"), test_home))
        try:
            running.start_api()
            start_worker_for(running, cpu_releases)
            yield running
        finally:
            running.close()


def claimer_pid(run: dict[str, Any]) -> int:
    """The pid of the process that claimed a run (its token is host:pid:start time)."""
    return int(run["claimed_by"].split(":")[1])


def bisect_body(case: dict[str, Any], envs: list[str], **extra: Any) -> dict[str, Any]:
    """A bisect job's POST body."""
    return {"kind": "bisect", "case": case, "environments": envs, **extra}


def changes(found: dict[str, Any]) -> list[tuple[str, str, str, str, list[str]]]:
    """The transitions as tuples, for comparing."""
    return [(t["before"], t["after"], t["from"], t["to"], t["candidates"])
            for t in found["transitions"]]


def test_the_founding_case_is_bad_everywhere_with_one_signature(
        releases: Stack, founding_case: dict[str, Any], cpu_releases: list[str]) -> None:
    stack = releases
    job = stack.submit(bisect_body(founding_case, cpu_releases, variant="fusetir-once",
                                   oracle="signature"))
    assert job["bisect"]["progress"]["total"] == len(cpu_releases)
    done = stack.wait(job["id"], timeout=500)
    found = done["bisect"]
    assert done["status"] == "done" and found["finished"], dump(done)
    assert found["verdict"] == "unchanged" and found["transitions"] == [], dump(found)
    assert [p["environment"] for p in found["probes"]] == cpu_releases
    assert {p["verdict"] for p in found["probes"]} == {"bad"}
    assert {p["signature"] for p in found["probes"]} == {found["reference_signature"]}
    assert found["reference"] == cpu_releases[-1]
    assert "fused_relax_nn_attention_cutlass_gv" in found["reference_signature"]
    assert found["progress"] == {"done": 10, "total": 10}
    # The report renders as Markdown: the probes' table, every environment, the command.
    text = render_report(JobView.model_validate(done))
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    assert sum(t.type == "table_open" for t in tokens) >= 3  # matrix, probes, fingerprints
    html = MarkdownIt("commonmark").enable("table").render(text)
    assert all(f"<code>{env}</code>" in html for env in cpu_releases)
    assert "tvmrepro bisect case.json --variant fusetir-once" in text


def test_an_incompatible_release_in_the_middle_is_a_candidate_and_the_report_reproduces(
        releases: Stack, tmp_path: Path) -> None:
    stack = releases
    done = stack.wait(stack.submit(bisect_body(skip_in_the_middle(), SKIP_RANGE))["id"])
    found = done["bisect"]
    assert found["verdict"] == "inconclusive", dump(found)
    assert changes(found) == [(SKIP_RANGE[0], SKIP_RANGE[2], "bad", "good", [SKIP_RANGE[1]])], \
        dump(found)
    assert found["probes"][1]["status"] == "incompatible"
    assert found["probes"][1]["verdict"] == "skip"
    # The reproduce command of the report (GET report.md), run as written (the case saved as
    # case.json).
    response = stack.http.get(f"/api/v1/jobs/{done['id']}/report.md")
    assert response.status_code == 200, response.text
    text = response.text
    assert text == render_report(JobView.model_validate(done))
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    assert any(t.type == "table_open" for t in tokens)
    command = re.search(r"```sh\n(tvmrepro bisect .*)\n```", text)
    assert command is not None, text
    saved = re.search(r"<summary>case.json</summary>\n\n```json\n(.*?)\n```", text, re.S)
    assert saved is not None, text
    (tmp_path / "case.json").write_text(saved.group(1))
    words = shlex.split(command.group(1))
    cli = Path(sys.executable).parent / words[0]
    proc = subprocess.run([str(cli), *words[1:]], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "TVMREPRO_SERVER": stack.url}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stdout.split())
    assert (f"{SKIP_RANGE[0]} (bad) -> {SKIP_RANGE[2]} (good), candidates: {SKIP_RANGE[1]}"
            in said), proc.stdout
    assert "verdict: inconclusive" in said


def test_a_bisect_job_survives_kill_9_of_the_process_running_a_probe(stack: Stack) -> None:
    stack.start_api()
    start_worker_for(stack, [OLD_ENV, NEW_ENV], concurrency=1)
    job = stack.submit(bisect_body(fixed_in_027(3, "kill"), [OLD_ENV, NEW_ENV]))
    run = stack.wait_running(job["id"])
    os.kill(claimer_pid(run), signal.SIGKILL)
    done = stack.wait(job["id"], timeout=180)
    found = done["bisect"]
    assert done["status"] == "done", dump(done)
    assert found["verdict"] == "changed", dump(found)
    assert (found["last_before_change"], found["first_changed"]) == (OLD_ENV, NEW_ENV)
    killed = next(r for r in done["runs"] if r["id"] == run["id"])
    assert killed["deliveries"] == 2  # the probe was run again
    assert len(stack.result_rows(job["id"])) == 2


def test_binary_strategy_probes_the_ends_then_halves(releases: Stack,
                                                     cpu_releases: list[str]) -> None:
    stack = releases
    job = stack.submit(bisect_body(fixed_in_027(0, "binary"), cpu_releases, strategy="binary"))
    assert job["environments"] == [cpu_releases[0], cpu_releases[-1]]  # both ends first
    done = stack.wait(job["id"], timeout=300)
    found = done["bisect"]
    assert found["verdict"] == "changed", dump(found)
    assert (found["last_before_change"], found["first_changed"]) == ("tvm-0.26.0-cpu",
                                                                     "tvm-0.27.0rc0-cpu")
    assert len(done["runs"]) < len(cpu_releases)  # halves, not every release
    assert found["progress"]["done"] == found["progress"]["total"] == len(done["runs"])
    by_order = [r["environment"] for r in sorted(done["runs"], key=lambda r: r["id"])]
    assert set(by_order) == set(done["environments"])


def test_bad_bisect_requests_name_the_field(releases: Stack, founding_case: dict[str, Any]) -> None:
    stack = releases
    cases = [
        (bisect_body(founding_case, [OLD_ENV, NEW_ENV]), "variant"),  # two variants: name one
        (bisect_body(founding_case, [OLD_ENV, NEW_ENV], variant="x"), "variant"),
        (bisect_body(founding_case, [OLD_ENV, NEW_ENV], variant="fusetir-once",
                     oracle="regex:("), "oracle"),
        (bisect_body(founding_case, [OLD_ENV, NEW_ENV], variant="fusetir-once",
                     reference="tvm-0.26.0-cpu"), "reference"),
        (bisect_body(founding_case, [OLD_ENV, NEW_ENV], variant="fusetir-once", repeat=0),
         "repeat"),
        (bisect_body(founding_case, [OLD_ENV, NEW_ENV], variant="fusetir-once",
                     strategy="linear"), "strategy"),
        (bisect_body(founding_case, [OLD_ENV], variant="fusetir-once"), "environments"),
        ({"kind": "run", "case": founding_case, "environments": [OLD_ENV], "oracle": "output"},
         "oracle"),
    ]
    for body, field in cases:
        response = stack.http.post("/api/v1/jobs", json=body)
        assert response.status_code == 400, (field, response.text)
        assert response.json()["error"]["field"] == field, response.text


def test_cached_probes_are_reused_but_repeats_run_again(releases: Stack) -> None:
    stack = releases
    case = fixed_in_027(0, f"cache {time.time()}")
    first = stack.wait(stack.submit(bisect_body(case, [OLD_ENV, NEW_ENV]))["id"])
    again = stack.wait(stack.submit(bisect_body(case, [OLD_ENV, NEW_ENV], repeat=2))["id"])
    assert changes(again["bisect"]) == changes(first["bisect"]) != []
    cached = [r["cached"] for r in again["runs"]]
    assert cached.count(True) == 2 and cached.count(False) == 2, dump(again["runs"])
    assert all(len(p["runs"]) == 2 for p in again["bisect"]["probes"])


# Real behaviour changes between releases (tests/cases/*/NOTES.md says how each was found):
# case -> (extra options, the transitions every CPU release bisects to).
REAL_CHANGES: dict[str, tuple[dict[str, Any], list[tuple[str, str, str, str]]]] = {
    "relax-prod-zero-extent-axis": (
        {"oracle": "output", "reference": "tvm-0.27.0.post1-cpu"},
        [("tvm-0.25.0.post1-cpu", "tvm-0.26.0rc0-cpu", "bad", "good")]),
    "relax-adaptive-avg-pool2d-nested-init": (
        {"oracle": "output", "reference": "tvm-0.27.0.post1-cpu"},
        [("tvm-0.26.0-cpu", "tvm-0.27.0rc0-cpu", "bad", "good")]),
    "relax-max-0d-tensor": (
        {},
        [("tvm-0.25.0rc0-cpu", "tvm-0.25.0rc1-cpu", "bad", "good")]),
    "tirx-specialize-decl-buffer-alias": (
        {},
        [("tvm-0.25.0.post1-cpu", "tvm-0.26.0rc0-cpu", "good", "bad"),
         ("tvm-0.26.0-cpu", "tvm-0.27.0rc0-cpu", "bad", "good")]),
}


# The PR of each transition (NOTES.md), among the three best suspects (README, "Since when, to
# the commit": the measured ranks).
TRUE_PRS = {("relax-prod-zero-extent-axis", "tvm-0.26.0rc0-cpu"): 19680,
            ("relax-adaptive-avg-pool2d-nested-init", "tvm-0.27.0rc0-cpu"): 20116,
            ("relax-max-0d-tensor", "tvm-0.25.0rc1-cpu"): 19683,
            ("tirx-specialize-decl-buffer-alias", "tvm-0.26.0rc0-cpu"): 20079,
            ("tirx-specialize-decl-buffer-alias", "tvm-0.27.0rc0-cpu"): 20090}


def test_real_behaviour_changes_bisect_to_the_right_releases(
        releases: Stack, cpu_releases: list[str]) -> None:
    from tests.conftest import case_path

    stack = releases
    jobs = {}
    for name, (options, _) in REAL_CHANGES.items():
        case = json.loads(case_path(f"{name}/case.json").read_text())
        jobs[name] = stack.submit(bisect_body(case, cpu_releases, **options))["id"]
    for name, (_, expected) in REAL_CHANGES.items():
        found = stack.wait(jobs[name], timeout=500)["bisect"]
        assert [c[:4] for c in changes(found)] == expected, (name, dump(found))
        assert all(not c[4] for c in changes(found))  # no candidates: every release decided
        assert found["verdict"] == ("changed" if len(expected) == 1 else "non_monotonic")
        if found["verdict"] == "changed":
            assert (found["last_before_change"], found["first_changed"]) == expected[0][:2]
        for change in found["transitions"]:  # the stack's history: each transition's suspects
            top = [s["pr"] for s in change["suspects"][:3]]
            assert TRUE_PRS[(name, change["after"])] in top, (name, change["after"], top)


def test_the_command_line_s_history_gives_a_service_job_its_suspects(
        releases: Stack, tmp_path: Path) -> None:
    mine = tmp_path / "mine.jsonl.gz"  # another history than the service's: its name shows
    mine.write_bytes(HISTORY_INDEX.read_bytes())
    script = tmp_path / "repro.py"
    script.write_text(fixed_in_027(0, f"history {time.time()}")["script"])
    cli = Path(sys.executable).parent / "tvmrepro"
    proc = subprocess.run([str(cli), "bisect", str(script), "--env", "tvm-0.26.0-cpu", "--env",
                           "tvm-0.27.0rc0-cpu", "--history", str(mine), "--json"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TVMREPRO_SERVER": releases.url})
    assert proc.returncode == 0, proc.stderr
    change = json.loads(proc.stdout)["transitions"][0]
    assert change["window"]["history"] == str(mine)
    assert change["window"]["open_ended"] and change["window"]["commits"] == 35
