"""deploy/kubernetes/: every manifest valid by schema, offline (no cluster), and its parts agree.

Kubernetes' own kinds are checked against the JSON schemas kubernetes-validate bundles (strict:
a field the kind does not have is an error). KEDA's ScaledObject is a custom resource those
schemas lack: it is checked against SCALED_OBJECT below, written for the fields of KEDA's CRD
(keda.sh/v1alpha1) that the manifest uses, and its scaling query against the metrics the API
exposes.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from service.app import create_app
from tests.conftest import REPO
from tvmrepro.settings import Settings

MANIFESTS = REPO / "deploy" / "kubernetes"
KUBERNETES_VERSION = "1.30"  # the oldest release the manifests are meant for
NAMESPACE = "tvmrepro"
KEDA = "keda.sh/v1alpha1"
_STRING = {"type": "string", "minLength": 1}
_COUNT = {"type": "integer", "minimum": 0}
# What KEDA's ScaledObject CRD requires and allows of the fields used here (spec.scaleTargetRef
# and spec.triggers are required; a trigger's type and metadata; a Prometheus trigger's
# serverAddress, query and threshold), unknown fields refused so that a typo is caught.
SCALED_OBJECT: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": KEDA},
        "kind": {"const": "ScaledObject"},
        "metadata": {"type": "object", "required": ["name", "namespace"],
                     "properties": {"name": _STRING, "namespace": _STRING,
                                    "labels": {"type": "object"}}},
        "spec": {
            "type": "object", "additionalProperties": False,
            "required": ["scaleTargetRef", "triggers"],
            "properties": {
                "scaleTargetRef": {"type": "object", "required": ["name"],
                                   "additionalProperties": False,
                                   "properties": {"name": _STRING, "kind": _STRING,
                                                  "apiVersion": _STRING}},
                "minReplicaCount": _COUNT, "maxReplicaCount": _COUNT,
                "pollingInterval": _COUNT, "cooldownPeriod": _COUNT,
                "advanced": {"type": "object", "additionalProperties": False, "properties": {
                    "horizontalPodAutoscalerConfig": {"type": "object"},
                    "restoreToOriginalReplicaCount": {"type": "boolean"}}},
                "triggers": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "required": ["type", "metadata"],
                    "additionalProperties": False,
                    "properties": {
                        "type": _STRING, "name": _STRING,
                        "metricType": {"enum": ["AverageValue", "Value", "Utilization"]},
                        "metadata": {"type": "object",
                                     "additionalProperties": {"type": "string"}}},
                    "if": {"properties": {"type": {"const": "prometheus"}}},
                    "then": {"properties": {"metadata": {
                        "required": ["serverAddress", "query", "threshold"]}}}}},
            }},
    },
}


def documents() -> list[tuple[str, dict[str, Any]]]:
    """(file name, document) of every manifest, in order."""
    found = [(path.name, doc) for path in sorted(MANIFESTS.glob("*.yaml"))
             for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    assert found, f"no manifests in {MANIFESTS}"
    return found


def of_kind(kind: str) -> list[dict[str, Any]]:
    """Every document of one kind."""
    return [doc for _, doc in documents() if doc["kind"] == kind]


def validate(doc: dict[str, Any]) -> None:
    """Raise unless the document is valid: KEDA's by SCALED_OBJECT, the rest by Kubernetes'."""
    if doc.get("apiVersion") == KEDA:
        jsonschema.validate(doc, SCALED_OBJECT)
    else:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize(("name", "doc"), documents(),
                         ids=[f"{name}:{doc['kind']}" for name, doc in documents()])
def test_every_manifest_is_valid_by_its_schema(name: str, doc: dict[str, Any]) -> None:
    validate(doc)
    if doc["kind"] != "Namespace":
        assert doc["metadata"]["namespace"] == NAMESPACE, name


def test_the_check_sees_a_wrong_field() -> None:
    deployment = copy.deepcopy(of_kind("Deployment")[0])
    deployment["spec"]["template"]["spec"]["containers"][0]["envFromm"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(deployment)
    scaled = copy.deepcopy(of_kind("ScaledObject")[0])
    del scaled["spec"]["triggers"][0]["metadata"]["query"]
    with pytest.raises(jsonschema.ValidationError, match="query"):
        validate(scaled)
    scaled["spec"]["scaleTargetRef"] = {"nmae": "x"}
    with pytest.raises(jsonschema.ValidationError):
        validate(scaled)


def pod_labels(deployment: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = deployment["spec"]["template"]["metadata"]["labels"]
    return labels


def test_services_select_their_pods_and_pods_name_what_exists() -> None:
    deployments = {d["metadata"]["name"]: d for d in of_kind("Deployment")}
    for service in of_kind("Service"):
        selector = service["spec"]["selector"].items()
        assert any(selector <= pod_labels(d).items() for d in deployments.values()), service
    for deployment in deployments.values():
        assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels(
            deployment).items()
    named = {(d["kind"], d["metadata"]["name"]) for d in [*of_kind("ConfigMap"), *of_kind("Secret")]}
    for deployment in deployments.values():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            for source in container.get("envFrom", []):
                kind, ref = next(iter(source.items()))
                wanted = ("ConfigMap" if kind == "configMapRef" else "Secret", ref["name"])
                assert wanted in named, (deployment["metadata"]["name"], wanted)


def test_the_settings_are_ones_the_service_reads(tmp_path: Path) -> None:
    (config,) = of_kind("ConfigMap")
    (secret,) = of_kind("Secret")
    given = {**config["data"], **secret["stringData"], "TVMREPRO_HOME": str(tmp_path)}
    settings = Settings.from_env(given)  # a wrong value is a ReproError naming its variable
    assert settings.worker_concurrency == int(config["data"]["TVMREPRO_WORKER_CONCURRENCY"])


def test_keda_scales_the_worker_on_metrics_the_api_exposes(tmp_path: Path) -> None:
    (scaled,) = of_kind("ScaledObject")
    (config,) = of_kind("ConfigMap")
    workers = {d["metadata"]["name"]: d for d in of_kind("Deployment")}
    target = workers[scaled["spec"]["scaleTargetRef"]["name"]]
    command = target["spec"]["template"]["spec"]["containers"][0]["command"]
    (trigger,) = scaled["spec"]["triggers"]
    # workers = ceil((running + queued) / concurrency): the threshold is the concurrency.
    assert trigger["metricType"] == "AverageValue"
    assert trigger["metadata"]["threshold"] == config["data"]["TVMREPRO_WORKER_CONCURRENCY"]
    query = trigger["metadata"]["query"]
    served = {command[i + 1] for i, arg in enumerate(command) if arg == "--env"}
    assert set(re.findall(r'environment="([^"]+)"', query)) == served
    app = create_app(Settings.from_env({"TVMREPRO_HOME": str(tmp_path)}))
    try:
        scraped = app.test_client().get("/metrics").get_data(as_text=True)
    finally:
        app.extensions["tvmrepro"].store.dispose()
    exposed = {sample.name for family in text_string_to_metric_families(scraped)
               for sample in family.samples}
    asked = set(re.findall(r"\b(tvmrepro_\w+)\{", query))
    assert asked == {"tvmrepro_queued_runs", "tvmrepro_running_runs"} and asked <= exposed


def test_every_pod_mounts_the_shared_artifact_store() -> None:
    (claim,) = of_kind("PersistentVolumeClaim")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]  # pods on any node share it
    (config,) = of_kind("ConfigMap")
    folder = config["data"]["TVMREPRO_ARTIFACTS"]
    for deployment in of_kind("Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        volumes = {v["name"] for v in pod["volumes"]
                   if v.get("persistentVolumeClaim", {}).get("claimName") == claim["metadata"]["name"]}
        (container,) = [c for c in pod["containers"] if c["name"] in ("api", "worker")]
        mounted = {m["mountPath"] for m in container["volumeMounts"] if m["name"] in volumes}
        assert mounted == {folder}, deployment["metadata"]["name"]
