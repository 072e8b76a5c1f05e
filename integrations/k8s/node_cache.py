"""An informer-style cache of the fleet's nodes: one paged list, then one watch, kept in memory
with only the fields the safety limits and the impact read need. It answers the label-selected
reads of a pool or topology domain without a request, so a removal costs the same at 5,000
nodes as at 100.

Consistency: the list is a consistent read (no resourceVersion: etcd's current revision) and the
watch resumes from the list's resourceVersion, so the cache is exactly the API server's state
as of `version`, the newest resourceVersion applied (an event's, or a BOOKMARK's). A read is
served only when the watch is connected and `version` is at least `wanted`, the newest node
resourceVersion this client has seen in a GET or a write (the safety guard GETs the target
just before it counts, and a drain's guard comes after the cordon's own write): events arrive
in resourceVersion order, so every node change up to that point is in the cache. Otherwise the
read waits up to `catch_up_seconds` for the watch, then says no and the caller lists by label
(a consistent read). A 410 Gone (the watch fell behind etcd's compaction) re-lists; any other
watch failure reconnects from `version` after a backoff, and reads fall back meanwhile.

resourceVersions are compared as integers (etcd revisions, as the API server itself does); one
that is not an integer makes the cache refuse, never guess.

Memory: one small NodeInfo per node (name, Ready, unschedulable, labels, taints, GPU capacity
and allocatable; no annotations, managedFields or other conditions): about 1 KB a node.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from urllib3.exceptions import HTTPError

from integrations.cluster import NodeInfo
from integrations.errors import ClusterError
from integrations.k8s.permissions import LIST_NODES, WATCH_NODES
from integrations.k8s.transport import ContinueExpired, Transport
from integrations.throttling import backoff_delay

logger = logging.getLogger(__name__)

WATCH_SECONDS = 300
"""How long one watch request lasts before the server ends it and the cache reconnects."""


class NodeCache:
    """The nodes as of the newest resourceVersion the watch delivered; see the module doc."""

    def __init__(self, api: Transport, *, catch_up_seconds: float = 2.0) -> None:
        self.api = api
        self.catch_up_seconds = catch_up_seconds
        self._nodes: dict[str, NodeInfo] = {}
        self._version = 0
        self._connected = False
        self._closed = False
        self._changed = threading.Condition()
        self._response: Any = None
        self._thread: threading.Thread | None = None
        self.relists = 0

    # --- reads ---------------------------------------------------------------------------

    def select(self, labels: Mapping[str, str | None], *, wanted: int) -> list[NodeInfo] | None:
        """The nodes `labels` selects (equality; None: the label is absent), or None when the
        cache cannot vouch for state at least as new as resourceVersion `wanted` within
        `catch_up_seconds`."""
        with self._changed:
            fresh = self._changed.wait_for(
                lambda: self._closed or (self._connected and self._version >= wanted),
                timeout=self.catch_up_seconds,
            )
            if not fresh or self._closed:
                return None
            return [n for n in self._nodes.values() if _selects(labels, n.labels)]

    @property
    def version(self) -> int:
        with self._changed:
            return self._version

    def __len__(self) -> int:
        with self._changed:
            return len(self._nodes)

    # --- the list and the watch ----------------------------------------------------------

    def start(self) -> None:
        """Start the list+watch loop on a daemon thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="k8s-node-cache", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop the loop: the watch's connection is shut, the thread ends."""
        with self._changed:
            self._closed = True
            self._connected = False
            self._changed.notify_all()
            response = self._response
        if response is not None:
            response.shutdown()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        failures = 0
        listed = False
        while not self._closed:
            try:
                if not listed:
                    self._list()
                    listed = True
                self._watch()
                failures = 0
            except (Gone, ContinueExpired):  # 410 as an event, or as the watch's answer
                listed = False
                self.relists += 1
                logger.info("node cache: resourceVersion %s compacted; listing again", self.version)
            except (ClusterError, HTTPError, OSError, ValueError, KeyError) as exc:
                if self._closed:
                    return
                self._disconnect()
                delay = backoff_delay(failures, base=self.api.backoff, cap=30.0)
                failures += 1
                logger.warning("node cache: %s; retrying in %.1fs", exc, delay)
                with self._changed:
                    self._changed.wait_for(lambda: self._closed, timeout=delay)
            except Exception:  # the pool shut under us at close, or a library bug: log it
                if not self._closed:
                    logger.exception("node cache stopped; label reads go to the API server")
                self._disconnect()
                return

    def _disconnect(self) -> None:
        with self._changed:
            self._connected = False

    def _list(self) -> None:
        """One consistent paged list: the whole cache and the version to watch from."""
        nodes: dict[str, NodeInfo] = {}
        token: str | None = None
        while True:
            page = self._raw(
                lambda t=token: self.api.core.list_node(
                    limit=self.api.page_size,
                    _continue=t,
                    _preload_content=False,
                    _request_timeout=self.api.timeout,
                )
            )
            for item in page.get("items") or []:
                node = slim_node(item)
                nodes[node.name] = node
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                break
        with self._changed:
            self._nodes = nodes
            self._version = _version(meta.get("resourceVersion"))
            self._connected = False  # until the watch from this version is open
            self._changed.notify_all()

    def _watch(self) -> None:
        """One watch request from `version`, applying events until the server ends it."""
        response: Any = self.api.send(
            WATCH_NODES,
            lambda: self.api.core.list_node(
                watch=True,
                resource_version=str(self.version),
                allow_watch_bookmarks=True,
                timeout_seconds=WATCH_SECONDS,
                _preload_content=False,
                _request_timeout=(self.api.timeout, WATCH_SECONDS + 30),
            ),
        )
        with self._changed:
            if self._closed:
                response.shutdown()
                return
            self._response = response
            self._connected = True
            self._changed.notify_all()
        try:
            for line in _lines(response):
                self._apply(json.loads(line))
        finally:
            with self._changed:
                self._response = None
                self._connected = False
            response.release_conn()

    def _apply(self, event: Mapping[str, Any]) -> None:
        kind, item = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if item.get("code") == 410:
                raise Gone(str(item.get("message") or "resourceVersion too old"))
            raise ClusterError(f"node watch error: {item.get('message') or item}")
        version = _version((item.get("metadata") or {}).get("resourceVersion"))
        with self._changed:
            if kind in ("ADDED", "MODIFIED"):
                node = slim_node(item)
                self._nodes[node.name] = node
            elif kind == "DELETED":
                self._nodes.pop(str(item["metadata"]["name"]), None)
            elif kind != "BOOKMARK":
                raise ClusterError(f"node watch sent an unknown event type {kind!r}")
            self._version = max(self._version, version)
            self._changed.notify_all()

    def _raw(self, call: Any) -> dict[str, Any]:
        response: Any = self.api.send(LIST_NODES, call)
        try:
            loaded = json.loads(response.data)
        finally:
            response.release_conn()
        if not isinstance(loaded, dict):
            raise ClusterError("the node list is not a JSON object")
        return loaded


class Gone(Exception):
    """The watch's resourceVersion is older than etcd's compaction: list again."""


def slim_node(item: Mapping[str, Any]) -> NodeInfo:
    """The fields the limits and the impact read need, from a Node as JSON."""
    meta, spec, status = item["metadata"], item.get("spec") or {}, item.get("status") or {}
    ready = next(
        (c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"),
        None,
    )
    return NodeInfo(
        name=str(meta["name"]),
        ready=ready == "True",
        unschedulable=bool(spec.get("unschedulable")),
        conditions={"Ready": str(ready)} if ready is not None else {},
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        taints=tuple(_taint(t) for t in spec.get("taints") or []),
        gpu_capacity=_gpus(status.get("capacity")),
        gpu_allocatable=_gpus(status.get("allocatable")),
    )


def _taint(taint: Mapping[str, Any]) -> str:
    head = f"{taint['key']}={taint['value']}" if taint.get("value") else str(taint["key"])
    return f"{head}:{taint.get('effect', '')}"


def _gpus(resources: Mapping[str, Any] | None) -> int:
    try:
        return int(str((resources or {}).get("nvidia.com/gpu", 0)))
    except ValueError:
        return 0


def _selects(labels: Mapping[str, str | None], have: Mapping[str, str]) -> bool:
    return all(
        (key not in have) if value is None else have.get(key) == value
        for key, value in labels.items()
    )


def _version(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError as exc:
        raise ClusterError(f"resourceVersion {value!r} is not an etcd revision") from exc


def _lines(response: Any) -> Iterator[bytes]:
    """Newline-delimited JSON events of a watch response, as they arrive."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=False):
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        yield from (line for line in complete if line.strip())
