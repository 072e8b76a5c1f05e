"""A simulated fleet written into the REAL kube-apiserver (tests/servers/kube_apiserver.py), and
the bot's own identity there: a ServiceAccount bound to exactly
deploy/kubernetes/base/clusterrole.yaml plus the node agent's Role.

With no kubelet and no controllers, this module plays their part where the API needs it:
node status (conditions, GPU capacity/allocatable) and pod status are written through the
`status` subresources, a PodDisruptionBudget's status is computed here (as the disruption
controller would) and every pod's namespace gets its `default` ServiceAccount (the
ServiceAccount admission plugin refuses pods without one). What only a kubelet serves (node
and pod logs) is not there: reading it fails, as on a cluster whose kubelets cannot answer.

`reset()` deletes what a test wrote (nodes, pods with grace 0, events, PDBs, Jobs,
NodeHealthChecks) so each test starts from the same seeded fleet on one server per session.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from simulator import Fleet
from tests.servers import kube_objects as ko
from tests.servers.fake_kube_fleet import FleetSource, seed_objects
from tests.servers.kube_apiserver import BOT_NAMESPACE, ControlPlane
from tests.servers.kube_world import AGENT_RBAC, CLUSTERROLE

BOT_ACCOUNT = "gpu-oncall"
NHC_CRD = "nodehealthchecks.remediation.medik8s.io"
RBAC_WAIT_SECONDS = 20.0
JSON = dict[str, Any]


def _ignore(status: int, call: Callable[[], Any]) -> None:
    try:
        call()
    except client.ApiException as exc:
        if exc.status != status:
            raise


def wait_until(check: Callable[[], bool], *, what: str, seconds: float = RBAC_WAIT_SECONDS) -> None:
    """Poll `check` every 50 ms until true; fail naming `what` after `seconds` (bounded)."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {seconds:.0f}s waiting for {what}", pytrace=False)
        time.sleep(0.05)


class RealKube:
    """Admin access to a running control plane, and the objects the tests put there."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.api = plane.admin()
        self.core = client.CoreV1Api(self.api)
        self.rbac = client.RbacAuthorizationV1Api(self.api)
        self.policy = client.PolicyV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.ext = client.ApiextensionsV1Api(self.api)
        self.authz = client.AuthorizationV1Api(self.api)
        self._namespaces: set[str] = set()
        self._denied: list[tuple[str, str, str, str, str]] = []
        self.kubeconfig = plane.kubeconfig  # the bot's own, once `bot_kubeconfig` wrote it

    def close(self) -> None:
        closing: Any = self.api
        closing.close()

    # --- identity -----------------------------------------------------------------------

    def bot_kubeconfig(self, path: Path) -> Path:
        """The bot's ServiceAccount (ClusterRole + the node agent's Role), as a kubeconfig."""
        self.ensure_namespace("gpu-oncall-agent")
        kubeconfig = self.plane.service_account_kubeconfig(
            path, account=BOT_ACCOUNT, role_file=CLUSTERROLE
        )
        self.grant_roles()
        return kubeconfig

    def cli_env(self, database: Path) -> dict[str, str]:
        """The environment of a `gpu-oncall` subprocess acting as the bot's own identity on
        this API server (telemetry from the simulated fleet), storing into `database`."""
        return dict(os.environ) | {
            "GPU_ONCALL_STORAGE__URL": f"sqlite:///{database}",
            "GPU_ONCALL_IDENTITY__CLI_USER": "alice",
            "GPU_ONCALL_CLUSTER": "kubernetes",
            "GPU_ONCALL_TELEMETRY": "sim",
            "GPU_ONCALL_KUBERNETES__KUBECONFIG": str(self.kubeconfig),
            "GPU_ONCALL_KUBERNETES__IN_CLUSTER": "false",
            "GPU_ONCALL_KUBERNETES__RETRIES": "1",
        }

    def grant_roles(self) -> None:
        """(Re)apply the ClusterRole and the agent Role exactly as deployed."""
        role = next(d for d in yaml.safe_load_all(CLUSTERROLE.read_text()) if d)
        role["metadata"] = {"name": f"{BOT_NAMESPACE}-{BOT_ACCOUNT}"}
        self.rbac.replace_cluster_role(role["metadata"]["name"], role)
        for document in yaml.safe_load_all(AGENT_RBAC.read_text()):
            if not document:
                continue
            namespace = document["metadata"]["namespace"]
            name = document["metadata"]["name"]
            if document["kind"] == "Role":
                create: Callable[[], Any] = lambda d=document, n=namespace: (  # noqa: E731
                    self.rbac.create_namespaced_role(n, d)
                )
                replace: Callable[[], Any] = lambda d=document, n=namespace, m=name: (  # noqa: E731
                    self.rbac.replace_namespaced_role(m, n, d)
                )
            else:
                create = lambda d=document, n=namespace: (  # noqa: E731
                    self.rbac.create_namespaced_role_binding(n, d)
                )
                replace = lambda d=document, n=namespace, m=name: (  # noqa: E731
                    self.rbac.replace_namespaced_role_binding(m, n, d)
                )
            try:
                create()
            except client.ApiException as exc:
                if exc.status != 409:
                    raise
                replace()

    def deny(self, verb: str, resource: str, *, group: str = "", subresource: str = "") -> None:
        """Take one permission away from the bot (its roles lose that verb), and wait until
        the authorizer says so."""
        full = resource + (f"/{subresource}" if subresource else "")
        name = f"{BOT_NAMESPACE}-{BOT_ACCOUNT}"
        role = self.rbac.read_cluster_role(name)
        role.rules = _without(role.rules, verb, group, full)
        self.rbac.replace_cluster_role(name, role)
        if group == "batch":
            agent = self.rbac.read_namespaced_role("gpu-oncall-node-agent", "gpu-oncall-agent")
            agent.rules = _without(agent.rules, verb, group, full)
            self.rbac.replace_namespaced_role("gpu-oncall-node-agent", "gpu-oncall-agent", agent)
        namespace = "gpu-oncall-agent" if group == "batch" else ""
        self._denied.append((verb, resource, group, subresource, namespace))
        wait_until(
            lambda: not self.bot_may(verb, resource, group, subresource, namespace),
            what=f"RBAC to refuse {verb} {full} to the bot",
        )

    def bot_may(
        self, verb: str, resource: str, group: str = "", subresource: str = "", namespace: str = ""
    ) -> bool:
        review = client.V1SubjectAccessReview(
            spec=client.V1SubjectAccessReviewSpec(
                user=f"system:serviceaccount:{BOT_NAMESPACE}:{BOT_ACCOUNT}",
                groups=["system:serviceaccounts", "system:authenticated"],
                resource_attributes=client.V1ResourceAttributes(
                    verb=verb,
                    group=group,
                    resource=resource,
                    subresource=subresource or None,
                    namespace=namespace or None,
                ),
            )
        )
        return bool(self.authz.create_subject_access_review(review).status.allowed)

    # --- objects ------------------------------------------------------------------------

    def ensure_namespace(self, namespace: str) -> None:
        if namespace in self._namespaces:
            return
        _ignore(409, lambda: self.core.create_namespace({"metadata": {"name": namespace}}))
        _ignore(
            409,
            lambda: self.core.create_namespaced_service_account(
                namespace, {"metadata": {"name": "default"}}
            ),
        )
        self._namespaces.add(namespace)

    def add_node(self, name: str, **fields: Any) -> None:
        node = ko.node_object(name, **fields)
        status = node.pop("status")
        node["metadata"].pop("creationTimestamp", None)
        self.core.create_node(node)
        self.core.patch_node_status(name, {"status": status})
        node["status"] = status  # the lifecycle controller's taints follow the conditions
        ko.reconcile_taints(node)
        self.core.patch_node(name, {"spec": {"taints": node["spec"]["taints"]}})

    def add_pod(self, name: str, namespace: str, **fields: Any) -> None:
        self.ensure_namespace(namespace)
        pod = ko.pod_object(name, namespace, **fields)
        status = pod.pop("status")
        pod["metadata"].pop("creationTimestamp", None)
        self.core.create_namespaced_pod(namespace, pod)
        self.core.patch_namespaced_pod_status(name, namespace, {"status": status})

    def add_pdb(
        self, name: str, namespace: str, *, match_labels: Mapping[str, str], **spec: Any
    ) -> None:
        """A PDB, with the status the disruption controller would compute."""
        self.ensure_namespace(namespace)
        pdb = ko.pdb_object(name, namespace, match_labels=match_labels, **spec)
        created = self.policy.create_namespaced_pod_disruption_budget(namespace, pdb)
        selector = ",".join(f"{k}={v}" for k, v in match_labels.items())
        pods = self.core.list_namespaced_pod(namespace, label_selector=selector).items
        covered = [self.api.sanitize_for_serialization(p) for p in pods]
        allowed, desired, healthy = ko.budget(pdb, covered)
        status = {
            "observedGeneration": created.metadata.generation,
            "disruptionsAllowed": allowed,
            "desiredHealthy": desired,
            "currentHealthy": healthy,
            "expectedPods": pdb["status"]["expectedPods"],
        }
        self.policy.patch_namespaced_pod_disruption_budget_status(
            name, namespace, {"status": status}
        )

    def add_event(self, event: JSON) -> None:
        namespace = event["metadata"]["namespace"]
        self.ensure_namespace(namespace)
        event["metadata"].pop("creationTimestamp", None)
        self.core.create_namespaced_event(namespace, event)

    def install_health_check_crd(self) -> None:
        """A minimal CRD for medik8s NodeHealthChecks (cluster-scoped, schema-less)."""
        crd = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": NHC_CRD},
            "spec": {
                "group": "remediation.medik8s.io",
                "scope": "Cluster",
                "names": {
                    "plural": "nodehealthchecks",
                    "singular": "nodehealthcheck",
                    "kind": "NodeHealthCheck",
                },
                "versions": [
                    {
                        "name": "v1alpha1",
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
        _ignore(409, lambda: self.ext.create_custom_resource_definition(crd))

        def served() -> bool:
            try:
                self.custom.list_cluster_custom_object(
                    "remediation.medik8s.io", "v1alpha1", "nodehealthchecks"
                )
            except client.ApiException:
                return False
            return True

        wait_until(served, what=f"the {NHC_CRD} CRD to be served")

    def add_health_check(
        self, name: str, *, selector: JSON | None = None, pause_requests: list[str] | None = None
    ) -> None:
        self.install_health_check_crd()
        body = ko.health_check_object(name, selector=selector, pause_requests=pause_requests)
        body = {"apiVersion": "remediation.medik8s.io/v1alpha1", "kind": "NodeHealthCheck"} | body
        self.custom.create_cluster_custom_object(
            "remediation.medik8s.io", "v1alpha1", "nodehealthchecks", body
        )

    def node(self, name: str) -> JSON:
        return dict(self.api.sanitize_for_serialization(self.core.read_node(name)))

    # --- fleets -------------------------------------------------------------------------

    def seed_from_fleet(self, fleet: Fleet) -> None:
        """The fleet's nodes, pods and events, as `tests.servers.fake_kube_fleet.seed` does for
        the fake (time-dependent state is written once, at seeding)."""
        seed_objects(self, fleet)
        for event in FleetSource(fleet).events():
            self.add_event(event)

    def reset(self, namespaces: Iterable[str] = ()) -> None:
        """Delete what tests wrote; restore the bot's roles exactly as deployed."""
        for namespace in sorted(self._namespaces | set(namespaces)):
            self.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
            self.core.delete_collection_namespaced_event(namespace)
            self.policy.delete_collection_namespaced_pod_disruption_budget(namespace)
            self.batch.delete_collection_namespaced_job(namespace, propagation_policy="Background")
        self.core.delete_collection_node()
        _ignore(
            404,
            lambda: self.custom.delete_collection_cluster_custom_object(
                "remediation.medik8s.io", "v1alpha1", "nodehealthchecks"
            ),
        )
        self.grant_roles()
        denied, self._denied = self._denied, []
        for permission in denied:
            wait_until(
                lambda p=permission: self.bot_may(*p),  # type: ignore[misc]
                what=f"RBAC to grant {permission[0]} {permission[1]} to the bot again",
            )


def _without(rules: list[Any], verb: str, group: str, resource: str) -> list[Any]:
    """RBAC rules minus `verb` on `group`/`resource` (rules left with no verb are dropped)."""
    kept = []
    for rule in rules or []:
        if group in (rule.api_groups or []) and resource in (rule.resources or []):
            others = [r for r in rule.resources if r != resource]
            if others:
                kept.append(client.V1PolicyRule(
                    api_groups=rule.api_groups, resources=others, verbs=rule.verbs))  # fmt: skip
            verbs = [v for v in rule.verbs if v != verb]
            if verbs:
                kept.append(client.V1PolicyRule(
                    api_groups=rule.api_groups, resources=[resource], verbs=verbs))  # fmt: skip
            continue
        kept.append(rule)
    return kept
