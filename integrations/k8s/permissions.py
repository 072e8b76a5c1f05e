"""The API permissions the adapter's calls need, and their review (SelfSubjectAccessReview).

`REQUIRED_PERMISSIONS` lists exactly what the adapter calls (deploy/kubernetes/base/
clusterrole.yaml grants them; tests/deploy/test_rbac_matches_adapter.py keeps both honest).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Protocol, TypeVar

from kubernetes import client

from integrations.cluster import Permission
from integrations.errors import ClusterError

T = TypeVar("T")


class Transport(Protocol):
    """What the reviews use of `integrations.k8s.transport.Transport` (a protocol, so that
    module and this one do not import each other, not even for typing)."""

    api: Any
    authz: Any
    timeout: float

    def send(self, need: Permission, call: Callable[[], T]) -> T: ...

GET_NODES = Permission("get", "nodes")
LIST_NODES = Permission("list", "nodes")
WATCH_NODES = Permission("watch", "nodes")  # the node cache of a long-lived `serve`
PATCH_NODES = Permission("patch", "nodes")
NODE_PROXY = Permission("get", "nodes", subresource="proxy")
GET_PODS = Permission("get", "pods")
LIST_PODS = Permission("list", "pods")
DELETE_PODS = Permission("delete", "pods")
POD_LOGS = Permission("get", "pods", subresource="log")
EVICT_PODS = Permission("create", "pods", subresource="eviction")
LIST_EVENTS = Permission("list", "events")
REVIEW_ACCESS = Permission("create", "selfsubjectaccessreviews", group="authorization.k8s.io")
NHC_GROUP, NHC_VERSION, NHC_PLURAL = "remediation.medik8s.io", "v1alpha1", "nodehealthchecks"
LIST_HEALTH_CHECKS = Permission("list", NHC_PLURAL, group=NHC_GROUP)

CREATE_JOBS = Permission("create", "jobs", group="batch")
GET_JOBS = Permission("get", "jobs", group="batch")

REQUIRED_PERMISSIONS: tuple[Permission, ...] = (
    GET_NODES,
    LIST_NODES,
    WATCH_NODES,
    PATCH_NODES,
    NODE_PROXY,
    GET_PODS,
    LIST_PODS,
    DELETE_PODS,
    POD_LOGS,
    EVICT_PODS,
    LIST_EVENTS,
    LIST_HEALTH_CHECKS,
    REVIEW_ACCESS,
)
"""Every (verb, resource) the adapter calls: `gpu-oncall cluster check` reviews these."""

JOB_PERMISSIONS: tuple[Permission, ...] = (CREATE_JOBS, GET_JOBS)
"""What the node agent's Job variant adds (`agent.mode: job`), granted by a Role in the agent's
namespace only (deploy/kubernetes/node-agent/rbac.yaml), never cluster-wide: a privileged Job
anywhere would be root on every node. Its pods' logs use LIST_PODS and POD_LOGS above."""


REVIEW_SELF = Permission("create", "selfsubjectreviews", group="authentication.k8s.io")
"""`cluster check`'s "who am I" (granted to every authenticated user by system:basic-user)."""


def who_am_i(api: Transport) -> str:
    """The identity the API server authenticated (SelfSubjectReview): `user (groups: ...)`,
    after any impersonation, so `cluster check` names whom it checked."""
    review = client.V1SelfSubjectReview(
        api_version="authentication.k8s.io/v1", kind="SelfSubjectReview"
    )
    authn = client.AuthenticationV1Api(api.api)
    try:
        answer = api.send(
            REVIEW_SELF,
            lambda: authn.create_self_subject_review(review, _request_timeout=api.timeout),
        )
    except ClusterError as exc:  # API servers before 1.28 do not serve it
        return f"unknown (SelfSubjectReview not answered: {exc})"
    info = answer.status.user_info if answer.status else None
    if info is None or not info.username:
        return "unknown (the API server's SelfSubjectReview named no user)"
    groups = [g for g in info.groups or () if g != "system:authenticated"]
    return info.username + (f" (groups: {', '.join(groups)})" if groups else "")


def check_permissions(api: Transport, needed: Collection[Permission]) -> list[Permission]:
    """One SelfSubjectAccessReview per permission, for the configured identity."""
    return [_review(api, p) for p in needed]


def _review(api: Transport, need: Permission) -> Permission:
    review = client.V1SelfSubjectAccessReview(
        api_version="authorization.k8s.io/v1",
        kind="SelfSubjectAccessReview",
        spec=client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(
                verb=need.verb,
                group=need.group,
                resource=need.resource,
                subresource=need.subresource or None,
                namespace=need.namespace or None,
            )
        ),
    )
    answer = api.send(
        REVIEW_ACCESS,
        lambda: api.authz.create_self_subject_access_review(review, _request_timeout=api.timeout),
    )
    status = answer.status
    allowed = bool(status and status.allowed)
    reason = (status.reason or status.evaluation_error or "") if status else ""
    return Permission(
        verb=need.verb,
        resource=need.resource,
        group=need.group,
        subresource=need.subresource,
        namespace=need.namespace,
        allowed=allowed,
        reason=reason or ("" if allowed else "no RBAC rule grants it"),
    )
