"""`tvmrepro bisect --local` beside a running `tvmrepro up`, against the same bisection submitted
to that `up` as a job, and one bare run of the case.

Side by side, interleaved so that drift hits all alike:
- bare: one cold `python repro.py` in the newest CPU environment (as bench/bisect_vs_bare.py);
- job: a bisect job (strategy all, oracle signature, the cache bypassed) submitted over HTTP to
  a `tvmrepro up` serving every CPU release, timed from submit to the last probe's result
  stored (bench/bisect_service.py's measure);
- command: `tvmrepro bisect CASE --local --oracle signature --json` on that `up`'s home (it
  hands the bisection to the `up` as a job), timed from the command's start to its exit, its
  own start and its polling included: what a user waits for.
Before each measure the bench waits until the `up`'s processes are idle. Each ratio is printed
beside its floor (bench/floor.py).

    .venv/bin/python bench/bisect_on_up.py [--repeat 3] [--variant NAME]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bisect_service import time_bisect  # noqa: E402
from bench.bisect_vs_bare import cpu_bench  # noqa: E402
from bench.floor import TreeCpu, with_floor  # noqa: E402
from bench.service_vs_bare import CASE, TABLE_HEADER, Service, summary, time_bare  # noqa: E402
from worker.environments.provision import env_python  # noqa: E402


def time_command(service: Service, variant: str) -> tuple[float, dict[str, Any]]:
    """Seconds for `tvmrepro bisect --local` on the up's home, start to exit, and its answer."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "cli", "bisect", str(CASE), "--local",
                           "--variant", variant, "--oracle", "signature", "--json"],
                          cwd=REPO, env=service.environ, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0 or "warm sandboxes of `tvmrepro up`" not in proc.stderr:
        raise SystemExit(f"bisect --local did not run on the up:\n{proc.stderr[-3000:]}")
    return elapsed, json.loads(proc.stdout)


def main() -> None:
    """Measure and print."""
    args, settings, envs, case, script = cpu_bench(__doc__ or "")
    newest, ids = envs[-1], [env.id for env in envs]
    service = Service("bisect-up", settings.envs_dir, ids[0], None, up=True,
                      more_envs=tuple(ids[1:]))
    samples: dict[str, list[float]] = {"bare": [], "job": [], "command": []}
    cpu: dict[str, list[float]] = {name: [] for name in samples}  # for each ratio's floor
    verdicts = set()
    try:
        for _ in range(2):  # warm-up: every release's pool has served a probe
            service.settle()
            time_bisect(service, case, ids, args.variant)
        for _ in range(args.repeat):
            service.settle()
            with TreeCpu() as used:
                samples["bare"].append(time_bare(env_python(settings, newest), script))
            cpu["bare"].append(used.seconds)
            service.settle()
            with TreeCpu() as used:
                found = time_bisect(service, case, ids, args.variant)
            cpu["job"].append(used.seconds)
            samples["job"].append(found["e2e"])
            verdicts.add(str(found["verdict"]))
            service.settle()
            with TreeCpu() as used:
                seconds, answer = time_command(service, args.variant)
            cpu["command"].append(used.seconds)
            samples["command"].append(seconds)
            verdicts.add(str(answer["verdict"]))
    finally:
        service.stop()
    bare = statistics.median(samples["bare"])
    print(f"founding case, variant {args.variant}, {len(ids)} CPU releases, {args.repeat} samples "
          f"each (medians); verdicts: {', '.join(sorted(verdicts))}")
    print(TABLE_HEADER)
    print(summary("bare cold python", samples["bare"], bare, cpu["bare"]))
    print(summary("bisect job on the up", samples["job"], bare, cpu["job"]))
    print(summary("bisect --local beside it", samples["command"], bare, cpu["command"]))
    job, command = statistics.median(samples["job"]), statistics.median(samples["command"])
    print(f"the command against the job: "
          f"{with_floor(command / job, statistics.median(cpu['command']), job)}")
    print(json.dumps({**samples, "cpu": cpu}))


if __name__ == "__main__":
    main()
