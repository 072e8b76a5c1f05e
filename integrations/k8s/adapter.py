"""KubernetesCluster: the Cluster port over the Kubernetes API, one thin method per port call;
the work is in `reads`, `writes`, `draining` and `permissions`, every request in `transport`."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection, Mapping
from datetime import datetime, timedelta
from typing import Any

import yaml
from kubernetes import client

from integrations.cluster import (
    ClusterEvent,
    DrainReport,
    JobRun,
    NodeCount,
    NodeInfo,
    NodeSample,
    Outcome,
    Permission,
    PodInfo,
    RemediationPause,
)
from integrations.errors import ClusterError
from integrations.k8s import draining, permissions, reads, writes
from integrations.k8s.connection import (
    KubernetesEndpoint,
    impersonate_groups,
    in_cluster,
    kubeconfig_impersonation,
    make_configuration,
)
from integrations.k8s.node_cache import NodeCache
from integrations.k8s.reads import KERNEL_LOG_QUERY
from integrations.k8s.transport import DEFAULT_TUNING, KubernetesTuning, Transport
from integrations.names import check_node_name


class KubernetesCluster:
    """The Cluster port over the Kubernetes API."""

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        tuning: KubernetesTuning = DEFAULT_TUNING,
        kernel_log_query: str = KERNEL_LOG_QUERY,
        watch_nodes: bool = False,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.transport = Transport(api_client, tuning, clock=clock, sleep=sleep)
        self.api = api_client
        self.host = self.transport.host
        self.kernel_log_query = kernel_log_query
        self.node_cache: NodeCache | None = None
        if watch_nodes:
            self.watch_nodes()

    @classmethod
    def from_endpoint(
        cls, endpoint: KubernetesEndpoint, *, tuning: KubernetesTuning | None = None, **options: Any
    ) -> KubernetesCluster:
        """Connect as `endpoint` says, paced by `tuning` (default: the endpoint's timeout, retry
        and rate fields). `options` are constructor arguments or single tuning fields
        (`retries=0`), which win over `tuning`."""
        fields = {f.name for f in dataclasses.fields(KubernetesTuning)}
        tuning = dataclasses.replace(
            tuning or _endpoint_tuning(endpoint),
            **{k: v for k, v in options.items() if k in fields},
        )
        options = {k: v for k, v in options.items() if k not in fields}
        api_client = client.ApiClient(make_configuration(endpoint))
        if not endpoint.host and not in_cluster(endpoint):
            try:
                acting = kubeconfig_impersonation(endpoint.kubeconfig, endpoint.context)
            except (OSError, yaml.YAMLError) as exc:
                raise ClusterError(f"cannot read the kubeconfig's impersonation: {exc}") from exc
            headers: Any = api_client.default_headers  # set_default_header is untyped
            headers.update(acting.headers() if acting else {})
            if acting and acting.groups:
                impersonate_groups(api_client, acting.groups)
        return cls(api_client, tuning=tuning, **options)

    def watch_nodes(self) -> NodeCache:
        """Keep the fleet's nodes in an informer-style cache (one list, then one watch, on a
        daemon thread) for the pool and domain reads of the safety limits and the impact read:
        for a long-lived process (`serve`); a one-shot command lists by label instead."""
        if self.node_cache is None:
            self.node_cache = NodeCache(self.transport)
            self.node_cache.start()
        return self.node_cache

    def close(self) -> None:
        """Stop the node cache's watch, then close the connection pool."""
        if self.node_cache is not None:
            self.node_cache.close()
        self.transport.close()

    # --- reads -----------------------------------------------------------------------------

    def nodes(
        self,
        names: Collection[str] | None = None,
        *,
        labels: Mapping[str, str | None] | None = None,
    ) -> list[NodeInfo]:
        return reads.nodes(self.transport, names, labels=labels, cache=self.node_cache)

    def first_nodes(self, labels: Mapping[str, str | None], *, limit: int) -> NodeSample:
        return reads.first_nodes(self.transport, labels, limit=limit, cache=self.node_cache)

    def count_nodes(self, labels: Mapping[str, str | None]) -> NodeCount:
        return reads.count_nodes(self.transport, labels, cache=self.node_cache)

    def pods_on(self, node: str) -> list[PodInfo]:
        return reads.pods_on(self.transport, node)

    def events(self, node: str, *, since: datetime) -> list[ClusterEvent]:
        return reads.events(self.transport, node, since=since)

    def pod_logs(
        self,
        pod: str,
        namespace: str,
        *,
        tail_lines: int = 500,
        container: str | None = None,
        since: timedelta | None = None,
    ) -> str:
        return reads.pod_logs(
            self.transport, pod, namespace, tail_lines=tail_lines, container=container, since=since
        )

    def node_logs(self, node: str, *, tail_lines: int = 500) -> str:
        return reads.node_logs(
            self.transport, node, query=self.kernel_log_query, tail_lines=tail_lines
        )

    def remediation_pauses(self, node: NodeInfo) -> list[RemediationPause]:
        return reads.remediation_pauses(self.transport, node)

    def read_job(self, name: str, namespace: str) -> JobRun:
        return reads.read_job(self.transport, name, namespace)

    def job_logs(self, name: str, namespace: str, *, tail_lines: int = 20) -> str:
        return reads.job_logs(self.transport, name, namespace, tail_lines=tail_lines)

    def check_permissions(self, needed: Collection[Permission]) -> list[Permission]:
        return permissions.check_permissions(self.transport, needed)

    def identity(self) -> str:
        """Who the API server says the bot is (SelfSubjectReview), impersonation applied."""
        return permissions.who_am_i(self.transport)

    # --- writes ----------------------------------------------------------------------------

    def cordon(self, node: str) -> Outcome:
        return writes.set_unschedulable(self.transport, check_node_name(node), on=True)

    def uncordon(self, node: str) -> Outcome:
        return writes.set_unschedulable(self.transport, check_node_name(node), on=False)

    def taint(self, node: str, *, key: str, value: str = "", effect: str = "NoSchedule") -> Outcome:
        return writes.taint(self.transport, node, key=key, value=value, effect=effect)

    def untaint(self, node: str, *, key: str, effect: str = "NoSchedule") -> Outcome:
        return writes.untaint(self.transport, node, key=key, effect=effect)

    def annotate(self, node: str, annotations: Mapping[str, str | None]) -> Outcome:
        return writes.annotate(self.transport, node, annotations)

    def label(self, node: str, labels: Mapping[str, str | None]) -> Outcome:
        return writes.label(self.transport, node, labels)

    def delete_pod(self, pod: str, namespace: str, *, grace: timedelta) -> Outcome:
        return writes.delete_pod(self.transport, pod, namespace, grace=grace)

    def create_job(self, manifest: Mapping[str, Any]) -> JobRun:
        return writes.create_job(self.transport, manifest)

    def drain(self, node: str, *, grace: timedelta) -> DrainReport:
        return draining.drain(self.transport, node, grace=grace)


def _endpoint_tuning(endpoint: KubernetesEndpoint) -> KubernetesTuning:
    return KubernetesTuning(
        timeout_seconds=endpoint.timeout_seconds,
        retries=endpoint.retries,
        backoff_seconds=endpoint.backoff_seconds,
        qps=endpoint.qps,
        burst=endpoint.burst,
    )
