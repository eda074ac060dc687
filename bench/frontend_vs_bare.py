"""Frontend reports (a torch.export one, an ONNX one) through a warm service, against a bare
cold `python report.py` of each.

Measured side by side in one run, interleaved so that drift hits all alike:
- bare: `python report.py` in the frontend flavour's interpreter (exactly the release's pins
  and the frontend pins: plain TVM, torch, onnx), a fresh process each time, as a user runs
  the report by hand;
- service: submit over HTTP -> the result is stored (its `finished_at`), with the API and a
  worker already running (embedded broker, SQLite), whose frontend flavour is warm: a sandbox
  forked by the flavour's zygote, which imported TVM, torch, onnx and TVM's frontends once
  and exported one tiny model.
Each service run bypasses the cache and starts on a settled worker. Prints medians and the
ratio service/bare, each beside its floor (bench/floor.py); the goals are at most 0.15x for
torch and 0.1x for ONNX.

    .venv/bin/python bench/frontend_vs_bare.py [--repeat 5] [--env ENV]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from service_vs_bare import TABLE_HEADER, Service, summary, time_bare  # noqa: E402

from bench.floor import TreeCpu  # noqa: E402
from tvmrepro.environments import default_catalog  # noqa: E402
from tvmrepro.settings import Settings  # noqa: E402
from worker.environments.provision import env_python, provision  # noqa: E402

CORPUS = REPO / "tests" / "cases" / "frontend"
# Reports that end ok on every release (a bare run that fails is not a measure).
REPORTS = {"torch": "export-mm-default", "onnx": "onnx-asinh-huge-input"}
GOALS = {"torch": 0.15, "onnx": 0.10}


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="tvm-0.27.0.post1-cpu")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    settings = Settings.from_env()
    env = default_catalog().get(args.env)
    provision(settings, env)
    flavour = env.with_frontends()
    provision(settings, flavour)
    python = env_python(settings, flavour)
    service = Service("frontends", settings.envs_dir, env.id, None)
    samples: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}  # each measure's CPU seconds, for its floor
    try:
        cases = {kind: {"title": name, "script": (CORPUS / name / "report.py").read_text()}
                 for kind, name in REPORTS.items()}
        for case in cases.values():  # warm-up: the flavour's pool fills from its first run
            service.time_job(case, env.id, "script")
        for _ in range(args.repeat):
            for kind, case in cases.items():
                service.settle()
                with TreeCpu() as used:
                    samples.setdefault(f"{kind} bare", []).append(
                        time_bare(python, CORPUS / REPORTS[kind] / "report.py"))
                cpu.setdefault(f"{kind} bare", []).append(used.seconds)
                service.settle()
                with TreeCpu() as used:
                    timing = service.time_job(case, env.id, "script")
                cpu.setdefault(f"{kind} service", []).append(used.seconds)
                samples.setdefault(f"{kind} service", []).append(timing["e2e"])
                samples.setdefault(f"{kind} sandbox", []).append(timing["sandbox"])
    finally:
        service.stop()
    print(f"frontend reports, {env.id} (frontend flavour), {args.repeat} runs each "
          f"(medians; service runs bypass the cache)")
    print(TABLE_HEADER)
    for kind, name in REPORTS.items():
        bare = statistics.median(samples[f"{kind} bare"])
        print(summary(f"{kind}: bare cold python", samples[f"{kind} bare"], bare,
                      cpu[f"{kind} bare"]))
        print(summary("  warm service", samples[f"{kind} service"], bare, cpu[f"{kind} service"])
              + f"  (goal <= {GOALS[kind]:.2f}x)")
        print(summary("  of which run in sandbox", samples[f"{kind} sandbox"], bare))
        print(f"  ({name})")


if __name__ == "__main__":
    main()
