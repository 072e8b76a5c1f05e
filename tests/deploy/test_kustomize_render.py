"""The Kustomize deployment, rendered by the real tool (`kubectl kustomize`, from Debian's kubectl)
and checked object by object.

Aspects: every object parses; the base has what an install needs; the Deployment refers only
to objects that exist (ServiceAccount, ConfigMaps) or to the one documented Secret (by
reference, never a value); selectors match the pod labels; the pods are non-root with a
read-only root filesystem and probes; the ClusterRole grants exactly what the adapter needs;
the overlay's runbooks pass the runbook linter; the Dockerfile is pinned and non-root; the
node-agent Job template in its ConfigMap passes the start-up check and its Role grants exactly
the Job permissions, in the privileged agent namespace only.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.engine.catalog import validate_files
from integrations.signals import load_signal_catalog
from runbooks import SIGNALS_FILE
from tests.servers.prometheus import require_binary

ROOT = Path(__file__).resolve().parents[2]
OVERLAY = ROOT / "deploy" / "kubernetes" / "overlays" / "example"
SECRET = "gpu-oncall-secrets"
PROVIDED_BY_THE_CLUSTER = {"kube-root-ca.crt"}  # every namespace has it (BoundServiceAccountToken)


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    kubectl = require_binary("kubectl", package="kubectl")
    done = subprocess.run(
        [kubectl, "kustomize", str(OVERLAY)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def _one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind} objects"
    return found[0]


def _pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return dict(_one(objects, "Deployment")["spec"]["template"])


def _containers(objects: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    spec = _pod(objects)["spec"]
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def test_every_object_parses_and_the_install_is_complete(objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        assert obj["apiVersion"] and obj["kind"] and obj["metadata"]["name"]
    kinds = Counter(o["kind"] for o in objects)
    assert kinds == Counter(
        {
            "Namespace": 2,
            "ServiceAccount": 1,
            "ClusterRole": 1,
            "ClusterRoleBinding": 1,
            "Role": 1,
            "RoleBinding": 1,
            "ConfigMap": 3,
            "Deployment": 1,
            "Service": 1,
            "PodDisruptionBudget": 1,
            "NetworkPolicy": 1,
            "ServiceMonitor": 1,
            "PrometheusRule": 1,
        }
    )
    namespaced = [o for o in objects if o["kind"] not in ("Namespace", "ClusterRole",
                                                          "ClusterRoleBinding")]  # fmt: skip
    assert {o["metadata"]["namespace"] for o in namespaced} == {"gpu-oncall", "gpu-oncall-agent"}
    agent_namespace = [o for o in namespaced if o["metadata"]["namespace"] == "gpu-oncall-agent"]
    assert sorted(o["kind"] for o in agent_namespace) == ["Role", "RoleBinding"]


def test_no_secret_value_is_rendered(objects: list[dict[str, Any]]) -> None:
    assert not [o for o in objects if o["kind"] == "Secret"]
    for container in _containers(objects):
        for env in container.get("env", []):
            if "SECRET" in env["name"] or "TOKEN" in env["name"] or "URL" in env["name"]:
                assert "value" not in env, env["name"]
                assert env["valueFrom"]["secretKeyRef"]["name"] == SECRET


def test_the_deployment_refers_only_to_objects_that_exist(objects: list[dict[str, Any]]) -> None:
    names = {(o["kind"], o["metadata"]["name"]) for o in objects}
    spec = _pod(objects)["spec"]
    assert ("ServiceAccount", spec["serviceAccountName"]) in names
    config_maps = {n for kind, n in names if kind == "ConfigMap"} | PROVIDED_BY_THE_CLUSTER
    secrets: set[str] = set()
    for container in _containers(objects):
        for source in container.get("envFrom", []):
            assert source["configMapRef"]["name"] in config_maps
        for env in container.get("env", []):
            secrets.add(env["valueFrom"]["secretKeyRef"]["name"])
    for volume in spec["volumes"]:
        if "configMap" in volume:
            assert volume["configMap"]["name"] in config_maps
        for source in volume.get("projected", {}).get("sources", []):
            if "configMap" in source:
                assert source["configMap"]["name"] in config_maps
    assert secrets == {SECRET}
    binding = _one(objects, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == _one(objects, "ClusterRole")["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": spec["serviceAccountName"], "namespace": "gpu-oncall"}
    ]


def test_selectors_match_the_pods(objects: list[dict[str, Any]]) -> None:
    labels = _pod(objects)["metadata"]["labels"]

    def matches(selector: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in selector.items())

    assert matches(_one(objects, "Deployment")["spec"]["selector"]["matchLabels"])
    assert matches(_one(objects, "Service")["spec"]["selector"])
    assert matches(_one(objects, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"])
    assert matches(_one(objects, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"])
    monitor = _one(objects, "ServiceMonitor")["spec"]
    service = _one(objects, "Service")
    assert all(service["metadata"]["labels"].get(k) == v
               for k, v in monitor["selector"]["matchLabels"].items())  # fmt: skip
    assert monitor["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}


def test_the_pods_are_hardened_and_probed(objects: list[dict[str, Any]]) -> None:
    deployment = _one(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    spec = deployment["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["automountServiceAccountToken"] is False
    assert _one(objects, "ServiceAccount")["automountServiceAccountToken"] is False
    for container in _containers(objects):
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"]["drop"] == ["ALL"]
        assert container["resources"]["requests"] and container["resources"]["limits"]
        assert container["image"] == "registry.example.com/gpu-infra/gpu-oncall:0.1.0"
    bot = spec["containers"][0]
    assert bot["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert bot["livenessProbe"]["httpGet"]["path"] == "/healthz"
    token_mounts = [
        c["name"] for c in _containers(objects)
        for m in c.get("volumeMounts", []) if "serviceaccount" in m["mountPath"]
    ]  # fmt: skip
    assert token_mounts == ["bot"]  # the migration init container gets no API token


def test_the_cluster_role_grants_exactly_what_the_adapter_needs(
    objects: list[dict[str, Any]],
) -> None:
    from integrations.k8s import REQUIRED_PERMISSIONS

    granted = {
        (verb, group, resource)
        for rule in _one(objects, "ClusterRole")["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    needed = {
        (p.verb, p.group, p.resource + (f"/{p.subresource}" if p.subresource else ""))
        for p in REQUIRED_PERMISSIONS
    }
    assert granted == needed


def test_the_overlay_runbooks_pass_the_linter(objects: list[dict[str, Any]]) -> None:
    from bot.actions.registry import default_registry

    signals = load_signal_catalog(SIGNALS_FILE).names()
    loaded, errors = validate_files(
        [OVERLAY / "runbooks"], signals=signals, actions=default_registry().names()
    )
    assert errors == [] and [item.name for item in loaded] == ["rack-power"]
    runbooks = [o for o in objects if o["kind"] == "ConfigMap"
                and o["metadata"]["name"].startswith("gpu-oncall-runbooks")]  # fmt: skip
    assert list(runbooks[0]["data"]) == ["rack-power.yaml"]


def test_the_image_is_pinned_slim_and_non_root() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    base = next(line for line in dockerfile.splitlines() if line.startswith("ARG PYTHON_IMAGE="))
    tag = base.split("=", 1)[1]
    assert "slim" in tag and tag.count(".") >= 2 and not tag.endswith(":latest")
    assert "USER 10001:10001" in dockerfile
    assert "COPY runbooks ./runbooks" in dockerfile
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "tests", "*.db"} <= set(ignored)


def test_the_node_agent_job_template_loads_and_its_role_is_namespaced(
    objects: list[dict[str, Any]],
) -> None:
    from integrations.k8s import JOB_PERMISSIONS
    from integrations.node_jobs import parse_job_template

    config = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ConfigMap"}
    bot_config = config["gpu-oncall-config"]["data"]
    assert bot_config["GPU_ONCALL_AGENT__MODE"] == "job"
    template = next(o for name, o in config.items() if name.startswith("gpu-oncall-node-agent"))
    assert template["metadata"]["namespace"] == "gpu-oncall"
    job = parse_job_template(
        yaml.safe_load(template["data"]["job-template.yaml"]), source="rendered ConfigMap"
    )
    assert job.job["spec"]["template"]["spec"]["tolerations"] == [{"operator": "Exists"}]
    volumes = {v["name"]: v for v in _pod(objects)["spec"]["volumes"]}
    assert volumes["node-agent"]["configMap"]["name"] == template["metadata"]["name"]
    namespace = next(o for o in objects if o["kind"] == "Namespace"
                     and o["metadata"]["name"] == "gpu-oncall-agent")  # fmt: skip
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    role, binding = _one(objects, "Role"), _one(objects, "RoleBinding")
    granted = {(verb, group, resource) for rule in role["rules"] for group in rule["apiGroups"]
               for resource in rule["resources"] for verb in rule["verbs"]}  # fmt: skip
    assert granted == {(p.verb, p.group, p.resource) for p in JOB_PERMISSIONS}
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gpu-oncall", "namespace": "gpu-oncall"}
    ]
