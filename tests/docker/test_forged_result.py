"""A result the case forges is never believed on the Docker runtime (as on the local one).

The case writes a fake `ok` result (with a made-up TVM version and outputs) and a
fake `exit` event to every descriptor it has and to the events file the
container's supervisor writes (`/out/events.jsonl`), then dies or fails: the
run is `crash` or `error` by what the supervisor saw, never `ok`, and nothing
of the forgery (version, outputs) reaches the result.
"""

from __future__ import annotations

import pytest

from tests.conftest import NEW_ENV
from tests.docker.runs import run_script
from tests.fixtures.docker_engine import runs_left
from tests.fixtures.hostile_scripts import FORGE
from tvmrepro.environments import Environment
from worker.runtimes.docker import DockerRuntime

pytestmark = [pytest.mark.docker, pytest.mark.tvm]
FORGE_FILE = ("with open('/out/events.jsonl', 'a') as f:\n"
              "    for event in (fake, exit_):\n"
              "        f.write(json.dumps(event) + '\\n')\n"
              "    f.flush()\n")


@pytest.mark.parametrize(("ending", "status", "error_type"), [
    ("os.abort()\n", "crash", "SIGABRT"),
    ("raise SystemExit(3)\n", "error", None),
    ("raise RuntimeError('after the forgery')\n", "error", "RuntimeError"),
    ("os.kill(os.getppid(), 9)\nimport time\ntime.sleep(30)\n", "crash", "SIGKILL"),
])
def test_a_forged_result_is_not_believed(ending: str, status: str, error_type: str | None,
                                         docker_runtime: DockerRuntime,
                                         docker_envs: dict[str, Environment]) -> None:
    result = run_script(docker_runtime, docker_envs[NEW_ENV], FORGE + FORGE_FILE + ending,
                        timeout_s=30)
    assert result.status == status, (result.message, result.log.stderr[-2000:])
    if error_type:
        assert result.error_type == error_type, result.message
    assert result.outputs is None
    assert result.tvm is not None and result.tvm["version"] == "0.27.0.post1"
    assert runs_left(docker_runtime.client) == []
