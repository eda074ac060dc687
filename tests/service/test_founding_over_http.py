"""The founding case through the real service: two workers (one per environment), real TVM."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import NEW_ENV, OLD_ENV, REPO, case_path
from tests.service.conftest import tagged
from tests.service.stack import Backend, Stack, dump, founding_body, make_home, serving
from tvmrepro.environments import Environment
from tvmrepro.reproducer import reproducer

pytestmark = [pytest.mark.tvm, pytest.mark.timeout(300)]
MISSING = "fused_relax_nn_attention_cutlass_gv"


@pytest.fixture(scope="module")
def stack(module_backend: Backend, tmp_path_factory: pytest.TempPathFactory, test_home: Path,
          tvm_envs: dict[str, Environment]) -> Iterator[Stack]:
    """The API and one worker per founding environment, shared by the module's tests on each
    backend: each submits a case of its own (`tagged`) where it needs fresh runs."""
    with serving(module_backend, make_home(tmp_path_factory.mktemp("founding"), test_home),
                 (OLD_ENV, NEW_ENV)) as running:
        yield running


def cells(job: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """The job's matrix cells by (variant, environment)."""
    return {(c["variant"], c["environment"]): c for row in job["matrix"]["cells"] for c in row}


def cli(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed command line, talking to this stack."""
    tvmrepro = Path(sys.executable).parent / "tvmrepro"
    return subprocess.run([str(tvmrepro), *args, "--server", stack.url], capture_output=True,
                          text=True, cwd=REPO, env={**stack.environ, "COLUMNS": "200"},
                          timeout=120)


def check_matrix(job: dict[str, Any], local: dict[tuple[str, str], dict[str, Any]]) -> None:
    """Four cells as the local run has them, one signature group, the variants' diff."""
    found = cells(job)
    assert set(found) == set(local)
    for key, result in local.items():
        got = found[key]
        assert (got["status"], got["stage"], got["signature"]) == (
            result["status"], result["stage"], result["signature"]), dump(got)
    groups = job["matrix"]["groups"]
    assert len(groups) == 1, dump(groups)
    assert MISSING in groups[0]["signature"]
    assert sorted((c["variant"], c["environment"]) for c in groups[0]["cells"]) == [
        ("fusetir-once", OLD_ENV), ("fusetir-once", NEW_ENV)]
    comparisons = job["matrix"]["comparisons"]
    assert [(c["a"]["environment"], c["b"]["variant"]) for c in comparisons] == [
        (OLD_ENV, "fusetir-twice"), (NEW_ENV, "fusetir-twice")]
    for comp in comparisons:
        assert not comp["identical"]
        assert comp["first_differing_pass"] == {"index": 2, "a": "AllocateWorkspace",
                                                "b": "FuseTIR"}
        diff = comp["diff"]
        assert diff.startswith(f"--- fusetir-once@{comp['a']['environment']} after pass 2")
        assert "\n+++ fusetir-twice@" in diff and "\n@@ " in diff
        # The second FuseTIR turns the nested function into a PrimFunc of that name.
        assert any(line.startswith("+") and f"def {MISSING}" in line for line in diff.splitlines())


def test_founding_case_over_http(stack: Stack, founding_case: dict[str, Any],
                                 local_cells: dict[tuple[str, str], dict[str, Any]]) -> None:
    submitted = stack.submit(founding_body(tagged(founding_case, "over http"), [OLD_ENV, NEW_ENV]))
    assert submitted["status"] in ("queued", "running") and submitted["cached_runs"] == 0
    job = stack.wait(submitted["id"])
    assert job["status"] == "done", dump(job)
    check_matrix(job, local_cells)
    # Exactly one stored result per run, each run delivered once.
    assert len(stack.result_rows(job["id"])) == 4
    assert [run["deliveries"] for run in job["runs"]] == [1, 1, 1, 1]

    once = next(r for r in job["runs"] if r["variant"] == "fusetir-once")
    base = f"/api/v1/jobs/{job['id']}/runs/{once['id']}"
    full = stack.http.get(base).json()
    assert [p["name"] for p in full["passes"]] == ["FuseTIR", "LambdaLift", "AllocateWorkspace"]
    assert all("@I.ir_module" in p["ir"] for p in full["passes"])
    assert MISSING in stack.http.get(base + "/log").json()["stderr"]
    assert len(stack.http.get(base + "/ir").json()["passes"]) == 3
    # Any two cells can be compared: here one variant on the two TVM versions.
    other = next(r for r in job["runs"] if r["variant"] == "fusetir-once" and r is not once)
    cross = stack.http.get(f"/api/v1/jobs/{job['id']}/compare",
                           params={"a": once["id"], "b": other["id"]}).json()
    assert (cross["a"], cross["b"]) == (
        {"variant": "fusetir-once", "environment": once["environment"]},
        {"variant": "fusetir-once", "environment": other["environment"]})
    # What the comparison must say, read from the two runs' own IR after each pass.
    ir_a = stack.http.get(base + "/ir").json()["passes"]
    ir_b = stack.http.get(f"/api/v1/jobs/{job['id']}/runs/{other['id']}/ir").json()["passes"]
    assert [p["name"] for p in ir_a] == [p["name"] for p in ir_b]
    differing = [n for n, (pa, pb) in enumerate(zip(ir_a, ir_b, strict=True))
                 if pa["ir"] != pb["ir"]]
    assert cross["identical"] is (not differing)
    if differing:
        step = differing[0]
        assert cross["first_differing_pass"] == {"index": step, "a": ir_a[step]["name"],
                                                 "b": ir_b[step]["name"]}
        assert cross["diff"].startswith(
            f"--- fusetir-once@{once['environment']} after pass {step} ({ir_a[step]['name']})")
    else:
        assert cross["first_differing_pass"] is None and cross["diff"] == ""


def test_second_submission_comes_from_the_cache(
        stack: Stack, founding_case: dict[str, Any],
        local_cells: dict[tuple[str, str], dict[str, Any]]) -> None:
    case = tagged(founding_case, "cache")
    first = stack.wait(stack.submit(founding_body(case, [OLD_ENV, NEW_ENV]))["id"])
    # "all": every environment a live worker serves, here the two.
    again = stack.submit(founding_body(case, "all"))
    assert again["environments"] == [OLD_ENV, NEW_ENV]
    assert again["status"] == "done" and again["cached_runs"] == 4
    assert [r["cached_from"] for r in again["runs"]] == [r["id"] for r in first["runs"]]
    check_matrix(again, local_cells)
    run = again["runs"][0]
    assert stack.http.get(f"/api/v1/jobs/{again['id']}/runs/{run['id']}/ir").status_code == 200
    assert len(stack.result_rows(first["id"])) == 4 and stack.result_rows(again["id"]) == []

    fresh = stack.submit(founding_body(case, [OLD_ENV], bypass_cache=True))
    assert fresh["cached_runs"] == 0 and fresh["status"] in ("queued", "running")
    assert stack.wait(fresh["id"])["status"] == "done"


def test_command_line_over_http(stack: Stack) -> None:
    case = str(case_path("tvm-17357/case.json"))
    proc = cli(stack, "run", case, "--env", OLD_ENV, "--env", NEW_ENV, "--json")
    assert proc.returncode == 0, proc.stderr + stack.logs()
    out = json.loads(proc.stdout)
    runs = {(r["variant"], r["environment"]): r for r in out["runs"]}
    assert runs[("fusetir-once", OLD_ENV)]["status"] == "error"
    assert runs[("fusetir-twice", NEW_ENV)]["status"] == "ok"
    assert all(r["passes"] and r["passes"][0]["ir"] for r in out["runs"])
    assert out["job"]["status"] == "done" and len(out["job"]["matrix"]["groups"]) == 1

    table = cli(stack, "run", case, "--env", OLD_ENV, "--env", NEW_ENV)
    assert table.returncode == 0, table.stderr
    assert "(cached)" in table.stderr  # the progress lines say where results came from
    assert "first differs after pass 2 (AllocateWorkspace / FuseTIR)" in table.stdout

    report = cli(stack, "report", out["job"]["id"], "--markdown")
    assert report.returncode == 0, report.stderr
    assert "| `fusetir-once` | `error` at `vm_init` | `error` at `vm_init` |" in report.stdout
    assert "```diff" in report.stdout and MISSING in report.stdout

    job_id = out["job"]["id"]
    listed = cli(stack, "jobs", "--json")
    assert job_id in [j["id"] for j in json.loads(listed.stdout)["jobs"]], listed.stderr
    log = cli(stack, "log", job_id, f"fusetir-once@{OLD_ENV}")
    assert log.returncode == 0 and MISSING in log.stdout, log.stderr  # the log is the output
    ir = cli(stack, "ir", job_id, f"fusetir-once@{NEW_ENV}", "--pass", "2")
    assert "\n# after pass 2: AllocateWorkspace\n" in ir.stdout and "@I.ir_module" in ir.stdout
    compared = cli(stack, "compare", job_id, f"fusetir-once@{OLD_ENV}", f"fusetir-twice@{OLD_ENV}")
    assert "first differ after pass 2 (AllocateWorkspace / FuseTIR)" in compared.stdout
    wrong = cli(stack, "log", job_id, "fusetir-thrice@nowhere")
    assert wrong.returncode == 2 and "fusetir-once@" in wrong.stderr
    queued = cli(stack, "run", case, "--env", OLD_ENV, "--no-wait", "--bypass-cache")
    assert queued.returncode == 0 and len(queued.stdout.strip()) == 32, queued.stderr
    cancelled = cli(stack, "cancel", queued.stdout.strip())
    assert cancelled.returncode == 0 and "run(s) cancelled" in cancelled.stdout

    unknown = cli(stack, "run", case, "--env", OLD_ENV, "--variant", "no-such")
    assert unknown.returncode == 2
    bad_pass = json.loads(Path(case).read_text())
    bad_pass["variants"][0]["passes"][1] = "LambdaLfit"
    path = stack.home / "bad.json"
    path.write_text(json.dumps(bad_pass))
    refused = cli(stack, "run", str(path), "--env", OLD_ENV)
    assert refused.returncode == 2 and "case.variants[0].passes[1]" in refused.stderr


def _python_blocks(markdown: str) -> list[str]:
    """The ```python blocks of a Markdown text."""
    return [block.split("\n", 1)[1] for block in markdown.split("```python")[1:]
            for block in [block.split("```", 1)[0]]]


def test_the_report_concludes_and_reproduces_without_tvmrepro(
        stack: Stack, founding_case: dict[str, Any], tvm_envs: dict[str, Any]) -> None:
    case = tagged(founding_case, "report")
    job = stack.wait(stack.submit(founding_body(case, [OLD_ENV, NEW_ENV]))["id"])
    report = stack.http.get(f"/api/v1/jobs/{job['id']}/report.md")
    assert report.status_code == 200 and report.headers["content-type"].startswith("text/markdown")
    text = report.text
    first = text.splitlines()[0]
    old, new = (tvm_envs[e].release for e in (OLD_ENV, NEW_ENV))
    assert first.startswith(f"**`fusetir-once` fails (error) on every tested release ({old} → "
                            f"{new}, 2 release(s)); `fusetir-twice` passes on every tested"), first
    assert "Reproduced with tvm-repro" in text
    bodies = {"\n".join(line for line in comp["diff"].splitlines()[2:])
              for comp in job["matrix"]["comparisons"]}
    assert text.count("```diff") == len(bodies)  # a diff that is the same everywhere, once
    assert "first differ after pass 2: `AllocateWorkspace` in `fusetir-once`, `FuseTIR` in " \
           "`fusetir-twice`" in text
    assert "appears after LambdaLift (pass 1) as Function; renamed to " \
           f"{MISSING}1 by AllocateWorkspace (pass 2)" in text
    scripts = _python_blocks(text)
    assert scripts[-1].strip() == case["source"].strip()  # TVMScript, not escaped JSON
    for env_id in (OLD_ENV, NEW_ENV):
        assert f"pip install apache-tvm=={tvm_envs[env_id].release} " in text
        run = next(r for r in job["runs"] if (r["variant"], r["environment"]) == (
            "fusetir-once", env_id))
        # The script is made from the case with the rewrites the run names (never the run's
        # own text); where two releases get the same script it is shown once.
        rewrites = stack.http.get(f"/api/v1/jobs/{job['id']}/runs/{run['id']}").json()[
            "rewrites"]
        script = reproducer(job["case"], "fusetir-once", tvm_envs[env_id].release,
                            tvm_envs[env_id].target, rewrites)
        assert script.strip() in [s.strip() for s in scripts]
        path = stack.home / f"repro-{env_id}.py"
        path.write_text(script)
        python = stack.home / "envs" / env_id / "bin" / "python"
        proc = subprocess.run([str(python), str(path)], capture_output=True, text=True,
                              timeout=300, cwd=stack.home)
        assert f"Cannot find ffi::Function {MISSING}" in proc.stderr, proc.stderr[-2000:]


def test_a_report_where_nothing_failed_does_not_say_reproduced(
        stack: Stack, founding_case: dict[str, Any]) -> None:
    body = founding_body(founding_case, [NEW_ENV])
    body["variants"] = ["fusetir-twice"]
    job = stack.wait(stack.submit(body)["id"])
    text = stack.http.get(f"/api/v1/jobs/{job['id']}/report.md").text
    assert text.startswith("**`fusetir-twice` passes on every tested release")
    assert "Reproduced" not in text and "Reproduce without" not in text
