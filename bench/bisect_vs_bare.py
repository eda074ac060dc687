"""A full bisection of the founding case over every CPU release, against one bare run of it.

Side by side, interleaved so that drift hits both alike:
- bare: one cold `python repro.py` in the newest CPU environment (the case ported to
  its TVM, its passes, build, VM), as a user would run the report by hand once;
- bisect: `tvmrepro bisect CASE --local --oracle signature --json` over every CPU
  environment (ten runs in the sandbox, as many at once as there are cores; nothing is
  cached locally), provisioned environments assumed.
Prints medians and the ratio bisect/bare, each beside its floor (bench/floor.py: the CPU
seconds, user + system, of all its processes over the cores), and the bare run's CPU seconds: ten
releases each import their own TVM and run the case, so the bisection's CPU is about ten times
that.

    .venv/bin/python bench/bisect_vs_bare.py [--repeat 3] [--variant NAME]
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
from tvmrepro.environments import Environment, default_catalog  # noqa: E402
from tvmrepro.settings import Settings  # noqa: E402
from worker.environments.provision import env_python, provision  # noqa: E402


def time_bisect(variant: str, envs: list[str]) -> tuple[float, dict[str, object]]:
    """Seconds for one `tvmrepro bisect --local` over `envs`, and its answer."""
    cli = Path(sys.executable).parent / "tvmrepro"
    args = [str(cli), "bisect", str(CASE), "--local", "--json", "--variant", variant,
            "--oracle", "signature"]
    for env_id in envs:
        args += ["--env", env_id]
    started = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ))
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"the bisection failed:\n{proc.stderr[-3000:]}")
    return elapsed, json.loads(proc.stdout)


def cpu_bench(doc: str) -> tuple[argparse.Namespace, Settings, list[Environment], dict[str, Any],
                                  Path]:
    """The arguments, settings, every CPU environment (provisioned), the case and the bare
    script of it for the newest: what a bisection bench measures against."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--variant", default="fusetir-once")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    settings = Settings.from_env()
    envs = default_catalog().select(None, device="cpu")
    for env in envs:
        provision(settings, env)
    case = json.loads(CASE.read_text())
    script = bare_script(settings, envs[-1].id, case, args.variant, Path(tempfile.mkdtemp()))
    return args, settings, envs, case, script


def main() -> None:
    """Measure and print."""
    args, settings, envs, _case, script = cpu_bench(__doc__ or "")
    newest = envs[-1]
    samples: dict[str, list[float]] = {"bare": [], "bisect": [], "bare_cpu": [], "bisect_cpu": []}
    verdicts = set()
    for _ in range(args.repeat):
        with TreeCpu() as used:
            samples["bare"].append(time_bare(env_python(settings, newest), script))
        samples["bare_cpu"].append(used.seconds)
        with TreeCpu() as used:
            seconds, found = time_bisect(args.variant, [env.id for env in envs])
        samples["bisect"].append(seconds)
        samples["bisect_cpu"].append(used.seconds)
        verdicts.add(str(found["verdict"]))
    bare = statistics.median(samples["bare"])
    print(f"founding case, variant {args.variant}: bare run on {newest.id} vs bisection over "
          f"{len(envs)} CPU releases ({os.cpu_count()} cores), {args.repeat} runs each; "
          f"verdicts {sorted(verdicts)}")
    print(TABLE_HEADER)
    print(summary("bare cold python", samples["bare"], bare, samples["bare_cpu"]))
    print(summary(f"bisect --local, {len(envs)} releases", samples["bisect"], bare,
                  samples["bisect_cpu"]))
    print(f"CPU seconds (user + system), medians: bare {statistics.median(samples['bare_cpu']):.3f} s, "
          f"bisection {statistics.median(samples['bisect_cpu']):.3f} s")
    print(json.dumps(samples))


if __name__ == "__main__":
    main()
