"""A small simulated fleet, the ClusterRole's permissions, and a KubernetesCluster pointed at
the fake API server with a fake timer: shared by the Cluster contract suite, the adapter's own
tests, the RBAC test and the bench.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from integrations.k8s import (
    JOB_PERMISSIONS,
    REQUIRED_PERMISSIONS,
    KubernetesCluster,
    KubernetesEndpoint,
)
from simulator import Fleet
from simulator.scenarios import parse_scenario
from tests.servers.fake_kube import FakeKube

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(minutes=5)
CLUSTERROLE = Path(__file__).parents[2] / "deploy" / "kubernetes" / "base" / "clusterrole.yaml"
AGENT_RBAC = Path(__file__).parents[2] / "deploy" / "kubernetes" / "node-agent" / "rbac.yaml"
MIRROR = "kubernetes.io/config.mirror"
SCENARIO: dict[str, Any] = {
    "apiVersion": "gpu-oncall/v1",
    "kind": "Scenario",
    "metadata": {"name": "cluster-contract"},
    "fleet": {
        "nodes": 5,
        "dcgm_counters": "all",
        "workloads": [
            {"kind": "training", "name": "llm-pretrain", "nodes": "gpu-node-[00-01]"},
            {"kind": "inference", "name": "vllm-chat", "nodes": "gpu-node-[02-02]"},
        ],
    },
    "faults": [
        {"kind": "ecc_dbe_storm", "node": "gpu-node-01", "gpu": 5, "start": "-10m"},
        {"kind": "pod_oom_killed", "workload": "llm-pretrain", "start": "-5m"},
    ],
    "trigger": {"command": "diagnose gpu-node-01"},
}


def role_permissions(path: Path = CLUSTERROLE) -> set[tuple[str, str, str, str]]:
    """(verb, group, resource, subresource) for every rule of the (Cluster)Role YAML (the first
    Role or ClusterRole document of the file)."""
    documents = yaml.safe_load_all(path.read_text())
    role = next(d for d in documents if d and d["kind"] in ("Role", "ClusterRole"))
    granted = set()
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                name, _, sub = resource.partition("/")
                granted |= {(verb, group, name, sub) for verb in rule["verbs"]}
    return granted


def required_permissions() -> set[tuple[str, str, str, str]]:
    return {(p.verb, p.group, p.resource, p.subresource) for p in REQUIRED_PERMISSIONS}


def job_permissions() -> set[tuple[str, str, str, str]]:
    """What the node agent's Job variant needs in its namespace (the Role in AGENT_RBAC)."""
    return {(p.verb, p.group, p.resource, p.subresource) for p in JOB_PERMISSIONS}


class FakeTimer:
    """A monotonic clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def make_kubernetes(fake: FakeKube, tmp_path: Path, **options: Any) -> KubernetesCluster:
    """KubernetesCluster from a kubeconfig pointing at the fake, with a fake timer."""
    timer = options.pop("timer", None) or FakeTimer()
    endpoint = KubernetesEndpoint(
        kubeconfig=str(fake.write_kubeconfig(tmp_path / "kubeconfig")), in_cluster=False
    )
    return KubernetesCluster.from_endpoint(
        endpoint, clock=timer.clock, sleep=timer.sleep, **options
    )


def contract_fleet() -> Fleet:
    """The contract fleet at NOW: 5 nodes, a training job on 00-01, an inference service on 02,
    an ECC storm on 01 and an OOM kill in the training job."""
    return Fleet(parse_scenario(SCENARIO), lambda: NOW, t0=T0)
