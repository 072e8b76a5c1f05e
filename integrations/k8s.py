"""KubernetesCluster: the Cluster port on the official kubernetes client (the only importer of
`kubernetes`).

Takes a constructed `ApiClient(Configuration)`, never process-global config. Every request
goes through `_send`: a client-side QPS token bucket, a request timeout, bounded retries with
exponential backoff on 429 / 5xx / connection errors, and translation of every library error
into `integrations.errors` (`raise ... from exc`). Every name is validated before any request,
and every write reads first, so a repeated write is `Outcome.ALREADY_DONE`. Drains go through
the policy/v1 Eviction API only: a PodDisruptionBudget's refusal is retried until the grace
deadline, then reported per pod; nothing here ever deletes a pod to get round a PDB. Lists are
paged (`limit`/`continue`); a continue token the server expired (410) restarts the list once.
medik8s NodeHealthChecks are read as custom objects (a 404 without the CRD means no pauses).
`REQUIRED_PERMISSIONS` lists exactly the API permissions these calls need (deploy/kubernetes/
base/clusterrole.yaml grants them; tests/deploy/test_rbac_matches_adapter.py keeps both honest).
Longer than our usual module because it is the one place allowed to import `kubernetes`;
the pure parts live in `k8s_records` (API objects -> records) and `throttling` (pacing).
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import os
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config import incluster_config
from kubernetes.config.config_exception import ConfigException

from integrations.cluster import (
    ClusterEvent,
    DrainReport,
    JobRun,
    NodeInfo,
    Outcome,
    Permission,
    PodInfo,
    RemediationPause,
)
from integrations.errors import (
    ClusterConflict,
    ClusterError,
    ClusterForbidden,
    EvictionBlocked,
    InvalidObject,
    JobNotFound,
    NodeNotFound,
    PodNotFound,
)
from integrations.k8s_records import (
    cluster_event,
    health_check_pause,
    job_run,
    node_info,
    pod_info,
    skip_reason,
)
from integrations.names import (
    check_annotation_value,
    check_container_name,
    check_job_name,
    check_label_value,
    check_namespace,
    check_node_name,
    check_pod_name,
    check_qualified_key,
    check_taint_effect,
)
from integrations.selectors import InvalidSelector
from integrations.throttling import TokenBucket, backoff_delay

logger = logging.getLogger(__name__)
T = TypeVar("T")
# The config loaders are untyped; give them a type once, here.
_load_kube_config: Callable[..., None] = config.load_kube_config
_InClusterLoader: Callable[..., Any] = incluster_config.InClusterConfigLoader

GET_NODES = Permission("get", "nodes")
LIST_NODES = Permission("list", "nodes")
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

MERGE_PATCH = "application/merge-patch+json"
KERNEL_LOG_QUERY = "/kern.log"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
_NODE_LOG_HINT = (
    "the kubelet on {node} does not answer the node log query (/api/v1/nodes/{node}/proxy/"
    "logs/?query={query}); enable the NodeLogQuery feature gate and enableSystemLogHandler + "
    "enableSystemLogQuery in its kubelet configuration"
)


@dataclass(frozen=True)
class KubernetesEndpoint:
    """How to reach the API server. `host` (with `token`/`ca_file`) is a direct URL;
    otherwise `in_cluster` None means: the pod's service account when present (a `token` in
    `service_account_dir`, with its `ca.crt`; the API server from KUBERNETES_SERVICE_HOST and
    KUBERNETES_SERVICE_PORT), else the kubeconfig (`kubeconfig`, or KUBECONFIG, or
    ~/.kube/config) and its `context`."""

    host: str | None = None
    token: str | None = field(default=None, repr=False)
    ca_file: str | None = None
    insecure_skip_verify: bool = False
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool | None = None
    service_account_dir: str = SERVICE_ACCOUNT_DIR
    timeout_seconds: float = 10.0
    retries: int = 3
    backoff_seconds: float = 0.2
    qps: float = 20.0
    burst: int = 40


def make_configuration(endpoint: KubernetesEndpoint) -> client.Configuration:
    """A client Configuration for the endpoint; bad or missing credentials raise ClusterError."""
    cfg = client.Configuration()
    in_cluster = endpoint.in_cluster
    account = endpoint.service_account_dir
    if in_cluster is None:
        in_cluster = os.path.exists(os.path.join(account, "token"))
    where = endpoint.kubeconfig or "KUBECONFIG or ~/.kube/config"
    source = f"the in-cluster service account ({account})" if in_cluster else f"kubeconfig {where}"
    try:
        if endpoint.host:
            cfg.host = endpoint.host.rstrip("/")
            if endpoint.token:
                cfg.api_key = {"BearerToken": endpoint.token}
                cfg.api_key_prefix = {"BearerToken": "Bearer"}
        elif in_cluster:
            # The loader re-reads the token file every minute: projected tokens rotate.
            _InClusterLoader(
                token_filename=os.path.join(account, "token"),
                cert_filename=os.path.join(account, "ca.crt"),
            ).load_and_set(cfg)
        else:
            _load_kube_config(
                config_file=endpoint.kubeconfig, context=endpoint.context, client_configuration=cfg
            )
    except (ConfigException, OSError, ValueError, yaml.YAMLError) as exc:
        raise ClusterError(f"cannot load Kubernetes credentials from {source}: {exc}") from exc
    if endpoint.ca_file:
        cfg.ssl_ca_cert = endpoint.ca_file
    if endpoint.insecure_skip_verify:
        cfg.verify_ssl = False
    cfg.retries = False  # retries are ours (bounded, with backoff), not urllib3's
    return cfg


class KubernetesCluster:
    """The Cluster port over the Kubernetes API."""

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        timeout_seconds: float = 10.0,
        retries: int = 3,
        backoff_seconds: float = 0.2,
        qps: float = 20.0,
        burst: int = 40,
        page_size: int = 500,
        kernel_log_query: str = KERNEL_LOG_QUERY,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.api = api_client
        self.core = client.CoreV1Api(api_client)
        self.authz = client.AuthorizationV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.host = str(api_client.configuration.host)
        self.timeout = timeout_seconds
        self.retries = retries
        self.backoff = backoff_seconds
        self.page_size = page_size
        self.kernel_log_query = kernel_log_query
        self._clock, self._sleep = clock, sleep
        self._bucket = TokenBucket(qps=qps, burst=burst, clock=clock, sleep=sleep)

    @classmethod
    def from_endpoint(cls, endpoint: KubernetesEndpoint, **options: Any) -> KubernetesCluster:
        """Connect as `endpoint` says; `options` are constructor arguments (they win over the
        endpoint's timeout/retry/rate fields)."""
        settings: dict[str, Any] = {
            "timeout_seconds": endpoint.timeout_seconds,
            "retries": endpoint.retries,
            "backoff_seconds": endpoint.backoff_seconds,
            "qps": endpoint.qps,
            "burst": endpoint.burst,
        }
        return cls(client.ApiClient(make_configuration(endpoint)), **(settings | options))

    def close(self) -> None:
        """Close the connection pool."""
        closing: Any = self.api
        closing.close()

    # --- reads -----------------------------------------------------------------------------

    def nodes(self, names: Collection[str] | None = None) -> list[NodeInfo]:
        """All nodes (paginated list) or the named ones (one GET each; unknown: NodeNotFound)."""
        if names is None:
            return [node_info(n) for n in self._pages(LIST_NODES, self.core.list_node)]
        wanted = [check_node_name(name) for name in names]
        return [node_info(self._read_node(name)) for name in wanted]

    def pods_on(self, node: str) -> list[PodInfo]:
        """Pods bound to the node in all namespaces: one paginated list by `spec.nodeName`
        (plus a GET of the node when there are none, so an unknown node is NodeNotFound)."""
        return [pod_info(p) for p in self._pods_on(check_node_name(node))]

    def events(self, node: str, *, since: datetime) -> list[ClusterEvent]:
        """Events about the node and about the pods on it since `since`, oldest first.

        Calls (each paginated): 1 list of the node's events across namespaces, 1 list of the
        node's pods, and 1 list of Pod events per namespace those pods live in (filtered to
        them here), because event field selectors match one name at a time. A node with no
        pods costs one GET more (an unknown node is NodeNotFound)."""
        name = check_node_name(node)
        node_selector = f"involvedObject.kind=Node,involvedObject.name={name}"
        found = list(
            self._pages(
                LIST_EVENTS, self.core.list_event_for_all_namespaces, field_selector=node_selector
            )
        )
        pods: dict[str, set[str]] = {}
        for pod in self._pods_on(name):
            pods.setdefault(pod.metadata.namespace, set()).add(pod.metadata.name)
        for namespace, names in sorted(pods.items()):
            for event in self._pages(
                LIST_EVENTS,
                self.core.list_namespaced_event,
                namespace,
                field_selector="involvedObject.kind=Pod",
            ):
                if event.involved_object.name in names:
                    found.append(event)
        events = [cluster_event(e) for e in found]
        return sorted((e for e in events if e.at >= since), key=lambda e: e.at)

    def pod_logs(
        self,
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
        text = self._send(
            POD_LOGS,
            lambda: self.core.read_namespaced_pod_log(
                name, ns, _request_timeout=self.timeout, **options
            ),
            target=f"{ns}/{name}",
            missing=lambda: PodNotFound(name, ns),
        )
        return str(text).removesuffix("\n")

    def node_logs(self, node: str, *, tail_lines: int = 500) -> str:
        """The kernel log through the kubelet's node log query (KEP-2258): one GET of
        `/api/v1/nodes/N/proxy/logs/?query=/kern.log` (a file under /var/log, so no kubelet-side
        options; the tail is cut here). A kubelet without the feature raises ClusterError."""
        name = check_node_name(node)
        hint = _NODE_LOG_HINT.format(node=name, query=self.kernel_log_query)
        try:
            text = self._send(
                NODE_PROXY,
                lambda: self._get_raw(
                    "/api/v1/nodes/{name}/proxy/logs/",
                    {"name": name},
                    [("query", self.kernel_log_query)],
                ),
                target=name,
                missing=lambda: NodeNotFound(name),
            )
        except _KubeletRefused as exc:
            raise ClusterError(f"{hint}; it answered HTTP {exc.status}: {exc.text}") from exc
        if _file_listing(text) or "log not found for" in text:
            raise ClusterError(hint)
        lines = text.splitlines()
        return "\n".join(lines[-tail_lines:] if tail_lines > 0 else [])

    # --- writes ----------------------------------------------------------------------------

    def cordon(self, node: str) -> Outcome:
        return self._set_unschedulable(check_node_name(node), on=True)

    def uncordon(self, node: str) -> Outcome:
        return self._set_unschedulable(check_node_name(node), on=False)

    def taint(self, node: str, *, key: str, value: str = "", effect: str = "NoSchedule") -> Outcome:
        name = check_node_name(node)
        check_qualified_key(key, what="taint key")
        check_label_value(value, what="taint value")
        check_taint_effect(effect)

        def change(taints: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
            same = [t for t in taints if (t.get("key"), t.get("effect")) == (key, effect)]
            if same and (same[0].get("value") or "") == value:
                return None
            kept = [t for t in taints if (t.get("key"), t.get("effect")) != (key, effect)]
            return kept + [{"key": key, "effect": effect} | ({"value": value} if value else {})]

        return self._rewrite_taints(name, change)

    def untaint(self, node: str, *, key: str, effect: str = "NoSchedule") -> Outcome:
        name = check_node_name(node)
        check_qualified_key(key, what="taint key")
        check_taint_effect(effect)

        def change(taints: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
            kept = [t for t in taints if (t.get("key"), t.get("effect")) != (key, effect)]
            return None if len(kept) == len(taints) else kept

        return self._rewrite_taints(name, change)

    def annotate(self, node: str, annotations: Mapping[str, str | None]) -> Outcome:
        for key, value in annotations.items():
            check_qualified_key(key, what="annotation key")
            if value is not None:
                check_annotation_value(value)
        return self._merge_metadata(check_node_name(node), "annotations", annotations)

    def label(self, node: str, labels: Mapping[str, str | None]) -> Outcome:
        for key, value in labels.items():
            check_qualified_key(key, what="label key")
            if value is not None:
                check_label_value(value)
        return self._merge_metadata(check_node_name(node), "labels", labels)

    def delete_pod(self, pod: str, namespace: str, *, grace: timedelta) -> Outcome:
        """Delete one pod (read first: gone or already terminating is ALREADY_DONE)."""
        name, ns = check_pod_name(pod), check_namespace(namespace)
        gone = Outcome.ALREADY_DONE
        try:
            current = self._send(
                GET_PODS,
                lambda: self.core.read_namespaced_pod(name, ns, _request_timeout=self.timeout),
                target=f"{ns}/{name}",
                missing=lambda: PodNotFound(name, ns),
            )
        except PodNotFound:
            return gone
        if current.metadata is not None and current.metadata.deletion_timestamp is not None:
            return gone
        seconds = max(0, int(grace.total_seconds()))
        try:
            self._send(
                DELETE_PODS,
                lambda: self.core.delete_namespaced_pod(
                    name, ns, grace_period_seconds=seconds, _request_timeout=self.timeout
                ),
                target=f"{ns}/{name}",
                missing=lambda: PodNotFound(name, ns),
            )
        except PodNotFound:
            return gone
        return Outcome.CHANGED

    def drain(self, node: str, *, grace: timedelta) -> DrainReport:
        """Cordon, then evict every pod but DaemonSet-owned, mirror and finished ones through
        the policy/v1 Eviction API. A PDB's 429 is retried with backoff until `grace` has
        passed, then the pod is reported in `blocked` with the API's reason. A pod already
        gone (404) or already terminating (an earlier drain's eviction) is left to finish, so
        a repeated drain is ALREADY_DONE. Never a DELETE."""
        name = check_node_name(node)
        cordoned = self._set_unschedulable(name, on=True)
        skipped, pending, reasons = [], [], {}
        for pod in self._pods_on(name):
            key = f"{pod.metadata.namespace}/{pod.metadata.name}"
            why = skip_reason(pod)
            if pod.metadata.deletion_timestamp is not None:
                reasons[key] = "already terminating"
            elif why:
                skipped.append(pod.metadata.name)
                reasons[key] = why
            else:
                pending.append(pod)
        evicted, blocked = self._evict_all(pending, grace=grace, reasons=reasons)
        changed = cordoned is Outcome.CHANGED or bool(evicted)
        return DrainReport(
            outcome=Outcome.CHANGED if changed else Outcome.ALREADY_DONE,
            evicted=tuple(evicted),
            skipped=tuple(skipped),
            blocked=tuple(blocked),
            reasons=reasons,
        )

    def remediation_pauses(self, node: NodeInfo) -> list[RemediationPause]:
        """Paused medik8s NodeHealthChecks whose `spec.selector` selects the node: one
        paginated list of the cluster-scoped `nodehealthchecks.remediation.medik8s.io/v1alpha1`.
        A 404 (the CRD is not installed) is no pause; a 403 is ClusterForbidden. An NHC whose
        selector is malformed selects nothing for NHC either, so it is skipped (logged)."""
        check_node_name(node.name)
        try:
            checks = self._pages(
                LIST_HEALTH_CHECKS,
                self.custom.list_cluster_custom_object,
                NHC_GROUP,
                NHC_VERSION,
                NHC_PLURAL,
                missing=_NotServed,
            )
        except _NotServed:
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

    def create_job(self, manifest: Mapping[str, Any]) -> JobRun:
        """POST the Job; a 409 (AlreadyExists: the same idempotency key ran before) reads the
        existing one instead, so a retry never starts a second Job."""
        meta = manifest.get("metadata") or {}
        name = check_job_name(str(meta.get("name", "")))
        ns = check_namespace(str(meta.get("namespace", "")))
        body: Any = dict(manifest)  # the client takes plain data for a V1Job
        try:
            created = self._send(
                CREATE_JOBS,
                lambda: self.batch.create_namespaced_job(ns, body, _request_timeout=self.timeout),
                target=f"{ns}/{name}",
            )
        except ClusterConflict:
            return self.read_job(name, ns)
        except ValueError as exc:  # the client's model check, before any request
            first = " ".join(str(exc).split())[:300]
            raise InvalidObject(f"job {ns}/{name} is not a valid batch/v1 Job: {first}") from exc
        return job_run(created, outcome=Outcome.CHANGED)

    def read_job(self, name: str, namespace: str) -> JobRun:
        job, ns = check_job_name(name), check_namespace(namespace)
        found = self._send(
            GET_JOBS,
            lambda: self.batch.read_namespaced_job(job, ns, _request_timeout=self.timeout),
            target=f"{ns}/{job}",
            missing=lambda: JobNotFound(job, ns),
        )
        return job_run(found)

    def job_logs(self, name: str, namespace: str, *, tail_lines: int = 20) -> str:
        """One paginated list of the namespace's pods labelled `job-name=<name>` (set by the
        Job controller), then the newest one's log."""
        job, ns = check_job_name(name), check_namespace(namespace)
        pods = self._pages(
            LIST_PODS, self.core.list_namespaced_pod, ns, label_selector=f"job-name={job}"
        )
        if not pods:
            return ""
        newest = max(pods, key=lambda p: (p.metadata.creation_timestamp or _EPOCH, p.metadata.name))
        return self.pod_logs(newest.metadata.name, ns, tail_lines=tail_lines)

    def check_permissions(self, needed: Collection[Permission]) -> list[Permission]:
        """One SelfSubjectAccessReview per permission, for the configured identity."""
        return [self._review(p) for p in needed]

    # --- internals: requests ---------------------------------------------------------------

    def _send(
        self,
        need: Permission,
        call: Callable[[], T],
        *,
        target: str = "",
        missing: Callable[[], ClusterError] | None = None,
        retry_throttled: bool = True,
    ) -> T:
        """One API call: paced, retried on 429 (unless `retry_throttled` is False) / 5xx /
        connection errors with exponential backoff, errors translated."""
        for attempt in range(self.retries + 1):
            self._bucket.take()
            try:
                return call()
            except ApiException as exc:
                status = int(exc.status or 0)
                retry = status >= 500 or (status == 429 and retry_throttled)
                if not retry or attempt == self.retries:
                    raise self._translate(exc, need, target=target, missing=missing) from exc
                delay = max(_retry_after(exc), backoff_delay(attempt, base=self.backoff))
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                if attempt == self.retries:
                    raise ClusterError(
                        f"Kubernetes API at {self.host} unreachable ({type(exc).__name__}) "
                        f"after {attempt + 1} attempts: {need.verb} {_what(need)}"
                    ) from exc
                delay = backoff_delay(attempt, base=self.backoff)
            logger.info("retrying %s %s in %.2fs", need.verb, _what(need), delay)
            self._sleep(delay)
        raise AssertionError("unreachable: the loop returns or raises")

    def _translate(
        self,
        exc: ApiException,
        need: Permission,
        *,
        target: str,
        missing: Callable[[], ClusterError] | None,
    ) -> ClusterError:
        status, message = int(exc.status or 0), _status_message(exc)
        where = f" '{target}'" if target else ""
        if status == 403:
            group = f".{need.group}" if need.group else ""  # kubectl's resource.group
            return ClusterForbidden(verb=need.verb, resource=_what(need) + group)
        if status == 0:  # the client's own SSLError, before any answer
            reason = " ".join(str(exc.reason or "").split())
            return ClusterError(
                f"TLS with the Kubernetes API at {self.host} failed ({need.verb} {_what(need)}): "
                f"{reason}; check the CA it trusts (the service account's ca.crt or the "
                "kubeconfig's certificate-authority) and the server's certificate"
            )
        if status == 401:
            return ClusterError(
                f"the Kubernetes API at {self.host} refused the bot's credentials (401): "
                "check the token, kubeconfig or service account"
            )
        if status == 404 and missing is not None:
            return missing()
        if status == 410:
            return _ContinueExpired(f"{need.verb} {_what(need)}: {message}")
        if status == 409:
            return ClusterConflict(f"{need.verb} {_what(need)}{where}: conflict (409): {message}")
        if status == 429 and need is EVICT_PODS:
            return EvictionBlocked(message)
        return ClusterError(
            f"Kubernetes API {need.verb} {_what(need)}{where} failed: HTTP {status}: {message}"
        )

    def _pages(
        self,
        need: Permission,
        call: Callable[..., Any],
        *args: Any,
        missing: Callable[[], ClusterError] | None = None,
        **kw: Any,
    ) -> list[Any]:
        """Items of a list call, page by page (`limit` / `continue`). A continue token the
        server no longer honours (410 Gone: etcd compacted past it) restarts the list from the
        first page, once, dropping the pages already read so nothing is seen twice."""
        for attempt in range(2):
            items: list[Any] = []
            token: str | None = None
            try:
                while True:
                    page = self._send(
                        need,
                        functools.partial(
                            call,
                            *args,
                            limit=self.page_size,
                            _continue=token,
                            _request_timeout=self.timeout,
                            **kw,
                        ),
                        missing=missing,
                    )
                    got, token = _page_parts(page)
                    items.extend(got)
                    if not token:
                        return items
            except _ContinueExpired as exc:
                if token is None or attempt == 1:
                    raise ClusterError(
                        f"Kubernetes API at {self.host}: {need.verb} {_what(need)} could not "
                        f"be paged: the continue token expired again after a restart ({exc})"
                    ) from exc
                logger.info("%s %s: continue token expired; listing again", need.verb, _what(need))
        raise AssertionError("unreachable: the loop returns or raises")

    def _get_raw(self, path: str, path_params: dict[str, str], query: list[tuple[str, str]]) -> str:
        """GET a non-generated path (the node log proxy with `query`), as text."""
        method, url, headers, body, post = self.api.param_serialize(
            "GET",
            path,
            path_params=path_params,
            query_params=query,
            header_params={"Accept": "text/plain, */*"},
            auth_settings=["BearerToken"],
        )
        response: Any = self.api.call_api(
            method, url, headers, body, post, _request_timeout=self.timeout
        )
        response.read()
        text = response.data.decode("utf-8", errors="replace")
        if 200 <= response.status <= 299:
            return str(text)
        if response.status in (400, 404, 405, 501) and '"kind": "Status"' not in text.replace(
            '":"', '": "'
        ):
            # Not the API server's Status: the kubelet behind the proxy refused the query.
            raise _KubeletRefused(response.status, text.strip()[:200])
        raise ApiException(http_resp=response)

    def _read_node(self, name: str) -> Any:
        return self._send(
            GET_NODES,
            lambda: self.core.read_node(name, _request_timeout=self.timeout),
            target=name,
            missing=lambda: NodeNotFound(name),
        )

    def _pods_on(self, name: str) -> list[Any]:
        pods = list(
            self._pages(
                LIST_PODS,
                self.core.list_pod_for_all_namespaces,
                field_selector=f"spec.nodeName={name}",
            )
        )
        if not pods:
            self._read_node(name)  # NodeNotFound rather than "no pods" for a typo
        return pods

    def _patch_node(self, name: str, body: Any, *, content_type: str | None = None) -> None:
        self._send(
            PATCH_NODES,
            lambda: self.core.patch_node(
                name, body, _content_type=content_type, _request_timeout=self.timeout
            ),
            target=name,
            missing=lambda: NodeNotFound(name),
        )

    # --- internals: writes -----------------------------------------------------------------

    def _set_unschedulable(self, name: str, *, on: bool) -> Outcome:
        node = self._read_node(name)
        if bool(node.spec.unschedulable) == on:
            return Outcome.ALREADY_DONE
        self._patch_node(name, {"spec": {"unschedulable": True if on else None}})
        return Outcome.CHANGED

    def _rewrite_taints(
        self, name: str, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None]
    ) -> Outcome:
        """Read-modify-write of spec.taints guarded by metadata.resourceVersion: a 409 (someone
        else wrote the node in between) re-reads and tries again, `retries` times."""
        for attempt in range(self.retries + 1):
            node = self._read_node(name)
            serializer: Any = self.api
            taints = [serializer.sanitize_for_serialization(t) for t in node.spec.taints or []]
            wanted = change(taints)
            if wanted is None:
                return Outcome.ALREADY_DONE
            body = {
                "metadata": {"resourceVersion": node.metadata.resource_version},
                "spec": {"taints": wanted},
            }
            try:
                self._patch_node(name, body, content_type=MERGE_PATCH)
            except ClusterConflict:
                if attempt == self.retries:
                    raise
                continue
            return Outcome.CHANGED
        raise AssertionError("unreachable: the loop returns or raises")

    def _merge_metadata(self, name: str, field: str, values: Mapping[str, str | None]) -> Outcome:
        node = self._read_node(name)
        current = dict(getattr(node.metadata, field) or {})
        if all(current.get(k) == v for k, v in values.items()):
            return Outcome.ALREADY_DONE
        self._patch_node(name, {"metadata": {field: dict(values)}}, content_type=MERGE_PATCH)
        return Outcome.CHANGED

    def _evict_all(
        self, pods: list[Any], *, grace: timedelta, reasons: dict[str, str]
    ) -> tuple[list[str], list[str]]:
        deadline = self._clock() + grace.total_seconds()
        evicted: list[str] = []
        for attempt in itertools.count():
            refused = []
            for pod in pods:
                key = f"{pod.metadata.namespace}/{pod.metadata.name}"
                why = self._evict(pod)
                if why is None:
                    evicted.append(pod.metadata.name)
                    reasons.pop(key, None)
                elif why == "gone":
                    reasons[key] = "already gone (404)"
                else:
                    reasons[key] = why
                    refused.append(pod)
            pods = refused
            remaining = deadline - self._clock()
            if not pods or remaining <= 0:
                break
            self._sleep(min(remaining, backoff_delay(attempt, base=self.backoff, cap=5.0)))
        return evicted, [p.metadata.name for p in pods]

    def _evict(self, pod: Any) -> str | None:
        """None when evicted, "gone" on 404, else why the Eviction API refused."""
        name, ns = pod.metadata.name, pod.metadata.namespace
        eviction = client.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=client.V1ObjectMeta(name=name, namespace=ns),
        )
        try:
            self._send(
                EVICT_PODS,
                lambda: self.core.create_namespaced_pod_eviction(
                    name, ns, eviction, _request_timeout=self.timeout
                ),
                target=f"{ns}/{name}",
                missing=lambda: PodNotFound(name, ns),
                retry_throttled=False,
            )
        except PodNotFound:
            return "gone"
        except EvictionBlocked as exc:
            return str(exc)
        except ClusterForbidden:
            raise
        except ClusterError as exc:
            if exc.retryable is False:
                raise
            return str(exc)
        return None

    def _review(self, need: Permission) -> Permission:
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
        answer = self._send(
            REVIEW_ACCESS,
            lambda: self.authz.create_self_subject_access_review(
                review, _request_timeout=self.timeout
            ),
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


_EPOCH = datetime.min.replace(tzinfo=UTC)


def _file_listing(text: str) -> bool:
    """A Go http.FileServer directory listing: the kubelet's /logs/ without NodeLogQuery."""
    head = text.lstrip()[:200].lower()
    return head.startswith("<pre>") or (head.startswith("<!doctype html>") and "<pre>" in head)


class _ContinueExpired(ClusterError):
    """410 Gone: a list's continue token outlived the server's compaction window."""


class _NotServed(ClusterError):
    """404 on a custom resource list: its CRD is not installed."""

    def __init__(self) -> None:
        super().__init__("the custom resource is not served by this cluster")


def _page_parts(page: Any) -> tuple[list[Any], str | None]:
    """(items, continue token) of a list page: a typed model, or a dict for custom objects."""
    if isinstance(page, dict):
        return list(page.get("items") or []), (page.get("metadata") or {}).get("continue")
    return list(page.items or []), (page.metadata._continue if page.metadata else None)


class _KubeletRefused(Exception):
    """The kubelet behind the API server's node proxy answered an error (not a Status)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text}")
        self.status, self.text = status, text


def _what(need: Permission) -> str:
    return need.resource + (f"/{need.subresource}" if need.subresource else "")


def _status_message(exc: ApiException) -> str:
    """The API's Status message plus its causes (a PDB names itself there)."""
    try:
        status = json.loads(exc.body or "{}")
    except ValueError:
        return str(exc.reason or "")
    if not isinstance(status, dict):
        return str(exc.reason or "")
    causes = [c.get("message", "") for c in (status.get("details") or {}).get("causes") or []]
    return " ".join([str(status.get("message") or exc.reason or "")] + [c for c in causes if c])


def _retry_after(exc: ApiException) -> float:
    try:
        return float((exc.headers or {}).get("Retry-After") or 0)
    except ValueError:
        return 0.0
