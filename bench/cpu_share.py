"""A run beside a fork-and-busy-loop attacker, against the same run alone (the local runtime).

The victim is a CPU-bound case (a pure-Python loop of about 1.5 s here). The attacker is a run
of another job, at the same time in the same worker's runtime, that forks 16 children, each in
a session of its own, each spinning until the run's time limit. Each run has a cgroup of its
own with the same CPU share (worker/runtimes/cgroup.py), so the attacker gets one run's share
of the CPU, not 16 processes' worth. Prints the victim's time in its sandbox alone and beside
the attacker (medians), and their ratio (the target: at most 1.5x). With --no-cgroups the
runs get none (TVMREPRO_RUN_CGROUPS=0), which shows what the cgroup buys.

    .venv/bin/python bench/cpu_share.py [--repeat 5] [--no-cgroups]

Uses TVMREPRO_HOME (the environment must be provisioned there) and runs as root.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tvmrepro.cases import parse_case  # noqa: E402
from tvmrepro.environments import default_catalog  # noqa: E402
from tvmrepro.settings import Settings  # noqa: E402
from worker.runner import run_variant  # noqa: E402
from worker.runtimes.local import LocalRuntime  # noqa: E402

ENV = "tvm-0.27.0.post1-cpu"
VICTIM = "total = 0\nfor i in range(30_000_000):\n    total += i\nprint(total)\n"
ATTACKER = ("import os, time\n"
            "for _ in range(16):\n"
            "    if os.fork() == 0:\n"
            "        os.setsid()\n"
            "        while True:\n"
            "            pass\n"
            "time.sleep(10)\n")  # then it exits: its sandbox, children and all, ends
ATTACKER_TIMEOUT_S = 30


def victim_seconds(runtime: LocalRuntime) -> float:
    """One victim run's time in its sandbox (from the hand-over)."""
    env = default_catalog().get(ENV)
    result = run_variant(parse_case({"script": VICTIM, "timeout_s": 60}), "script", env, runtime)
    assert result.status == "ok", (result.status, result.message, result.log.stderr[-1000:])
    return float(result.seconds["total"])


def beside_attacker(runtime: LocalRuntime) -> float:
    """A victim run while the attacker's 16 busy children spin."""
    env = default_catalog().get(ENV)
    attack = threading.Thread(target=run_variant, args=(
        parse_case({"script": ATTACKER, "timeout_s": ATTACKER_TIMEOUT_S}), "script", env, runtime))
    attack.start()
    time.sleep(3)  # its sandbox took the case and its children spin
    try:
        return victim_seconds(runtime)
    finally:
        attack.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-cgroups", action="store_true")
    args = parser.parse_args()
    settings = Settings.from_env().model_copy(update={"warm_sandboxes": 2,
                                                      "run_cgroups": not args.no_cgroups})
    runtime = LocalRuntime(settings)
    runtime.prewarm([default_catalog().get(ENV)])
    try:
        victim_seconds(runtime)  # the pool warm, the caches filled
        alone, beside = [], []
        for _ in range(args.repeat):  # interleaved: drift hits both alike
            alone.append(victim_seconds(runtime))
            beside.append(beside_attacker(runtime))
    finally:
        runtime.close()
    a, b = statistics.median(alone), statistics.median(beside)
    cgroups = runtime.cgroups
    print(f"run cgroups: {'on' if cgroups.available else f'off ({cgroups.reason})'}")
    print(f"victim alone: {a:.2f} s (median of {args.repeat}: "
          f"{', '.join(f'{x:.2f}' for x in alone)})")
    print(f"victim beside a 16-process busy attacker: {b:.2f} s "
          f"({', '.join(f'{x:.2f}' for x in beside)})")
    print(f"ratio: {b / a:.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    main()
