"""What the bisection tests share: scripts whose behaviour depends on the TVM release they meet,
and a worker serving many environments of a test stack."""

from __future__ import annotations

import subprocess
from typing import Any

CPU_RELEASES = ["tvm-0.25.0rc0-cpu", "tvm-0.25.0rc1-cpu", "tvm-0.25.0-cpu", "tvm-0.25.0.post1-cpu",
                "tvm-0.26.0rc0-cpu", "tvm-0.26.0-cpu", "tvm-0.27.0rc0-cpu", "tvm-0.27.0rc1-cpu",
                "tvm-0.27.0-cpu", "tvm-0.27.0.post1-cpu"]
SKIP_RANGE = ["tvm-0.25.0rc0-cpu", "tvm-0.25.0rc1-cpu", "tvm-0.25.0-cpu"]

# Fails on 0.25.0rc0, needs an API that 0.25.0rc1 lacks (incompatible there), passes after.
SKIP_IN_THE_MIDDLE = """\
import tvm
from tvm import relax

version = tvm.__version__
if version == "0.25.0rc1":
    relax.an_api_this_release_lacks  # AttributeError on the module: not expressible here
if version.startswith("0.25.0rc"):
    raise RuntimeError("the bug of the release candidates")
print("fine on", version)
"""


def skip_in_the_middle() -> dict[str, Any]:
    """A script case: bad on 0.25.0rc0, incompatible on 0.25.0rc1, good on 0.25.0 and later."""
    return {"title": "incompatible in the middle", "script": SKIP_IN_THE_MIDDLE}


def fixed_in_027(sleep_s: float = 0.0, tag: str = "") -> dict[str, Any]:
    """A script case that fails before 0.27 and passes from it on (after sleeping)."""
    script = (f"import time\nimport tvm\n# {tag}\ntime.sleep({sleep_s})\n"
              "if not tvm.__version__.startswith('0.27'):\n"
              "    raise ValueError('fixed in 0.27')\nprint('ok')\n")
    return {"title": f"fixed in 0.27 {tag}", "script": script}


def start_worker_for(stack: Any, env_ids: list[str], concurrency: int = 2) -> subprocess.Popen[bytes]:
    """One worker process serving every one of env_ids; waits until it heartbeats."""
    before = stack.worker_ids(env_ids[-1])
    args = ["worker", "--concurrency", str(concurrency), "--loglevel", "INFO"]
    for env_id in env_ids:
        args += ["--env", env_id]
    proc: subprocess.Popen[bytes] = stack._spawn("worker-many", *args)
    stack.workers["many"] = proc
    stack._until(lambda: stack.worker_ids(env_ids[-1]) - before, "a worker for the range", 600)
    return proc
