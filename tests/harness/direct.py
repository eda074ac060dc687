"""The harness run directly with an environment's interpreter, as a sandbox runs it but with no
sandbox: the request and key on stdin, the events in a file, the result made by the runner."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from images import IMAGES_DIR
from tvmrepro.cases import parse_case
from tvmrepro.environments import default_catalog
from tvmrepro.results import Result
from worker.runner import assemble_result
from worker.runtimes.base import Execution, SandboxJob, new_key
from worker.runtimes.commands import sandbox_environ
from worker.runtimes.events import Event, verified_events

# The release the frontend environment has (its TVM and its pins).
FRONTEND_ENV = "tvm-0.27.0.post1-cpu"


def run_harness(python: Path, case: dict[str, Any], workdir: Path, frontends: bool = True,
                timeout_s: float = 600) -> tuple[Result, list[Event]]:
    """Run one case (JSON, a script) through `python -m harness`; the result and the events.

    `frontends`: as in a frontend flavour's sandbox, whose harness imports TVM's frontends
    before the case; else the case imports them itself."""
    env = default_catalog().get(FRONTEND_ENV)
    flavour = env.with_frontends() if frontends else env
    data = parse_case(case).model_dump(mode="json")
    data["target"] = data.get("target") or env.target
    key, events, work = new_key(), workdir / "events.jsonl", workdir / "work"
    work.mkdir()
    request = json.dumps({"case": data, "variant": "script"}).encode()
    environ = {**sandbox_environ(flavour), "PYTHONPATH": str(IMAGES_DIR), "HOME": str(work)}
    started = time.monotonic()
    proc = subprocess.run(
        [str(python), "-m", "harness", "--events", str(events), "--workdir", str(work)],
        input=b"%d\n%s%s\n" % (len(request), request, key.hex().encode()),
        capture_output=True, env=environ, cwd=work, timeout=timeout_s)
    execution = Execution(events=verified_events(events.read_bytes(), key),
                          returncode=proc.returncode, stdout=proc.stdout.decode(errors="replace"),
                          stderr=proc.stderr.decode(errors="replace"),
                          seconds=time.monotonic() - started)
    job = SandboxJob(run_id="direct", job_id="direct", env=flavour, case=data, variant="script")
    return assemble_result(job, execution), execution.events
