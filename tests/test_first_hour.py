"""A new user's first hour: a fresh clone, a home that does not exist, the README's command.

`make up` (what the README says runs the service) sets the clone up, provisions one CPU
environment of each minor release into the new home and serves them; the founding case
then goes to every served release and the report's first line says it fails on each.
Only the package cache is shared with the test session (a download per wheel, ever).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO, case_path
from tests.service.stack import free_port
from tvmrepro.environments import default_catalog
from tvmrepro.settings import Settings

pytestmark = [pytest.mark.tvm, pytest.mark.timeout(1500)]
MISSING = "fused_relax_nn_attention_cutlass_gv"


def _served(url: str) -> set[str]:
    try:
        envs = httpx.get(f"{url}/api/v1/environments", timeout=10).json()["environments"]
    except (httpx.TransportError, ValueError):
        return set()
    return {env["id"] for env in envs if env["workers"]}


def test_make_up_in_a_fresh_clone_answers_on_every_release(tmp_path: Path,
                                                            settings: Settings) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    home, port = tmp_path / "not-yet" / "home", free_port()
    environ = {k: v for k, v in os.environ.items()
               if k not in ("REDIS_URL", "DATABASE_URL", "VIRTUAL_ENV")
               and not k.startswith("TVMREPRO_")}
    environ.update(TVMREPRO_HOME=str(home), TVMREPRO_PORT=str(port),
                   TVMREPRO_PACKAGE_CACHE=str(settings.cache_dir))
    log = open(tmp_path / "make-up.log", "wb")  # noqa: SIM115  # the child writes to it
    up = subprocess.Popen(["make", "up"], cwd=clone, env=environ, stdout=log,
                          stderr=subprocess.STDOUT, start_new_session=True)
    url, wanted = f"http://127.0.0.1:{port}", {e.id for e in default_catalog().spanning("cpu")}
    try:
        deadline = time.monotonic() + 1200
        while _served(url) != wanted:
            assert up.poll() is None, (tmp_path / "make-up.log").read_text()[-4000:]
            assert time.monotonic() < deadline, (tmp_path / "make-up.log").read_text()[-4000:]
            time.sleep(2)
        proc = subprocess.run([str(clone / ".venv" / "bin" / "tvmrepro"), "run",
                               str(case_path("tvm-17357/case.json")), "--server", url, "--json"],
                              env=environ, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        job = json.loads(proc.stdout)["job"]
        assert sorted(job["environments"]) == sorted(wanted)
        once = [r for r in json.loads(proc.stdout)["runs"] if r["variant"] == "fusetir-once"]
        assert {(r["status"], r["stage"]) for r in once} == {("error", "vm_init")}
        assert all(MISSING in (r["message"] or "") for r in once)
        first = httpx.get(f"{url}/api/v1/jobs/{job['id']}/report.md").text.splitlines()[0]
        assert first.startswith("**`fusetir-once` fails (error) on every tested release ("), first
        assert "3 release(s)" in first
        assert (home / "tvmrepro.sqlite").is_file()
        _a_torch_report_answers(clone, url, environ, wanted, tmp_path / "make-up.log")
        _a_bisection_has_its_window_and_suspects(clone, url, environ, wanted)
    finally:
        os.killpg(up.pid, signal.SIGTERM)
        up.wait(60)


def _a_bisection_has_its_window_and_suspects(clone: Path, url: str, environ: dict[str, str],
                                             served: set[str]) -> None:
    """A real change between two served releases (apache/tvm#20116 fixed it in 0.27), bisected
    over HTTP: the clone's own history (nothing beside it) gives its commit window and
    suspects, kept with the job and shown in its Markdown report."""
    proc = subprocess.run([str(clone / ".venv" / "bin" / "tvmrepro"), "bisect",
                           str(case_path("relax-adaptive-avg-pool2d-nested-init/case.json")),
                           "--oracle", "output", "--reference", "tvm-0.27.0.post1-cpu",
                           *(f"--env={env}" for env in sorted(served)), "--server", url, "--json"],
                          env=environ, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (change,) = json.loads(proc.stdout)["transitions"]
    assert (change["before"], change["after"]) == ("tvm-0.26.0-cpu", "tvm-0.27.0.post1-cpu")
    assert change["window"]["commits"] > 0 and change["suspects"], change
    job = httpx.get(f"{url}/api/v1/jobs", timeout=10).json()["jobs"][0]
    stored = httpx.get(f"{url}/api/v1/jobs/{job['id']}", timeout=10).json()["bisect"]
    assert stored["transitions"][0]["suspects"] == change["suspects"]
    report = httpx.get(f"{url}/api/v1/jobs/{job['id']}/report.md", timeout=10).text
    assert "Commit window:" in report and f"#{change['suspects'][0]['pr']}" in report, report


def _a_torch_report_answers(clone: Path, url: str, environ: dict[str, str], wanted: set[str],
                            log: Path) -> None:
    """A report that builds its model with torch.export runs as written on every served release,
    in the frontend flavour the worker made (it said so in its log) with no step of the user's."""
    started = time.monotonic()
    proc = subprocess.run([str(clone / ".venv" / "bin" / "tvmrepro"), "run",
                           str(case_path("frontend/export-mm-default/report.py")),
                           "--server", url, "--json"],
                          env=environ, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(proc.stdout)["runs"]
    assert {r["environment"] for r in runs} == wanted
    assert {(r["status"], r["frontends"]["torch"]) for r in runs} == {("ok", "2.13.0")}, runs
    assert "installing torch 2.13.0" in log.read_text()
    print(f"torch report over HTTP on a fresh home: {time.monotonic() - started:.1f} s")
