"""KubernetesCluster on the REAL kube-apiserver: who the bot is, and what a kubelet-less node
answers.

- A kubeconfig user with `as:` acts as that identity (Impersonate-User), as kubectl does: the
  Python client's loader ignored it, so the bot acted with the underlying admin credentials and
  `cluster check` granted every permission to an identity that holds none. `identity()` names
  whom the API server authenticated (SelfSubjectReview).
- `as-groups` are sent as one Impersonate-Group header each: the identity holds the union of
  its groups' RBAC. What the bot cannot send (`as-user-extra`) is refused at start with one
  line.
- The node-log proxy of a node whose kubelet cannot answer (here: no kubelet, no address) is a
  ClusterError naming the NodeLogQuery feature, after ONE request: a deterministic 500 is not
  retried.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from bot.cli.checking import render_check
from bot.config import KubernetesSettings, Settings, StorageSettings
from integrations.errors import ClusterError, ClusterForbidden
from integrations.k8s import REQUIRED_PERMISSIONS, KubernetesCluster, KubernetesEndpoint
from tests.servers.kube_real_world import RealKube
from tests.servers.kube_world import FakeTimer

NOBODY = "nobody"


def _admin_as(real: RealKube, path: Path, **impersonation: Any) -> Path:
    pki = real.plane.workdir / "pki"
    user = {"client-certificate": str(pki / "admin.crt"), "client-key": str(pki / "admin.key")}
    return real.plane.write_kubeconfig(path, user=user | impersonation)


@pytest.fixture
def nobody(real_kube: RealKube) -> str:
    """A ServiceAccount bound to nothing."""
    real_kube.ensure_namespace("gpu-oncall")
    try:
        real_kube.core.create_namespaced_service_account(
            "gpu-oncall", {"metadata": {"name": NOBODY}}
        )
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    return f"system:serviceaccount:gpu-oncall:{NOBODY}"


def test_impersonation_in_the_kubeconfig_is_who_the_bot_acts_as(
    real_kube: RealKube, nobody: str, tmp_path: Path
) -> None:
    kubeconfig = _admin_as(real_kube, tmp_path / "kc", **{"as": nobody})
    endpoint = KubernetesEndpoint(kubeconfig=str(kubeconfig), in_cluster=False)
    cluster = KubernetesCluster.from_endpoint(endpoint, retries=0)
    try:
        assert cluster.identity().startswith(nobody)
        answers = {p.describe(): p.allowed for p in cluster.check_permissions(REQUIRED_PERMISSIONS)}
        assert answers["list nodes"] is False and answers["patch nodes"] is False
        assert answers["create pods/eviction"] is False
        with pytest.raises(ClusterError, match="may not list nodes"):
            cluster.nodes()
    finally:
        cluster.close()


def test_cluster_check_prints_the_identity_it_checked(
    real_kube: RealKube, nobody: str, tmp_path: Path
) -> None:
    from bot.cli.checking import check_cluster

    kubeconfig = _admin_as(real_kube, tmp_path / "kc", **{"as": nobody})
    settings = Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        cluster="kubernetes",
        telemetry="sim",
        kubernetes=KubernetesSettings(kubeconfig=kubeconfig, in_cluster=False, retries=0),
    )
    report = check_cluster(settings)
    lines = render_check(report)
    assert lines[0].startswith(f"Identity: {nobody} (groups: system:serviceaccounts")
    assert not report.ok and "permissions missing" in lines[-1]


def test_the_bots_own_service_account_holds_every_permission(real_kube: RealKube) -> None:
    real_kube.reset()
    endpoint = KubernetesEndpoint(kubeconfig=str(real_kube.kubeconfig), in_cluster=False)
    cluster = KubernetesCluster.from_endpoint(endpoint, retries=0)
    try:
        assert cluster.identity().startswith("system:serviceaccount:gpu-oncall:gpu-oncall")
        assert all(p.allowed for p in cluster.check_permissions(REQUIRED_PERMISSIONS))
    finally:
        cluster.close()


def _bind_groups(real: RealKube) -> None:
    """team-nodes may list nodes (a ClusterRoleBinding); team-pods may list pods in `ml` (a
    RoleBinding): neither alone holds both."""
    real.ensure_namespace("ml")
    objects: list[tuple[Any, Any]] = [
        (real.rbac.create_cluster_role, {"metadata": {"name": "team-nodes"}, "rules": [
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]}),
        (real.rbac.create_cluster_role_binding, {"metadata": {"name": "team-nodes"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "team-nodes"},
            "subjects": [{"kind": "Group", "name": "team-nodes",
                          "apiGroup": "rbac.authorization.k8s.io"}]}),
        (lambda body: real.rbac.create_namespaced_role("ml", body), {
            "metadata": {"name": "team-pods"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}),
        (lambda body: real.rbac.create_namespaced_role_binding("ml", body), {
            "metadata": {"name": "team-pods"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": "team-pods"},
            "subjects": [{"kind": "Group", "name": "team-pods",
                          "apiGroup": "rbac.authorization.k8s.io"}]}),
    ]  # fmt: skip
    for create, body in objects:
        try:
            create(body)
        except client.ApiException as exc:
            if exc.status != 409:
                raise


def _as_alice(real: RealKube, path: Path, groups: list[str]) -> KubernetesCluster:
    kubeconfig = _admin_as(real, path, **{"as": "alice", "as-groups": groups})
    endpoint = KubernetesEndpoint(kubeconfig=str(kubeconfig), in_cluster=False)
    return KubernetesCluster.from_endpoint(endpoint, retries=0)


def test_two_impersonated_groups_hold_the_union_of_their_rbac(
    real_kube: RealKube, tmp_path: Path
) -> None:
    from bot.cli.checking import check_cluster

    _bind_groups(real_kube)
    both = _as_alice(real_kube, tmp_path / "both", ["team-nodes", "team-pods"])
    nodes_only = _as_alice(real_kube, tmp_path / "one", ["team-nodes"])
    try:
        assert both.identity() == "alice (groups: team-nodes, team-pods)"
        both.nodes()  # team-nodes' ClusterRoleBinding
        assert both.job_logs("no-such-job", "ml") == ""  # team-pods' RoleBinding: no pods
        nodes_only.nodes()
        with pytest.raises(ClusterForbidden, match="list pods"):
            nodes_only.job_logs("no-such-job", "ml")
    finally:
        both.close()
        nodes_only.close()
    settings = Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        cluster="kubernetes",
        telemetry="sim",
        kubernetes=KubernetesSettings(kubeconfig=tmp_path / "both", in_cluster=False, retries=0),
    )
    assert render_check(check_cluster(settings))[0] == (
        "Identity: alice (groups: team-nodes, team-pods)"
    )


@pytest.mark.parametrize(
    "impersonation, refused",
    [
        ({"as": "alice", "as-user-extra": {"scopes": ["x"]}}, "as-user-extra"),
        ({"as-groups": ["a"]}, "need `as`"),
    ],
    ids=["extra", "groups-without-user"],
)
def test_impersonation_the_bot_cannot_send_is_refused_at_start(
    real_kube: RealKube, tmp_path: Path, impersonation: dict[str, Any], refused: str
) -> None:
    kubeconfig = _admin_as(real_kube, tmp_path / "kc", **impersonation)
    endpoint = KubernetesEndpoint(kubeconfig=str(kubeconfig), in_cluster=False)
    with pytest.raises(ClusterError, match=refused) as caught:
        KubernetesCluster.from_endpoint(endpoint)
    assert "\n" not in str(caught.value)


def test_a_node_log_query_no_kubelet_answers_fails_once_naming_the_feature(
    real_kube: RealKube,
) -> None:
    real_kube.reset()
    real_kube.add_node("gpu-node-00")
    timer = FakeTimer()
    endpoint = KubernetesEndpoint(kubeconfig=str(real_kube.kubeconfig), in_cluster=False)
    cluster = KubernetesCluster.from_endpoint(endpoint, clock=timer.clock, sleep=timer.sleep)
    sent: list[str] = []
    rest: Any = cluster.api.rest_client
    request = rest.request
    rest.request = lambda method, url, *a, **kw: sent.append(url) or request(method, url, *a, **kw)
    try:
        with pytest.raises(ClusterError, match="NodeLogQuery") as caught:
            cluster.node_logs("gpu-node-00")
    finally:
        cluster.close()
    assert "HTTP 500" in str(caught.value) and "no preferred addresses" in str(caught.value)
    assert len(sent) == 1 and "/proxy/logs/" in sent[0]  # not retried three times
    assert timer.slept == []
