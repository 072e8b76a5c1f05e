"""Every request of the adapter goes through `Transport.send`: a client-side QPS token bucket, a
request timeout, bounded retries with exponential backoff on 429 / 5xx / connection errors, and
translation of every library error into `integrations.errors` (`raise ... from exc`). Lists are
paged (`limit`/`continue`); a continue token the server expired (410) restarts the list once.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from integrations.cluster import Permission
from integrations.errors import (
    ClusterConflict,
    ClusterError,
    ClusterForbidden,
    EvictionBlocked,
    NodeNotFound,
)
from integrations.k8s.permissions import EVICT_PODS, GET_NODES, LIST_PODS, PATCH_NODES
from integrations.throttling import TokenBucket, backoff_delay

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class KubernetesTuning:
    """How the adapter paces and bounds its requests: built once in bot/wiring from
    `settings.kubernetes`, carried whole from `KubernetesCluster` to its `Transport`."""

    timeout_seconds: float = 10.0
    retries: int = 3
    """Retries after the first attempt, on 429 / 5xx / connection errors."""
    backoff_seconds: float = 0.2
    """The first retry's base delay; it doubles with each attempt (with jitter)."""
    qps: float = 20.0
    burst: int = 40
    page_size: int = 500
    """`limit` of one page of a list."""


DEFAULT_TUNING = KubernetesTuning()


class Transport:
    """One API client with its pacing, retry and error-translation policy."""

    def __init__(
        self,
        api_client: client.ApiClient,
        tuning: KubernetesTuning = DEFAULT_TUNING,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.api = api_client
        self.core = client.CoreV1Api(api_client)
        self.authz = client.AuthorizationV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.host = str(api_client.configuration.host)
        self.timeout = tuning.timeout_seconds
        self.retries = tuning.retries
        self.backoff = tuning.backoff_seconds
        self.page_size = tuning.page_size
        self.clock, self.sleep = clock, sleep
        self._bucket = TokenBucket(qps=tuning.qps, burst=tuning.burst, clock=clock, sleep=sleep)
        self.node_version = 0
        """The newest node resourceVersion a GET or a write of this client returned that the
        node cache did not already hold: what a cached read must be at least as new as."""
        self.node_sink: NodeSink | None = None
        """The node cache, when one is kept: the nodes this client writes go into it."""

    def send(
        self,
        need: Permission,
        call: Callable[[], T],
        *,
        target: str = "",
        missing: Callable[[], ClusterError] | None = None,
        retry_throttled: bool = True,
        retries: int | None = None,
    ) -> T:
        """One API call: paced, retried on 429 (unless `retry_throttled` is False) / 5xx /
        connection errors with exponential backoff (`retries` times, default the adapter's),
        errors translated."""
        retries = self.retries if retries is None else retries
        for attempt in range(retries + 1):
            self._bucket.take()
            try:
                return call()
            except ApiException as exc:
                status = int(exc.status or 0)
                retry = status >= 500 or (status == 429 and retry_throttled)
                if not retry or attempt == retries:
                    raise self._translate(exc, need, target=target, missing=missing) from exc
                delay = max(_retry_after(exc), backoff_delay(attempt, base=self.backoff))
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                if attempt == retries:
                    raise ClusterError(
                        f"Kubernetes API at {self.host} unreachable ({type(exc).__name__}) "
                        f"after {attempt + 1} attempts: {need.verb} {what(need)}"
                    ) from exc
                delay = backoff_delay(attempt, base=self.backoff)
            logger.info("retrying %s %s in %.2fs", need.verb, what(need), delay)
            self.sleep(delay)
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
            return ClusterForbidden(verb=need.verb, resource=what(need) + group)
        if status == 0:  # the client's own SSLError, before any answer
            reason = " ".join(str(exc.reason or "").split())
            return ClusterError(
                f"TLS with the Kubernetes API at {self.host} failed ({need.verb} {what(need)}): "
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
            return ContinueExpired(f"{need.verb} {what(need)}: {message}")
        if status == 409:
            return ClusterConflict(f"{need.verb} {what(need)}{where}: conflict (409): {message}")
        if status == 429 and need is EVICT_PODS:
            return EvictionBlocked(message)
        return ClusterError(
            f"Kubernetes API {need.verb} {what(need)}{where} failed: HTTP {status}: {message}"
        )

    def pages(
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
                    page = self.send(
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
            except ContinueExpired as exc:
                if token is None or attempt == 1:
                    raise ClusterError(
                        f"Kubernetes API at {self.host}: {need.verb} {what(need)} could not "
                        f"be paged: the continue token expired again after a restart ({exc})"
                    ) from exc
                logger.info("%s %s: continue token expired; listing again", need.verb, what(need))
        raise AssertionError("unreachable: the loop returns or raises")

    def get_raw(self, path: str, path_params: dict[str, str], query: list[tuple[str, str]]) -> str:
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
            raise KubeletRefused(response.status, text.strip()[:200])
        raise ApiException(http_resp=response)

    def read_node(self, name: str) -> Any:
        node = self.send(
            GET_NODES,
            lambda: self.core.read_node(name, _request_timeout=self.timeout),
            target=name,
            missing=lambda: NodeNotFound(name),
        )
        self.saw_node(node)
        return node

    def saw_node(self, node: Any) -> None:
        """Remember a node's resourceVersion (an etcd revision) when it is the newest seen and
        the node cache does not already hold that version of the node (its watch delivered
        it, or it is this client's own write)."""
        meta = getattr(node, "metadata", None)
        self._saw(getattr(meta, "name", None), getattr(meta, "resource_version", None))

    def _saw(self, name: Any, version: Any) -> None:
        if not (isinstance(version, str) and version.isdigit()):
            return
        sink = self.node_sink
        if sink is not None and isinstance(name, str) and sink.holds(name, int(version)):
            return
        self.node_version = max(self.node_version, int(version))

    def pods_on(self, name: str) -> list[Any]:
        pods = list(
            self.pages(
                LIST_PODS,
                self.core.list_pod_for_all_namespaces,
                field_selector=f"spec.nodeName={name}",
            )
        )
        if not pods:
            self.read_node(name)  # NodeNotFound rather than "no pods" for a typo
        return pods

    def patch_node(self, name: str, body: Any, *, content_type: str | None = None) -> None:
        """PATCH a node; the answer (the written Node) goes to the node cache (write-through),
        read as plain JSON: nothing else uses it."""
        response: Any = self.send(
            PATCH_NODES,
            lambda: self.core.patch_node(
                name,
                body,
                _content_type=content_type,
                _preload_content=False,
                _request_timeout=self.timeout,
            ),
            target=name,
            missing=lambda: NodeNotFound(name),
        )
        try:
            patched, meta = _node_json(response.data)
        except ValueError as exc:
            raise ClusterError(f"the answer to PATCH node '{name}' is not a Node: {exc}") from exc
        finally:
            response.release_conn()
        if self.node_sink is not None:
            self.node_sink.wrote(patched)
        self._saw(meta.get("name"), meta.get("resourceVersion"))

    def close(self) -> None:
        closing: Any = self.api
        closing.close()


class NodeSink(Protocol):
    """Where the nodes this client writes go (integrations/k8s/node_cache.py)."""

    def wrote(self, item: Mapping[str, Any]) -> bool: ...

    def holds(self, name: str, version: int) -> bool: ...


class ContinueExpired(ClusterError):
    """410 Gone: a list's continue token outlived the server's compaction window."""


class NotServed(ClusterError):
    """404 on a custom resource list: its CRD is not installed."""

    def __init__(self) -> None:
        super().__init__("the custom resource is not served by this cluster")


class KubeletRefused(Exception):
    """The kubelet behind the API server's node proxy answered an error (not a Status)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text}")
        self.status, self.text = status, text


def what(need: Permission) -> str:
    return need.resource + (f"/{need.subresource}" if need.subresource else "")


def _node_json(data: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Node as JSON and its metadata (ValueError: not JSON, or no metadata object)."""
    node = json.loads(data)
    meta = node.get("metadata") if isinstance(node, dict) else None
    if not isinstance(meta, dict):
        raise ValueError("no metadata object")
    return node, meta


def _page_parts(page: Any) -> tuple[list[Any], str | None]:
    """(items, continue token) of a list page: a typed model, or a dict for custom objects."""
    if isinstance(page, dict):
        return list(page.get("items") or []), (page.get("metadata") or {}).get("continue")
    return list(page.items or []), (page.metadata._continue if page.metadata else None)


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
