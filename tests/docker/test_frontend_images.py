"""Frontend images: an environment's plain image plus torch, onnx and onnxruntime, and the
Docker runtime running a report that imports them there (the frontend flavour's image).

A unit of tests of its own (tests/conftest.py), on an engine of its own: building the frontend
image takes a minute or more, beside the other Docker tests rather than after them."""

from __future__ import annotations

import time
from collections.abc import Iterator

import docker
import pytest

from tests.conftest import NEW_ENV, OLD_ENV, case_path
from tvmrepro.cases import load_case_file, parse_case
from tvmrepro.environments import default_catalog
from tvmrepro.errors import RuntimeFault
from tvmrepro.frontends import needs_frontends
from tvmrepro.settings import Settings
from worker.environments.frontend_images import (
    PLAIN_IMAGE_LABEL,
    build_frontend_image,
    current_frontend_image,
)
from worker.environments.images import PACKAGES_LABEL, Built, pins_text
from worker.runner import run_variant
from worker.runtimes.base import Limits
from worker.runtimes.docker import DockerRuntime

# An ONNX model with an operator TVM's importer refuses: the run ends in `frontend`, a stage
# the harness traces only where the container says it is a frontend flavour's.
UNSUPPORTED_OPERATOR = """\
from onnx import TensorProto, helper
from tvm.relax.frontend.onnx import from_onnx

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
graph = helper.make_graph([helper.make_node("NoSuchOperator", ["x"], ["y"])], "g", [x], [y])
from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
"""
SPEC = "import importlib.util as u; print(u.find_spec('torch') is not None)"
WARM_WAIT_S = 300


def _in(client: docker.DockerClient, image: str, code: str) -> str:
    out: bytes = client.containers.run(image, ["python3", "-c", code], network_mode="none",
                                       remove=True)
    return out.decode().strip()


@pytest.mark.docker
def test_the_frontend_image_is_the_plain_one_plus_the_frontends(
        frontend_image: Built, new_image: Built, docker_settings: Settings,
        docker_client: docker.DockerClient) -> None:
    env = default_catalog().get(NEW_ENV)
    flavour, plain = env.with_frontends(), new_image
    assert frontend_image.tag == flavour.image == "tvmrepro/tvm:0.27.0.post1-cpu-frontends"
    print(f"frontend image: built {frontend_image.built}, {frontend_image.seconds:.1f} s")
    info, base = (docker_client.api.inspect_image(tag) for tag in (flavour.image, env.image))
    labels = info["Config"]["Labels"]
    assert labels[PACKAGES_LABEL] == pins_text(flavour) and "torch==2.13.0" in labels[PACKAGES_LABEL]
    assert labels[PLAIN_IMAGE_LABEL] == plain.image_id
    # Built on the plain image: its layers are shared, and only the frontend image has torch.
    layers = base["RootFS"]["Layers"]
    assert info["RootFS"]["Layers"][:len(layers)] == layers
    assert len(info["RootFS"]["Layers"]) > len(layers)
    assert info["Config"]["User"] == "10001:10001"
    assert (_in(docker_client, env.image, SPEC), _in(docker_client, flavour.image, SPEC)) == \
        ("False", "True")
    # Current while its plain image is the one it was built on; stale after a rebuilt plain one.
    assert current_frontend_image(docker_client, flavour, plain.image_id) == frontend_image.image_id
    assert current_frontend_image(docker_client, flavour, "sha256:" + "0" * 64) is None
    again = build_frontend_image(docker_client, docker_settings, env)
    assert (again.built, again.image_id) == (False, frontend_image.image_id)


@pytest.fixture(scope="module")
def frontend_docker(docker_settings: Settings, frontend_image: Built) -> Iterator[DockerRuntime]:
    """A worker's Docker runtime: its plain environment warm from the start, as a worker's."""
    runtime = DockerRuntime(docker_settings.model_copy(update={"warm_sandboxes": 1}))
    runtime.prewarm([default_catalog().get(NEW_ENV)])
    yield runtime
    runtime.close()
    runtime.client.close()


def _wait_warm(runtime: DockerRuntime, key: tuple[str, Limits]) -> None:
    assert runtime.warm.pool is not None
    deadline = time.monotonic() + WARM_WAIT_S
    while runtime.warm.pool.count(key) < 1:
        assert time.monotonic() < deadline, f"no warm container of {key[0]} came up"
        time.sleep(0.2)


@pytest.mark.docker
def test_a_frontend_report_runs_in_the_frontend_image(frontend_docker: DockerRuntime,
                                                      frontend_image: Built) -> None:
    env = default_catalog().get(NEW_ENV)
    report = load_case_file(case_path("frontend/onnx-topk-int64-indices/report.py"))
    assert needs_frontends(report)
    started = time.monotonic()
    result = run_variant(report, "script", env, frontend_docker)  # the flavour's first: cold
    print(f"cold frontend run: {time.monotonic() - started:.1f} s")
    assert (result.status.value, result.environment) == ("ok", NEW_ENV), result.message
    assert result.isolation["image"] == frontend_image.tag
    assert result.isolation["image_id"] == frontend_image.image_id
    assert result.isolation["warm"] is False
    assert result.frontends is not None and result.frontends["torch"] == "2.13.0"
    assert "import succeeded" in result.log.stdout
    # From its first run on the flavour is served warm too, from its own image.
    flavour = env.with_frontends()
    _wait_warm(frontend_docker, (flavour.key, Limits.pooled(frontend_docker.settings, flavour)))
    failing = run_variant(parse_case({"script": UNSUPPORTED_OPERATOR}), "script", env,
                          frontend_docker)
    assert failing.isolation["warm"] is True
    assert failing.isolation["image_id"] == frontend_image.image_id
    assert (failing.status.value, failing.stage, failing.error_type) == \
        ("error", "frontend", "OpNotImplemented"), failing.message
    assert "NoSuchOperator" in (failing.message or "")


@pytest.mark.docker
def test_a_missing_frontend_image_names_the_command_that_builds_it(
        frontend_docker: DockerRuntime) -> None:
    flavour = default_catalog().get(OLD_ENV).with_frontends()
    with pytest.raises(RuntimeFault, match=f"tvmrepro images build {OLD_ENV} --frontends"):
        frontend_docker.image_id(flavour)
