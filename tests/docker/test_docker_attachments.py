"""A case's files in the Docker runtime: handed over with the request, as the local runtime's
are, and written read-only into the container's work directory before the case runs."""

from __future__ import annotations

import base64

import pytest

from tests.conftest import NEW_ENV
from tvmrepro.cases import parse_case
from tvmrepro.environments import Environment
from worker.runner import run_variant
from worker.runtimes.docker import DockerRuntime

pytestmark = [pytest.mark.docker, pytest.mark.tvm]

READS = """\
import os, stat
print(open("notes.txt").read().strip(), oct(stat.S_IMODE(os.stat("notes.txt").st_mode)))
"""


def test_a_container_run_reads_its_files(docker_runtime: DockerRuntime,
                                         docker_envs: dict[str, Environment]) -> None:
    case = parse_case({"script": READS, "files": [
        {"name": "notes.txt", "content": base64.b64encode(b"from the report\n").decode()}]})
    result = run_variant(case, "script", docker_envs[NEW_ENV], docker_runtime)
    assert result.status == "ok", (result.message, result.log.stderr[-2000:])
    assert result.log.stdout == "from the report 0o444\n"
