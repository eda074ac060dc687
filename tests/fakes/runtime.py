"""FakeRuntime: scripted outcomes, no TVM, for tests of the layers above the sandbox.

A fake, and named so: it runs nothing. It stands in for a real runtime where
TVM adds nothing to what a test proves (the API, the tasks, recovery, load),
never instead of the real-TVM tests. It lives with the tests, not in the
product: a worker process uses it only when started by the tests' launcher
(`python -m tests.fakes.cli worker ...`, tests/fakes/cli.py), which adds it to
the product's runtime table as "fake". What a run does is scripted by a callable
given to it or, across processes, by directive lines in the case's source or
script (the first whose "variant" and "environment", when given, match):

    # fake-runtime: {"variant": "v1", "status": "error", "stage": "vm_init", "sleep": 2}

Keys: `sleep` (seconds, before it ends; past the run's time limit it times
out), `status`, `stage`, `error_type`, `message` (a result as the harness
would report it), `exit` (the harness dies with this status, no result),
`signal` (it is killed by this signal), `fault` (the runtime itself fails: a
RuntimeFault with this message), `stdout`. No directive: the run is ok.

Its fingerprint of an environment is the real one, recorded: FINGERPRINTS
(fingerprints.json) holds what the local runtime reported of the provisioned
environments (apache-tvm from PyPI), so that pass names are checked against the
passes real TVM has. Recorded by `python -m tests.fakes.runtime` from the test
home's provisioned environments (TVMREPRO_TEST_HOME, default
~/.cache/tvmrepro-test); tests/worker/test_fake_runtime.py checks the recording
against the real environments (mark tvm). Environments not recorded have no
fingerprint (a RuntimeFault, as an image not built yet would be).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tvmrepro.environments import Environment
from tvmrepro.errors import RuntimeFault
from tvmrepro.settings import Settings
from worker.runtimes.base import Execution, Limits, SandboxJob, fingerprint_tvm

DIRECTIVE = "# fake-runtime:"
FINGERPRINTS = Path(__file__).with_name("fingerprints.json")
# The environments recorded: those the tests' fake stacks serve (tests/conftest.py).
RECORDED = ("tvm-0.25.0-cpu", "tvm-0.27.0.post1-cpu")
Script = Callable[[SandboxJob], dict[str, Any]]


def directive(job: SandboxJob) -> dict[str, Any]:
    """The outcome that the case's directive lines script for this run ({} when none does)."""
    text = job.case.get("script") or job.case.get("source") or ""
    for line in text.splitlines():
        if not line.strip().startswith(DIRECTIVE):
            continue
        outcome: dict[str, Any] = json.loads(line.strip()[len(DIRECTIVE):])
        if outcome.get("variant", job.variant) == job.variant and \
                outcome.get("environment", job.env.id) == job.env.id:
            return outcome
    return {}


class FakeRuntime:
    """A runtime whose runs end as scripted, without TVM or a sandbox."""

    name = "fake"

    def __init__(self, settings: Settings, script: Script = directive) -> None:
        self.settings, self.script = settings, script

    def close(self) -> None:
        """Nothing is held: no sandbox waits."""

    def prewarm(self, envs: list[Environment], processes: int = 1) -> None:
        """Nothing to warm: a fake run starts at once."""

    def reserve(self, env: Environment, timeout_s: int, memory_mb: int, count: int = 1) -> None:
        """Nothing to start ahead."""

    def start_zygotes(self, envs: list[Environment]) -> None:
        """No TVM to import."""

    def fingerprint(self, env: Environment) -> dict[str, Any]:
        """The fingerprint the local runtime made of env, as recorded in FINGERPRINTS."""
        recorded: dict[str, dict[str, Any]] = json.loads(FINGERPRINTS.read_text())
        if env.id not in recorded:
            raise RuntimeFault(f"no recorded fingerprint of {env.id} in {FINGERPRINTS}")
        return recorded[env.id]

    def execute(self, job: SandboxJob) -> Execution:
        """End the run as scripted: sleep, then report (or die, or fail) as told."""
        outcome = self.script(job)
        if "fault" in outcome:
            raise RuntimeFault(str(outcome["fault"]))
        started = time.monotonic()
        slept = float(outcome.get("sleep", 0))
        timed_out = slept > job.timeout_s
        time.sleep(min(slept, job.timeout_s))
        killed_by = outcome.get("signal")
        ends = "exit" not in outcome and not killed_by and not timed_out
        events = self._events(job, outcome, ends)
        return Execution(
            events=events,
            returncode=(-signal.Signals[killed_by].value if killed_by
                        else int(outcome.get("exit", 0))),
            signal=killed_by, timed_out=timed_out, stdout=str(outcome.get("stdout", "")),
            seconds=time.monotonic() - started,
            isolation={"runtime": "fake", "sandbox": "none", **Limits.of(job, self.settings).summary()},
            tvm=fingerprint_tvm(self.fingerprint(job.env)))

    def _events(self, job: SandboxJob, outcome: dict[str, Any], ends: bool) -> list[dict[str, Any]]:
        tvm = {"version": job.env.release, "libinfo": {"fake": "1"}}
        stage = outcome.get("stage")
        events: list[dict[str, Any]] = [{"event": "start", "tvm": tvm}]
        passes: list[dict[str, Any]] = [] if job.case.get("script") else next(
            (v["passes"] for v in job.case.get("variants") or [] if v["name"] == job.variant), [])
        done = int(stage.split(":")[1]) if stage and stage.startswith("pass:") else len(passes)
        for index, spec in enumerate(passes[:done]):
            events.append({"event": "pass", "index": index, "name": spec["name"], "seconds": 0.0,
                           "functions": [], "ir": f"# {job.variant} after {spec['name']}\n"})
        if stage:
            events.append({"event": "stage", "stage": stage})
        if not ends:
            return events
        status = outcome.get("status", "ok")
        error_type = outcome.get("error_type", None if status == "ok" else "FakeError")
        message = outcome.get("message", None if status == "ok" else f"scripted {status}")
        events.append({"event": "result", "status": status, "stage": stage,
                       "error_type": error_type, "message": message,
                       "signature": f"{error_type}: {message}" if error_type else None,
                       "outputs": None, "tvm": tvm})
        return events


def fake_sleep(seconds: float, tag: str) -> dict[str, Any]:
    """A script case that the FakeRuntime ends as ok after `seconds`."""
    return {"title": f"sleep {seconds} {tag}",
            "script": f"{DIRECTIVE} {json.dumps({'sleep': seconds})}\n# {tag}\nprint('done')\n"}


def record(settings: Settings) -> None:
    """Write FINGERPRINTS: the fingerprints of RECORDED as the local runtime makes them
    (LocalRuntime.fingerprint is provision: provisioned here first if missing)."""
    from tvmrepro.environments import default_catalog
    from worker.environments.provision import provision

    found = {env_id: provision(settings, default_catalog().get(env_id)) for env_id in RECORDED}
    FINGERPRINTS.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    record(Settings.from_env({"TVMREPRO_HOME": os.environ.get(
        "TVMREPRO_TEST_HOME", str(Path.home() / ".cache" / "tvmrepro-test"))}))
