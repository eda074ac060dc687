"""A triage of many reports through the service, against their scripts run bare with xargs -P2.

The reports are the tracker corpus's reports with code (tests/tracker/corpus), copied round
until there are --reports of them, each copy a script of its own (a comment that names it).
Measured in one run, one after the other on the same machine:
- bare: every report's script on every environment, `python report.py` in the environment's
  interpreter (the script ported to that release beforehand, untimed, by the harness's own
  rules, as the service ports it), `xargs -P2` over all of them: what a person triaging the
  reports by hand at two at a time would run;
- service: `POST /jobs` of `kind: "triage"` with the reports (cache bypassed) to an API and one
  worker serving the environments at concurrency 2 (Redis, its keys under a prefix of this
  run's own, deleted afterwards, and SQLite; or --broker embedded, as `make up` runs them),
  from the submission to the last run's result stored (its `finished_at`).
The service goes first; each time is printed as soon as it is measured. Prints the ratio
service/bare at the end (issue 28: within 1.5x), beside its floor (bench/floor.py).

    .venv/bin/python bench/triage_vs_bare.py [--reports 100] [--env ENV]... [--broker embedded]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import redis  # noqa: E402

from bench.floor import TreeCpu, with_floor  # noqa: E402
from bench.service_vs_bare import BENCH_REDIS_URL, Service  # noqa: E402
from tvmrepro.environments import Environment, default_catalog  # noqa: E402
from tvmrepro.jobs.tracker.importing import ImportedReport, import_file  # noqa: E402
from tvmrepro.settings import Settings  # noqa: E402
from worker.environments.provision import env_python, provision  # noqa: E402

CORPUS = REPO / "tests" / "tracker" / "corpus" / "issues.json"
ENVIRONMENTS = ("tvm-0.25.0-cpu", "tvm-0.26.0-cpu", "tvm-0.27.0.post1-cpu")
CONCURRENCY = 2
BARE_TIMEOUT_S = 120  # each script's limit, as the service's default
POLL_S = 0.5
# Untimed: port each script to the environment's TVM with the harness's own rules.
PORT = """
import json, sys, tvm
from harness.porting import detect, port
features = detect(tvm)
for source, target in json.load(open(sys.argv[1])):
    open(target, "w").write(port(open(source).read(), features)[0])
"""


def reports(count: int) -> list[ImportedReport]:
    """`count` reports: the corpus's reports with code, copied round, each script its own."""
    with_code = [report for report in import_file(CORPUS) if report.script is not None]
    return [with_code[i % len(with_code)].model_copy(update={
        "number": i + 1, "script": f"{with_code[i % len(with_code)].script}\n# copy {i + 1}\n"})
        for i in range(count)]


def bare_scripts(settings: Settings, envs: list[Environment], found: list[ImportedReport],
                 workdir: Path) -> list[tuple[Path, Path]]:
    """(interpreter, ported script) of every report on every environment."""
    pairs = []
    for env in envs:
        folder = workdir / env.id
        folder.mkdir()
        todo = []
        for report in found:
            source = folder / f"{report.number}.orig.py"
            source.write_text(report.script or "")
            todo.append((str(source), str(folder / f"{report.number}.py")))
        plan = folder / "plan.json"
        plan.write_text(json.dumps(todo))
        subprocess.run([str(env_python(settings, env)), "-c", PORT, str(plan)], check=True,
                       env={"PYTHONPATH": str(REPO / "images"), "PATH": "/usr/bin:/bin"})
        pairs += [(env_python(settings, env), Path(target)) for _, target in todo]
    return pairs


def time_bare(pairs: list[tuple[Path, Path]], workdir: Path) -> float:
    """Seconds for `xargs -P2` over every `python report.py` (a failing report goes on)."""
    lines = workdir / "runs.txt"
    lines.write_text("".join(f"{python} {script}\n" for python, script in pairs))
    # Each in its script's folder, its output dropped, its exit status (a segfault) ignored.
    command = (f'cd "$(dirname "$1")" && timeout {BARE_TIMEOUT_S} "$0" "$1" >/dev/null 2>&1; '
               "exit 0")
    started = time.perf_counter()
    subprocess.run(["xargs", "-P", str(CONCURRENCY), "-L", "1", "sh", "-c", command],
                   stdin=lines.open(), check=True, env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    return time.perf_counter() - started


def time_triage(service: Service, found: list[ImportedReport],
                env_ids: list[str]) -> tuple[float, dict[str, Any]]:
    """Seconds from submitting the triage to its last run's result stored, and its answer."""
    body = {"kind": "triage", "environments": env_ids, "bypass_cache": True,
            "reports": [report.model_dump(mode="json") for report in found]}
    submitted = time.time()
    response = service.http.post("/api/v1/jobs", json=body, timeout=120)
    if response.status_code != 202:
        raise SystemExit(f"the triage was refused: {response.text[:2000]}")
    job = response.json()
    while not job["triage"]["finished"]:
        time.sleep(POLL_S)
        job = service.http.get(f"/api/v1/jobs/{job['id']}").json()
    stored = max(datetime.fromisoformat(run["finished_at"]).timestamp()
                 for run_job in job["triage"]["jobs"] if run_job
                 for run in service.http.get(f"/api/v1/jobs/{run_job}").json()["runs"])
    return stored - submitted, job["triage"]


def wait_served(service: Service, env_ids: list[str]) -> None:
    """Until the worker serves every environment, then until its warm sandboxes are made."""
    while True:
        envs = service.http.get("/api/v1/environments").json()["environments"]
        if all(env["workers"] for env in envs if env["id"] in env_ids):
            break
        time.sleep(0.5)
    service.settle()


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=100)
    parser.add_argument("--env", action="append", dest="envs", help=f"default {ENVIRONMENTS}")
    parser.add_argument("--broker", choices=("redis", "embedded"), default="redis")
    parser.add_argument("--json", action="store_true", help="also print the triage's answer")
    args = parser.parse_args()
    settings = Settings.from_env()
    envs = [default_catalog().get(env_id) for env_id in args.envs or ENVIRONMENTS]
    for env in envs:
        provision(settings, env)
    found = reports(args.reports)
    env_ids = [env.id for env in envs]
    print(f"{len(found)} reports on {len(envs)} environments ({len(found) * len(envs)} runs), "
          f"concurrency {CONCURRENCY}, {args.broker} broker", flush=True)
    prefix = f"tvmrepro-bench-{uuid.uuid4().hex[:12]}:"  # a shared Redis is never flushed
    service = Service("triage", settings.envs_dir, env_ids[0],
                      BENCH_REDIS_URL if args.broker == "redis" else None, prefix,
                      concurrency=CONCURRENCY, more_envs=tuple(env_ids[1:]))
    try:
        wait_served(service, env_ids)
        with TreeCpu() as triage_cpu:
            triaged, answer = time_triage(service, found, env_ids)
    finally:
        service.stop()
        if args.broker == "redis":
            bench_redis = redis.Redis.from_url(BENCH_REDIS_URL)
            for key in bench_redis.scan_iter(match=f"{prefix}*"):
                bench_redis.delete(key)
    verdicts: dict[str, int] = {}
    for line in answer["reports"]:
        verdicts[line["verdict"]] = verdicts.get(line["verdict"], 0) + 1
    print(f"service: triage job                  {triaged:8.1f} s", flush=True)
    print(f"verdicts: {json.dumps(verdicts, sort_keys=True)}", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="tvmrepro-bench-bare-"))
    pairs = bare_scripts(settings, envs, found, workdir)
    with TreeCpu() as bare_cpu:
        bare = time_bare(pairs, workdir)
    print(f"bare: xargs -P{CONCURRENCY} python report.py   {bare:8.1f} s")
    print(f"CPU seconds: service {triage_cpu.seconds:.1f} s, bare {bare_cpu.seconds:.1f} s")
    print(f"service / bare: {with_floor(triaged / bare, triage_cpu.seconds, bare)}")
    if args.json:
        print(json.dumps(answer))


if __name__ == "__main__":
    main()
