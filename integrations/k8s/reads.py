"""The adapter's reads: nodes, pods, events, pod and node logs, Jobs, NodeHealthChecks."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from integrations.cluster import (
    ClusterEvent,
    JobRun,
    NodeCount,
    NodeInfo,
    NodeSample,
    PodInfo,
    RemediationPause,
    count_of,
)
from integrations.errors import (
    ClusterError,
    ClusterForbidden,
    JobNotFound,
    NodeNotFound,
    PodNotFound,
)
from integrations.k8s.node_cache import NodeCache
from integrations.k8s.permissions import (
    GET_JOBS,
    LIST_EVENTS,
    LIST_HEALTH_CHECKS,
    LIST_NODES,
    LIST_PODS,
    NHC_GROUP,
    NHC_PLURAL,
    NHC_VERSION,
    NODE_PROXY,
    POD_LOGS,
)
from integrations.k8s.transport import KubeletRefused, NotServed, Transport
from integrations.k8s_records import cluster_event, health_check_pause, job_run, node_info, pod_info
from integrations.names import (
    check_container_name,
    check_job_name,
    check_label_value,
    check_namespace,
    check_node_name,
    check_pod_name,
    check_qualified_key,
)
from integrations.selectors import InvalidSelector

logger = logging.getLogger(__name__)

KERNEL_LOG_QUERY = "/kern.log"
_NODE_LOG_HINT = (
    "the kubelet on {node} does not answer the node log query (/api/v1/nodes/{node}/proxy/"
    "logs/?query={query}); enable the NodeLogQuery feature gate and enableSystemLogHandler + "
    "enableSystemLogQuery in its kubelet configuration"
)
_EPOCH = datetime.min.replace(tzinfo=UTC)


def nodes(
    api: Transport,
    names: Collection[str] | None = None,
    *,
    labels: Mapping[str, str | None] | None = None,
    cache: NodeCache | None = None,
) -> list[NodeInfo]:
    """All nodes (one paginated list) or those `labels` select, or the named ones (one GET
    each; unknown: NodeNotFound).

    A label-selected list (a pool's or a domain's members, for the safety limits) is served
    from the API server's watch cache: etcd has no label index, so a consistent read makes
    the server read and decode every node of the fleet to return a pool; the cache answers
    from memory. It is asked for state not older than the newest node resourceVersion this
    client has written or read (`resourceVersionMatch=NotOlderThan`; `resourceVersion=0`,
    any, before it has seen one), so the bot's own cordon is always in the answer; another
    writer's change the bot has not seen may be a watch event behind (a removal in flight is
    counted from the action ledger, not from this list).

    With a `cache` (node_cache: one list+watch) a label-selected read costs no request when
    the cache holds this client's own writes (written through) and has caught up with every
    other node version this client has read; else it is the list above."""
    if names is None and labels and cache is not None:
        selector = label_selector(labels)  # validates the keys and values
        found = cache.select(labels, wanted=api.node_version)
        if found is not None:
            return found
        logger.info("node cache not current; listing nodes by label %s", selector)
    if names is None and labels:
        seen = api.node_version
        listed = api.send(
            LIST_NODES,
            lambda: api.core.list_node(
                label_selector=label_selector(labels),
                resource_version=str(seen),
                resource_version_match="NotOlderThan" if seen else None,
                _request_timeout=api.timeout,
            ),
        )
        return [node_info(n) for n in listed.items or []]
    if names is None:
        return [node_info(n) for n in api.pages(LIST_NODES, api.core.list_node)]
    wanted = [check_node_name(name) for name in names]
    return [node_info(api.read_node(name)) for name in wanted]


def first_nodes(
    api: Transport,
    labels: Mapping[str, str | None],
    *,
    limit: int,
    cache: NodeCache | None = None,
) -> NodeSample:
    """The first `limit` nodes `labels` selects, in name order: from the node cache's sorted
    index when it is current, else one list request with `limit` (a consistent read, in etcd's
    key order, which is name order; the server stops at `limit`). The count is the cache's, or
    the page's plus the server's `remainingItemCount`; a label-selected page with more after
    it has none, so its total is unknown (None)."""
    if limit < 1:
        raise ValueError(f"a bounded node read needs a limit of at least 1, not {limit}")
    selector = label_selector(labels)  # validates the keys and values
    if cache is not None:
        found = cache.first(labels, limit=limit, wanted=api.node_version)
        if found is not None:
            return found
        logger.info("node cache not current; listing %d nodes by label %s", limit, selector)
    page = api.send(
        LIST_NODES,
        lambda: api.core.list_node(
            label_selector=selector, limit=limit, _request_timeout=api.timeout
        ),
    )
    read = tuple(node_info(n) for n in (page.items or [])[:limit])
    meta = page.metadata
    if not (meta and meta._continue):
        return NodeSample(read, len(read))
    remaining = meta.remaining_item_count
    return NodeSample(read, None if remaining is None else len(read) + int(remaining))


def count_nodes(
    api: Transport, labels: Mapping[str, str | None], *, cache: NodeCache | None = None
) -> NodeCount:
    """The nodes `labels` selects counted: from the node cache's per-label-value counts when
    it is current (kept as it applies watch events), else one label-selected list counted."""
    selector = label_selector(labels)  # validates the keys and values
    if cache is not None:
        found = cache.count(labels, wanted=api.node_version)
        if found is not None:
            return found
        logger.info("node cache not current; counting the nodes by label %s", selector)
    return count_of(nodes(api, labels=labels))


def label_selector(labels: Mapping[str, str | None]) -> str:
    """`a=b,!c`: equality for a value, absence for None (keys and values validated)."""
    terms = []
    for key, value in sorted(labels.items()):
        check_qualified_key(key, what="label key")
        if value is None:
            terms.append(f"!{key}")
        else:
            terms.append(f"{key}={check_label_value(value)}")
    return ",".join(terms)


def pods_on(api: Transport, node: str) -> list[PodInfo]:
    """Pods bound to the node in all namespaces: one paginated list by `spec.nodeName`
    (plus a GET of the node when there are none, so an unknown node is NodeNotFound)."""
    return [pod_info(p) for p in api.pods_on(check_node_name(node))]


def events(api: Transport, node: str, *, since: datetime) -> list[ClusterEvent]:
    """Events about the node and about the pods on it since `since`, oldest first.

    Calls (each paginated): 1 list of the node's events across namespaces, 1 list of the
    node's pods, and 1 list of Pod events per namespace those pods live in (filtered to
    them here), because event field selectors match one name at a time. A node with no
    pods costs one GET more (an unknown node is NodeNotFound)."""
    name = check_node_name(node)
    node_selector = f"involvedObject.kind=Node,involvedObject.name={name}"
    found = list(
        api.pages(LIST_EVENTS, api.core.list_event_for_all_namespaces, field_selector=node_selector)
    )
    pods: dict[str, set[str]] = {}
    for pod in api.pods_on(name):
        pods.setdefault(pod.metadata.namespace, set()).add(pod.metadata.name)
    for namespace, names in sorted(pods.items()):
        for event in api.pages(
            LIST_EVENTS,
            api.core.list_namespaced_event,
            namespace,
            field_selector="involvedObject.kind=Pod",
        ):
            if event.involved_object.name in names:
                found.append(event)
    records = [cluster_event(e) for e in found]
    return sorted((e for e in records if e.at >= since), key=lambda e: e.at)


def pod_logs(
    api: Transport,
    pod: str,
    namespace: str,
    *,
    tail_lines: int = 500,
    container: str | None = None,
    since: timedelta | None = None,
) -> str:
    """The container's log (the pod's only container when `container` is None)."""
    name, ns = check_pod_name(pod), check_namespace(namespace)
    options: dict[str, Any] = {"tail_lines": max(0, tail_lines)}
    if container is not None:
        options["container"] = check_container_name(container)
    if since is not None:
        options["since_seconds"] = max(1, int(since.total_seconds()))
    text = api.send(
        POD_LOGS,
        lambda: api.core.read_namespaced_pod_log(name, ns, _request_timeout=api.timeout, **options),
        target=f"{ns}/{name}",
        missing=lambda: PodNotFound(name, ns),
    )
    return str(text).removesuffix("\n")


def node_logs(api: Transport, node: str, *, query: str, tail_lines: int = 500) -> str:
    """The kernel log through the kubelet's node log query (KEP-2258): one GET of
    `/api/v1/nodes/N/proxy/logs/?query=/kern.log` (a file under /var/log, so no kubelet-side
    options; the tail is cut here). A kubelet without the feature raises ClusterError.

    Never retried: the answer of a kubelet without the feature, of a node without addresses
    or of a wedged kubelet is the same the next time, and the read is optional (a failed one
    is an unavailable input, steps.cluster_gaps); three retries only tripled the wait."""
    name = check_node_name(node)
    hint = _NODE_LOG_HINT.format(node=name, query=query)
    try:
        text = api.send(
            NODE_PROXY,
            lambda: api.get_raw(
                "/api/v1/nodes/{name}/proxy/logs/", {"name": name}, [("query", query)]
            ),
            target=name,
            missing=lambda: NodeNotFound(name),
            retries=0,
        )
    except KubeletRefused as exc:
        raise ClusterError(f"{hint}; it answered HTTP {exc.status}: {exc.text}") from exc
    except (NodeNotFound, ClusterForbidden):
        raise
    except ClusterError as exc:  # the API server could not reach the kubelet (500/503, ...)
        raise ClusterError(f"{hint}; {exc}") from exc
    if _file_listing(text) or "log not found for" in text:
        raise ClusterError(hint)
    lines = text.splitlines()
    return "\n".join(lines[-tail_lines:] if tail_lines > 0 else [])


def remediation_pauses(api: Transport, node: NodeInfo) -> list[RemediationPause]:
    """Paused medik8s NodeHealthChecks whose `spec.selector` selects the node: one
    paginated list of the cluster-scoped `nodehealthchecks.remediation.medik8s.io/v1alpha1`.
    A 404 (the CRD is not installed) is no pause; a 403 is ClusterForbidden. An NHC whose
    selector is malformed selects nothing for NHC either, so it is skipped (logged)."""
    check_node_name(node.name)
    try:
        checks = api.pages(
            LIST_HEALTH_CHECKS,
            api.custom.list_cluster_custom_object,
            NHC_GROUP,
            NHC_VERSION,
            NHC_PLURAL,
            missing=NotServed,
        )
    except NotServed:
        return []
    pauses = []
    for check in checks:
        try:
            pause = health_check_pause(check, node.labels)
        except InvalidSelector as exc:
            name = (check.get("metadata") or {}).get("name")
            logger.warning("NodeHealthCheck %s has a malformed selector: %s", name, exc)
            continue
        if pause is not None:
            pauses.append(pause)
    return pauses


def read_job(api: Transport, name: str, namespace: str) -> JobRun:
    job, ns = check_job_name(name), check_namespace(namespace)
    found = api.send(
        GET_JOBS,
        lambda: api.batch.read_namespaced_job(job, ns, _request_timeout=api.timeout),
        target=f"{ns}/{job}",
        missing=lambda: JobNotFound(job, ns),
    )
    return job_run(found)


def job_logs(api: Transport, name: str, namespace: str, *, tail_lines: int = 20) -> str:
    """One paginated list of the namespace's pods labelled `job-name=<name>` (set by the
    Job controller), then the newest one's log."""
    job, ns = check_job_name(name), check_namespace(namespace)
    pods = api.pages(LIST_PODS, api.core.list_namespaced_pod, ns, label_selector=f"job-name={job}")
    if not pods:
        return ""
    newest = max(pods, key=lambda p: (p.metadata.creation_timestamp or _EPOCH, p.metadata.name))
    return pod_logs(api, newest.metadata.name, ns, tail_lines=tail_lines)


def _file_listing(text: str) -> bool:
    """A Go http.FileServer directory listing: the kubelet's /logs/ without NodeLogQuery."""
    head = text.lstrip()[:200].lower()
    return head.startswith("<pre>") or (head.startswith("<!doctype html>") and "<pre>" in head)
