"""The shipped ClusterRole and the Kubernetes adapter agree exactly.

Covers: deploy/kubernetes/base/clusterrole.yaml is one plain ClusterRole document granting
exactly `integrations.k8s.REQUIRED_PERMISSIONS` (nothing more, nothing missing); every Cluster
port call, made over HTTP against the fake API server that grants only that role, succeeds
without a 403, every request it sends maps to a required permission (kube-apiserver's request
attributes: verb, API group, resource, subresource), and together the calls exercise every
required permission; `check_permissions` finds all of them granted under the role. The node
agent's Role (deploy/kubernetes/node-agent/rbac.yaml) grants exactly `JOB_PERMISSIONS`, in its
namespace only, and the Job calls use exactly those (plus the ClusterRole's pod reads).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from integrations.k8s import JOB_PERMISSIONS, REQUIRED_PERMISSIONS, KubernetesCluster
from tests.servers.fake_kube import FakeKube, start_fake_kube
from tests.servers.fake_kube_jobs import JobPlan
from tests.servers.kube_world import (
    AGENT_RBAC,
    CLUSTERROLE,
    T0,
    contract_fleet,
    job_permissions,
    make_kubernetes,
    required_permissions,
    role_permissions,
)

NODE = "gpu-node-01"
Key = tuple[str, str, str, str]


def test_the_clusterrole_is_one_plain_document() -> None:
    documents = list(yaml.safe_load_all(CLUSTERROLE.read_text()))
    assert len(documents) == 1
    role = documents[0]
    assert (role["apiVersion"], role["kind"]) == ("rbac.authorization.k8s.io/v1", "ClusterRole")
    assert role["metadata"]["name"] == "gpu-oncall"


def test_the_clusterrole_grants_exactly_the_required_permissions() -> None:
    granted, required = role_permissions(), required_permissions()
    assert granted - required == set(), "the role grants what the adapter never calls"
    assert required - granted == set(), "the adapter needs what the role does not grant"


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with start_fake_kube() as fake:
        fake.seed_from_fleet(contract_fleet())
        fake.add_health_check("nhc-workers", selector={}, pause_requests=["upgrade"])
        fake.grant_only(role_permissions())
        yield fake


def exercise_every_call(cluster: KubernetesCluster) -> None:
    """Each Cluster port method once, the way the bot's runbooks and actions call them."""
    cluster.nodes()
    cluster.nodes([NODE])
    cluster.pods_on(NODE)
    cluster.events(NODE, since=T0 - timedelta(hours=1))
    cluster.pod_logs("llm-pretrain-worker-1", "ml", tail_lines=10)
    cluster.node_logs(NODE, tail_lines=10)
    cluster.cordon(NODE)
    cluster.uncordon(NODE)
    cluster.taint(NODE, key="gpu-oncall.io/quarantine", value="ecc")
    cluster.untaint(NODE, key="gpu-oncall.io/quarantine")
    cluster.annotate(NODE, {"gpu-oncall.io/cordoned-by": "gpu-oncall"})
    cluster.label(NODE, {"gpu-oncall.io/protected": None})
    cluster.remediation_pauses(cluster.nodes([NODE])[0])
    cluster.delete_pod("llm-pretrain-worker-0", "ml", grace=timedelta(seconds=30))
    cluster.drain(NODE, grace=timedelta(seconds=30))
    cluster.check_permissions(REQUIRED_PERMISSIONS)


def test_every_call_stays_within_the_role_and_uses_all_of_it(
    fake: FakeKube, tmp_path: Path
) -> None:
    exercise_every_call(make_kubernetes(fake, tmp_path))
    assert [r.path for r in fake.requests if r.status == 403] == []
    unmapped = [r.path for r in fake.requests if r.permission is None]
    assert unmapped == [], "requests outside any resource path cannot be granted by RBAC"
    used: set[Key] = {r.permission for r in fake.requests if r.permission is not None}
    assert used - required_permissions() == set(), "called an API the role does not list"
    # `watch nodes` is the node cache's (serve), exercised as the bot's own ServiceAccount on
    # the real API server: tests/integrations/test_k8s_real_apiserver_node_cache.py
    watch_nodes = ("watch", "", "nodes", "")
    assert required_permissions() - used == {watch_nodes}, "a required permission is unused"


def test_check_permissions_finds_the_role_complete(fake: FakeKube, tmp_path: Path) -> None:
    answers = make_kubernetes(fake, tmp_path).check_permissions(REQUIRED_PERMISSIONS)
    assert [p.describe() for p in answers if not p.allowed] == []
    fake.grant_only(role_permissions() - {("patch", "", "nodes", "")})
    answers = make_kubernetes(fake, tmp_path).check_permissions(REQUIRED_PERMISSIONS)
    assert [p.describe() for p in answers if not p.allowed] == ["patch nodes"]


def test_the_node_agent_role_grants_exactly_the_job_permissions_in_its_namespace() -> None:
    documents = [d for d in yaml.safe_load_all(AGENT_RBAC.read_text()) if d]
    assert [d["kind"] for d in documents] == ["Role", "RoleBinding"]
    assert {d["metadata"]["namespace"] for d in documents} == {"gpu-oncall-agent"}
    assert role_permissions(AGENT_RBAC) == job_permissions()
    assert job_permissions().isdisjoint(role_permissions()), "Jobs are never granted cluster-wide"


def test_the_job_calls_stay_within_the_two_roles(tmp_path: Path) -> None:
    with start_fake_kube() as fake:
        fake.seed_from_fleet(contract_fleet())
        fake.grant_only(role_permissions() | role_permissions(AGENT_RBAC))
        fake.plan_jobs(JobPlan("Failed", reason="BackoffLimitExceeded", log=("no GPU 9",)))
        cluster = make_kubernetes(fake, tmp_path)
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "gpu-oncall-reboot-1", "namespace": "gpu-oncall-agent"},
            "spec": {
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "a"}]}}
            },
        }
        cluster.create_job(job)
        cluster.create_job(job)
        cluster.read_job("gpu-oncall-reboot-1", "gpu-oncall-agent")
        cluster.job_logs("gpu-oncall-reboot-1", "gpu-oncall-agent")
        cluster.check_permissions(JOB_PERMISSIONS)
        assert [r.path for r in fake.requests if r.status == 403] == []
        used = {r.permission for r in fake.requests if r.permission is not None}
        assert job_permissions() <= used
        assert used - job_permissions() <= required_permissions()
