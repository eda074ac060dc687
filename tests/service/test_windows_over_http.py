"""A bisect job keeps the commit windows and suspects that its command computed from a history
of its own (`bisect --history`): the job's view and its report.md hold them, as the terminal
showed them; only its submitter gives them, and their links are the service's own."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.bisect_support import fixed_in_027, start_worker_for
from tests.conftest import HISTORY_INDEX
from tests.service.stack import Stack, dump
from tvmrepro.environments import default_catalog
from tvmrepro.settings import Settings

pytestmark = [pytest.mark.tvm, pytest.mark.timeout(900)]
ENVS = ["tvm-0.26.0-cpu", "tvm-0.27.0rc0-cpu"]


def windows_path(job_id: str) -> str:
    return f"/api/v1/jobs/{job_id}/windows"


def test_the_windows_a_command_computed_are_kept_with_its_job(
        stack: Stack, settings: Settings, tmp_path: Path) -> None:
    from worker.environments.provision import provision

    for env_id in ENVS:
        provision(settings, default_catalog().get(env_id))
    stack.start_api()
    start_worker_for(stack, ENVS)
    mine = tmp_path / "mine.jsonl.gz"  # another history than the service's: its name shows
    mine.write_bytes(HISTORY_INDEX.read_bytes())
    script = tmp_path / "repro.py"
    script.write_text(fixed_in_027(0, f"kept {time.time()}")["script"])
    client_home = tmp_path / "client"  # where the command keeps the job's cancel token
    cli = Path(sys.executable).parent / "tvmrepro"
    proc = subprocess.run([str(cli), "bisect", str(script), "--env", ENVS[0], "--env", ENVS[1],
                           "--history", str(mine), "--json"], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TVMREPRO_SERVER": stack.url,
                                            "TVMREPRO_HOME": str(client_home)})
    assert proc.returncode == 0, proc.stderr
    job_id = re.search(r"job (\w+) at ", proc.stderr)
    assert job_id is not None, proc.stderr
    printed = json.loads(proc.stdout)["transitions"][0]
    assert f"history: {mine}, newest commit 2026-08-22" in proc.stderr, proc.stderr
    assert "not kept" not in proc.stderr, proc.stderr

    view = stack.http.get(f"/api/v1/jobs/{job_id[1]}").json()
    change = view["bisect"]["transitions"][0]
    assert change["window"]["history"] == str(mine), dump(change)  # not the service's own
    assert (change["window"], change["suspects"]) == (printed["window"], printed["suspects"])
    assert change["window"]["commits"] == 35 and change["suspects"]
    report = stack.http.get(f"/api/v1/jobs/{job_id[1]}/report.md").text
    assert "  - Commit window: 35 commits from " in report, report
    assert f"  - History: `{mine}`, newest commit `2026-08-22`." in report
    first = change["suspects"][0]
    assert f"  - Suspect 1 (score {first['score']:.2f}): [#{first['pr']}]({first['url']}) " \
        in report, report
    check_only_the_submitter_gives_windows(stack, job_id[1], change, client_home)


def check_only_the_submitter_gives_windows(stack: Stack, job_id: str, change: dict[str, Any],
                                           client_home: Path) -> None:
    """Without the job's cancel token a PUT is refused; with it, a link is made from the
    commit, not taken as given; a transition the job has not is named."""
    first = change["suspects"][0]
    forged = {"transitions": [{"before": change["before"], "after": change["after"],
                               "window": change["window"],
                               "suspects": [{**first, "url": "javascript:alert(1)"}]}]}
    refused = stack.http.put(windows_path(job_id), json=forged)
    assert refused.status_code == 403, refused.text
    token = (client_home / "cancel-tokens" / job_id).read_text().strip()
    kept = stack.http.put(windows_path(job_id), json=forged, headers={"X-Cancel-Token": token})
    assert kept.status_code == 200, kept.text
    suspects = kept.json()["bisect"]["transitions"][0]["suspects"]
    assert [s["url"] for s in suspects] == [first["url"]]  # github.com/apache/tvm/pull/N
    other = {"transitions": [{**forged["transitions"][0], "after": "tvm-0.25.0-cpu"}]}
    wrong = stack.http.put(windows_path(job_id), json=other, headers={"X-Cancel-Token": token})
    assert wrong.status_code == 400 and wrong.json()["error"]["field"] == "transitions[0]"
