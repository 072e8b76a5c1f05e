"""The deployment against the REAL kube-apiserver (the session's control plane): the example
overlay, rendered by `kubectl kustomize`, is accepted by `kubectl apply --dry-run=server` (with
minimal CRDs for the Prometheus Operator's ServiceMonitor and PrometheusRule); the node agent's
Job, rendered from the shipped template, is created by the bot's own ServiceAccount, and a
retried create meets 409 and reads the same Job.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from integrations.cluster import Outcome
from integrations.k8s import KubernetesCluster, KubernetesEndpoint
from integrations.node_agent import AgentRequest
from integrations.node_jobs import load_job_template
from tests.servers.kube_real_world import RealKube, wait_until
from tests.servers.prometheus import require_binary

ROOT = Path(__file__).resolve().parents[2]
OVERLAY = ROOT / "deploy" / "kubernetes" / "overlays" / "example"
TEMPLATE = ROOT / "deploy" / "kubernetes" / "node-agent" / "job-template.yaml"
MONITORING = {"ServiceMonitor": "servicemonitors", "PrometheusRule": "prometheusrules"}


def _crd(kind: str, plural: str) -> dict[str, Any]:
    """A schema-less CRD standing in for the Prometheus Operator's."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


def test_the_example_overlay_is_accepted_by_the_api_server(real_kube: RealKube) -> None:
    kubectl = require_binary("kubectl", package="kubectl")
    rendered = subprocess.run(
        [kubectl, "kustomize", str(OVERLAY)], capture_output=True, text=True, timeout=60
    )
    assert rendered.returncode == 0, rendered.stderr
    documents = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    for kind, plural in MONITORING.items():
        try:
            real_kube.ext.create_custom_resource_definition(_crd(kind, plural))
        except client.ApiException as exc:
            assert exc.status == 409, exc

    def served() -> bool:
        groups = client.ApisApi(real_kube.api).get_api_versions().groups
        return any(g.name == "monitoring.coreos.com" for g in groups)

    wait_until(served, what="the monitoring.coreos.com CRDs to be served")
    for namespace in {d["metadata"]["name"] for d in documents if d["kind"] == "Namespace"}:
        real_kube.ensure_namespace(namespace)  # a dry run creates none
    applied = subprocess.run(
        [kubectl, "--kubeconfig", str(real_kube.plane.kubeconfig), "apply",
         "--dry-run=server", "-f", "-"],
        input=rendered.stdout, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    kinds = {d["kind"] for d in documents}
    assert {"Deployment", "ClusterRole", "ServiceMonitor", "PrometheusRule"} <= kinds
    assert applied.stdout.count("(server dry run)") == len(documents), applied.stdout


def test_the_node_agent_job_is_created_once_by_the_bot(real_kube: RealKube) -> None:
    real_kube.reset()
    real_kube.add_node("gpu-node-01")
    real_kube.ensure_namespace("gpu-oncall-agent")
    request = AgentRequest(node="gpu-node-01", action="gpu_reset", gpu="5", idempotency_key="k1")
    job = load_job_template(TEMPLATE).render(
        request, namespace="gpu-oncall-agent", timeout_seconds=120
    )
    endpoint = KubernetesEndpoint(kubeconfig=str(real_kube.kubeconfig), in_cluster=False)
    cluster = KubernetesCluster.from_endpoint(endpoint, retries=0)
    try:
        first = cluster.create_job(job)
        again = cluster.create_job(job)  # a retried request: 409, then a read
        assert first.outcome is Outcome.CHANGED and again.outcome is Outcome.ALREADY_DONE
        assert again.name == first.name and again.state == "running"  # no Job controller here
        assert cluster.job_logs(first.name, "gpu-oncall-agent") == ""  # no pod yet
    finally:
        cluster.close()
    stored = real_kube.batch.read_namespaced_job(first.name, "gpu-oncall-agent")
    assert stored.spec.template.spec.node_name == "gpu-node-01"
    assert stored.spec.template.spec.containers[0].security_context.privileged is True
