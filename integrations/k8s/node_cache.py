"""An informer-style cache of the fleet's nodes: one paged list, then one watch, kept in memory
with only the fields the safety limits and the impact read need. It answers the label-selected
reads of a pool or topology domain without a request and without looking at the rest of the
fleet (an index by the label keys it is asked about), so a removal costs the same at 5,000
nodes as at 100.

Consistency: the list is a consistent read (no resourceVersion: etcd's current revision) and the
watch resumes from the list's resourceVersion, so, for every other writer's changes, the cache
is exactly the API server's state as of `version`, the newest resourceVersion applied (an
event's, or a BOOKMARK's). Each node keeps its own resourceVersion, and a node only ever moves
forward: an event or a write older than what the cache holds for that node changes nothing.

- The bot's own writes (write-through): a PATCH answers with the written Node; the transport
  hands it to the cache (`wrote`), which applies it when it is newer than the node it holds.
  The watch event that follows is then a no-op, and a read after the bot's own write never
  waits for the watch.
- Other writers' changes: a read is served only while the watch is connected and `version` is
  at least `wanted`, the newest node resourceVersion this client has seen in a GET (a quorum
  read) that the cache did not already hold (`holds`): a change the bot saw with its own eyes
  is counted, with every node change before it (events arrive in resourceVersion order). A
  change the bot has not seen is missed for at most the watch's delivery time, as in any
  informer. Otherwise the read waits up to `catch_up_seconds` for the watch, then says no and
  the caller lists by label (a consistent read). A 410 Gone (the watch fell behind etcd's
  compaction) re-lists; any other watch failure reconnects from `version` after a backoff,
  and reads fall back meanwhile.

resourceVersions are compared as integers (etcd revisions, as the API server itself does); one
that is not an integer makes the cache refuse, never guess.

Memory: one small NodeInfo and its resourceVersion per node (name, Ready, unschedulable, labels,
taints, GPU capacity and allocatable; no annotations, managedFields or other conditions): about
1 KB a node, plus one name per node in a sorted list for each indexed label key (at most
`MAX_INDEXED_KEYS` keys: the pool label and the topology keys; a read on another key scans).
The lists are kept in name order so a bounded read (`first`: a pool's first few nodes) is a
slice, and a change costs a binary search and a shift of at most a pool's names.
"""

from __future__ import annotations

import bisect
import json
import logging
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from urllib3.exceptions import HTTPError

from integrations.cluster import (
    NodeCount,
    NodeInfo,
    NodeSample,
    count_of,
    first_of,
    out_of_service,
)
from integrations.errors import ClusterError
from integrations.k8s.permissions import LIST_NODES, WATCH_NODES
from integrations.k8s.transport import ContinueExpired, Transport
from integrations.throttling import backoff_delay

logger = logging.getLogger(__name__)

WATCH_SECONDS = 300
"""How long one watch request lasts before the server ends it and the cache reconnects."""
MAX_INDEXED_KEYS = 8
"""Label keys the cache indexes (the first ones it is asked to select on)."""


@dataclass
class Tally:
    """The counts of one indexed label value, kept as events are applied (the node count is
    the index entry's length): the GPUs and the names of the cordoned or NotReady nodes."""

    gpus: int = 0
    down: set[str] = field(default_factory=set)

    def add(self, node: NodeInfo, sign: int) -> None:
        self.gpus += sign * node.gpu_capacity
        if sign > 0 and out_of_service(node):
            self.down.add(node.name)
        elif sign < 0:
            self.down.discard(node.name)


class NodeCache:
    """The nodes as of the newest resourceVersion the watch delivered; see the module doc."""

    def __init__(
        self, api: Transport, *, catch_up_seconds: float = 2.0, write_through: bool = True
    ) -> None:
        self.api = api
        self.catch_up_seconds = catch_up_seconds
        self.write_through = write_through
        self._nodes: dict[str, NodeInfo] = {}
        self._versions: dict[str, int] = {}  # each node's resourceVersion
        self._index: dict[str, dict[str, list[str]]] = {}  # label key -> value -> sorted names
        self._tallies: dict[str, dict[str, Tally]] = {}  # label key -> value -> its counts
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
            if not self._current(wanted):
                return None
            return self._matching(labels)

    def holds(self, name: str, version: int) -> bool:
        """Whether the cache has node `name` at resourceVersion `version` or newer."""
        with self._changed:
            return self._versions.get(name, 0) >= version

    def wrote(self, item: Mapping[str, Any]) -> bool:
        """The bot's own write, as the API server answered it (the Node as JSON): applied when
        newer than the node the cache holds (write-through). A node the cache does not hold
        (not listed yet, or deleted since) is left to the watch. True when the cache now holds
        the node at that version or newer (False too for an answer it cannot read)."""
        try:
            node, version = slim_node(item), _version(item["metadata"].get("resourceVersion"))
        except (KeyError, TypeError, AttributeError, ClusterError):
            return False
        with self._changed:
            if node.name not in self._nodes:
                return False
            if version > self._versions[node.name]:
                self._put(node, version)
                self._changed.notify_all()
            return True

    def _current(self, wanted: int) -> bool:
        """Wait (lock held) until the watch is open and has applied `wanted`; False when it
        did not within `catch_up_seconds`, or the cache is closed."""
        fresh = self._changed.wait_for(
            lambda: self._closed or (self._connected and self._version >= wanted),
            timeout=self.catch_up_seconds,
        )
        return fresh and not self._closed

    def _matching(self, labels: Mapping[str, str | None]) -> list[NodeInfo]:
        """The selected nodes by name (lock held): the candidates are the smallest index entry
        among the equality terms (a pool, a rack), never the fleet, unless no term is
        indexable."""
        entry = self._smallest(labels)
        if entry is None:
            chosen = [node for node in self._nodes.values() if _selects(labels, node.labels)]
            return sorted(chosen, key=_name)
        return [self._nodes[name] for name in entry if _selects(labels, self._nodes[name].labels)]

    def first(
        self, labels: Mapping[str, str | None], *, limit: int, wanted: int
    ) -> NodeSample | None:
        """The first `limit` nodes (by name) `labels` selects, and how many it selects; None as
        for `select`. With one indexed term the answer is a slice of its sorted entry and the
        count its length: neither the fleet nor the rest of the selection is looked at."""
        with self._changed:
            if not self._current(wanted):
                return None
            entry = self._smallest(labels)
            if entry is None:
                return first_of(self._matching(labels), limit=limit)
            if len(labels) == 1:
                return NodeSample(tuple(self._nodes[n] for n in entry[:limit]), len(entry))
            chosen = [n for n in entry if _selects(labels, self._nodes[n].labels)]
            return NodeSample(tuple(self._nodes[n] for n in chosen[:limit]), len(chosen))

    def count(self, labels: Mapping[str, str | None], *, wanted: int) -> NodeCount | None:
        """The nodes `labels` selects counted; None as for `select`. With one indexed term
        (a pool, a rack) the answer is the counts kept for its value as events were applied:
        no node of the selection is looked at but the few out of service."""
        with self._changed:
            if not self._current(wanted):
                return None
            if len(labels) == 1:
                ((key, value),) = labels.items()
                index = self._indexed(key) if value is not None else None
                if index is not None and value is not None:
                    tally = self._tallies[key].get(value, Tally())
                    down = tuple(self._nodes[name] for name in sorted(tally.down))
                    return NodeCount(len(index.get(value, [])), tally.gpus, down)
            return count_of(self._matching(labels))

    def _smallest(self, labels: Mapping[str, str | None]) -> list[str] | None:
        """The smallest index entry (names in order) among the equality terms of `labels`
        (lock held); None when no term is indexable."""
        entries = [self._entry(key, value) for key, value in labels.items() if value is not None]
        known = [entry for entry in entries if entry is not None]
        return min(known, key=len) if known else None

    def _entry(self, key: str, value: str) -> list[str] | None:
        """The names of the nodes labelled `key=value`, in order (lock held); None when `key`
        is not indexed (past the cap)."""
        index = self._indexed(key)
        return None if index is None else index.get(value, [])

    def _indexed(self, key: str) -> dict[str, list[str]] | None:
        """The index of label `key` (built on first use, lock held); None past the key cap."""
        index = self._index.get(key)
        if index is None and len(self._index) < MAX_INDEXED_KEYS:
            index = self._index[key] = {}
            tallies = self._tallies[key] = {}
            for name in sorted(self._nodes):
                node = self._nodes[name]
                value = node.labels.get(key)
                if value is not None:
                    index.setdefault(value, []).append(name)
                    tallies.setdefault(value, Tally()).add(node, 1)
        return index

    def _put(self, node: NodeInfo, version: int) -> None:
        """Store `node` at `version` and move it in the indexes (lock held)."""
        self._unindex(node.name)
        self._nodes[node.name], self._versions[node.name] = node, version
        for key, index in self._index.items():
            if key in node.labels:
                bisect.insort(index.setdefault(node.labels[key], []), node.name)
                self._tallies[key].setdefault(node.labels[key], Tally()).add(node, 1)

    def _drop(self, name: str) -> None:
        self._unindex(name)
        self._nodes.pop(name, None)
        self._versions.pop(name, None)

    def _unindex(self, name: str) -> None:
        old = self._nodes.get(name)
        if old is None:
            return
        for key, index in self._index.items():
            value = old.labels.get(key)
            names = index.get(value, []) if value is not None else []
            at = bisect.bisect_left(names, name)
            if at < len(names) and names[at] == name:
                del names[at]
                self._tallies[key][str(value)].add(old, -1)
                if not names:
                    del index[str(value)]
                    del self._tallies[key][str(value)]

    @property
    def version(self) -> int:
        with self._changed:
            return self._version

    def __len__(self) -> int:
        with self._changed:
            return len(self._nodes)

    # --- the list and the watch ----------------------------------------------------------

    def start(self) -> None:
        """Start the list+watch loop on a daemon thread (idempotent); with `write_through`,
        the transport's node writes come here too."""
        if self.write_through:
            self.api.node_sink = self
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="k8s-node-cache", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop the loop: the watch's connection is shut, the thread ends."""
        if self.api is not None and self.api.node_sink is self:
            self.api.node_sink = None
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
        """One consistent paged list: the whole cache and the version to watch from. A node
        the bot wrote since the list's version keeps its newer state (never backwards)."""
        nodes: dict[str, tuple[NodeInfo, int]] = {}
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
                nodes[node.name] = (node, _version(item["metadata"].get("resourceVersion")))
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                break
        with self._changed:
            for name, (_, version) in list(nodes.items()):
                if self._versions.get(name, 0) > version:  # written through since the list
                    nodes[name] = (self._nodes[name], self._versions[name])
            self._nodes = {name: node for name, (node, _) in nodes.items()}
            self._versions = {name: version for name, (_, version) in nodes.items()}
            keys, self._index, self._tallies = list(self._index), {}, {}
            for key in keys:
                self._indexed(key)
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
                if version > self._versions.get(node.name, 0):  # else: written through already
                    self._put(node, version)
            elif kind == "DELETED":
                self._drop(str(item["metadata"]["name"]))
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


def _name(node: NodeInfo) -> str:
    return node.name


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
