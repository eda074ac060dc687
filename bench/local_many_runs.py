"""One-shot local commands of many runs, against one bare cold run of the founding case.

Side by side, interleaved so that drift hits all alike:
- bare: one cold `python repro.py` in the newest CPU environment (the case ported to its
  TVM, its passes, build, VM), as a user would run the report by hand once;
- reduce: `tvmrepro reduce CASE --local --env NEWEST --variant fusetir-once --json` (no
  service): its candidates' runs and checks; its answer is checked to be the known one
  (LambdaLift and AllocateWorkspace kept, REDUCED_LINES lines);
- bisect: `tvmrepro bisect CASE --local --oracle signature --json` over every CPU release.
Each command runs as `python -m cli` from this checkout (with no `tvmrepro up` on its home),
so the script measures the code beside it. Prints medians and each as a ratio to bare, beside
its floor (bench/floor.py; on a machine busy with other work the ratios move a lot: run it on a
quiet one).

    .venv/bin/python bench/local_many_runs.py [--repeat 3] [--budget-s 600]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.floor import TreeCpu  # noqa: E402
from bench.service_vs_bare import CASE, TABLE_HEADER, bare_script, summary, time_bare  # noqa: E402
from tvmrepro.environments import default_catalog  # noqa: E402
from tvmrepro.settings import Settings  # noqa: E402
from worker.environments.provision import env_python, provision  # noqa: E402

VARIANT = "fusetir-once"
REDUCED_PASSES = ["LambdaLift", "AllocateWorkspace"]
REDUCED_LINES = 16


def time_command(args: list[str]) -> tuple[float, dict[str, Any]]:
    """Seconds for one `tvmrepro ARGS --json` of this checkout, and what it printed."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "cli", *args, "--json"], cwd=REPO,
                          capture_output=True, text=True, env=dict(os.environ))
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"tvmrepro {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return elapsed, json.loads(proc.stdout)


def checked_reduction(found: dict[str, Any]) -> str:
    """The reduction's answer in a few words; SystemExit when it is not the known one."""
    passes = [p if isinstance(p, str) else p["name"] for p in found["case"]["variants"][0]["passes"]]
    lines = found["after"]["lines"]
    if passes != REDUCED_PASSES or lines != REDUCED_LINES:
        raise SystemExit(f"the reduction changed: passes {passes}, {lines} lines")
    return f"{', '.join(passes)}, {lines} lines, {found['runs']} runs, {found['checks']} checks"


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--budget-s", default="600")
    args = parser.parse_args()
    settings = Settings.from_env()
    envs = default_catalog().select(None, device="cpu")
    for env in envs:
        provision(settings, env)
    newest = envs[-1]
    script = bare_script(settings, newest.id, json.loads(CASE.read_text()), VARIANT,
                         Path(tempfile.mkdtemp()))
    reduce_args = ["reduce", str(CASE), "--local", "--env", newest.id, "--variant", VARIANT,
                   "--budget-s", args.budget_s]
    bisect_args = ["bisect", str(CASE), "--local", "--variant", VARIANT, "--oracle", "signature",
                   *[arg for env in envs for arg in ("--env", env.id)]]
    samples: dict[str, list[float]] = {"bare": [], "reduce": [], "bisect": []}
    cpu: dict[str, list[float]] = {name: [] for name in samples}  # for each ratio's floor
    answers: set[str] = set()
    for _ in range(args.repeat):
        with TreeCpu() as used:
            samples["bare"].append(time_bare(env_python(settings, newest), script))
        cpu["bare"].append(used.seconds)
        for name, command in (("reduce", reduce_args), ("bisect", bisect_args)):
            with TreeCpu() as used:
                seconds, found = time_command(command)
            cpu[name].append(used.seconds)
            samples[name].append(seconds)
            answers.add(checked_reduction(found) if name == "reduce"
                        else f"bisect verdict {found['verdict']}")
    bare = statistics.median(samples["bare"])
    print(f"founding case, variant {VARIANT}, reduced on {newest.id}, {args.repeat} runs each "
          f"({os.cpu_count()} cores): {'; '.join(sorted(answers))}")
    print(TABLE_HEADER)
    print(summary("bare cold python", samples["bare"], bare, cpu["bare"]))
    print(summary("reduce --local", samples["reduce"], bare, cpu["reduce"]))
    print(summary(f"bisect --local, {len(envs)} releases", samples["bisect"], bare, cpu["bisect"]))
    print(json.dumps({**samples, "cpu": cpu}))


if __name__ == "__main__":
    main()
