"""The Cluster port on the official kubernetes client: the only package that imports
`kubernetes`.

Split along its seams: `connection` (endpoint -> client Configuration), `transport` (pacing,
retries, error translation, paging), `reads`, `writes`, `draining` (Eviction API only, never a
DELETE round a PDB), `permissions` (what the calls need and their review) and `adapter`
(KubernetesCluster, one thin method per port call). The pure parts live outside:
`integrations.k8s_records` (API objects -> records) and `integrations.throttling` (pacing).
"""

from integrations.k8s.adapter import KubernetesCluster
from integrations.k8s.connection import SERVICE_ACCOUNT_DIR, KubernetesEndpoint, make_configuration
from integrations.k8s.permissions import (
    CREATE_JOBS,
    DELETE_PODS,
    EVICT_PODS,
    GET_JOBS,
    GET_NODES,
    GET_PODS,
    JOB_PERMISSIONS,
    LIST_EVENTS,
    LIST_HEALTH_CHECKS,
    LIST_NODES,
    LIST_PODS,
    NODE_PROXY,
    PATCH_NODES,
    POD_LOGS,
    REQUIRED_PERMISSIONS,
    REVIEW_ACCESS,
    WATCH_NODES,
)
from integrations.k8s.reads import KERNEL_LOG_QUERY
from integrations.k8s.transport import KubernetesTuning
from integrations.k8s.writes import MERGE_PATCH

__all__ = [
    "CREATE_JOBS",
    "DELETE_PODS",
    "EVICT_PODS",
    "GET_JOBS",
    "GET_NODES",
    "GET_PODS",
    "JOB_PERMISSIONS",
    "KERNEL_LOG_QUERY",
    "LIST_EVENTS",
    "LIST_HEALTH_CHECKS",
    "LIST_NODES",
    "LIST_PODS",
    "MERGE_PATCH",
    "NODE_PROXY",
    "PATCH_NODES",
    "POD_LOGS",
    "REQUIRED_PERMISSIONS",
    "REVIEW_ACCESS",
    "WATCH_NODES",
    "SERVICE_ACCOUNT_DIR",
    "KubernetesCluster",
    "KubernetesEndpoint",
    "KubernetesTuning",
    "make_configuration",
]
