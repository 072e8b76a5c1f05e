"""The Cluster port: read and change the Kubernetes objects the runbooks and actions need.

Speaks the domain (validated node names, small frozen records), never V1Node. Writes are
idempotent by construction and say whether they changed anything (`Outcome.ALREADY_DONE` is a
result, not an error). Every name crosses `integrations.names` before any request. Implemented
by `simulator.cluster.SimCluster` (sim mode) and `integrations.k8s.KubernetesCluster`.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol


class Outcome(StrEnum):
    """What a write did. `already_done` is a result, not an error."""

    CHANGED = "changed"
    ALREADY_DONE = "already_done"


@dataclass(frozen=True)
class NodeInfo:
    name: str
    ready: bool
    unschedulable: bool
    conditions: dict[str, str] = field(default_factory=dict)  # type -> "True"|"False"|"Unknown"
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[str, ...] = ()  # "key=value:Effect" (or "key:Effect" without a value)
    gpu_capacity: int = 0
    gpu_allocatable: int = 0
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PodInfo:
    name: str
    namespace: str
    node: str | None
    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    labels: dict[str, str] = field(default_factory=dict)
    workload: str | None = None  # owning job / deployment name, when known
    restarts: int = 0
    last_terminated_reason: str | None = None  # e.g. "OOMKilled"
    gpus: int = 0
    owner_kind: str | None = None  # kind of the controller owner: DaemonSet | Job | ReplicaSet ...
    mirror: bool = False  # a static pod's mirror (annotation kubernetes.io/config.mirror)


@dataclass(frozen=True)
class ClusterEvent:
    at: datetime
    kind: str  # involved object kind: Node | Pod
    name: str
    reason: str
    message: str
    type: str = "Normal"  # Normal | Warning
    namespace: str = ""


@dataclass(frozen=True)
class DrainReport:
    """What a drain did: pods evicted, pods left alone (DaemonSet-owned and mirror pods), and
    pods a PodDisruptionBudget kept until the grace deadline (`blocked`, each with its reason in
    `reasons`). `outcome` is ALREADY_DONE when there was nothing left to evict."""

    outcome: Outcome
    evicted: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()
    reasons: dict[str, str] = field(default_factory=dict)  # "ns/pod" -> why it was not evicted
    moved_as: str = "pod(s) evicted"
    """How the backend words what `evicted` holds (Slurm: jobs requeued or cancelled)."""
    blocked_as: str = "blocked by a PodDisruptionBudget"
    """How the backend words what `blocked` holds."""


@dataclass(frozen=True)
class JobRun:
    """A batch/v1 Job the bot started on a node (the node agent's Job variant). `state` is
    `running`, `complete` or `failed` (from the Job's Complete / Failed condition); `reason` is
    the Failed condition's reason and message. `outcome` says what `create_job` did: CHANGED when
    it created the Job, ALREADY_DONE when one of that name existed (a resumed run)."""

    name: str
    namespace: str
    state: str  # running | complete | failed
    reason: str = ""
    outcome: Outcome = Outcome.ALREADY_DONE


@dataclass(frozen=True)
class Permission:
    """One API permission the bot needs: `verb` on `resource` (with its API group and
    subresource), and whether the configured identity has it."""

    verb: str
    resource: str
    group: str = ""
    subresource: str = ""
    allowed: bool | None = None  # None: not checked
    reason: str = ""
    namespace: str = ""  # "": cluster-wide (a ClusterRole); else granted by a Role there

    def describe(self) -> str:
        what = self.resource + (f"/{self.subresource}" if self.subresource else "")
        where = f" in namespace {self.namespace}" if self.namespace else ""
        return f"{self.verb} {what}" + (f" ({self.group})" if self.group else "") + where


@dataclass(frozen=True)
class RemediationPause:
    """Another remediator told to hold off a node: `controller` (e.g. "NodeHealthCheck") and
    its object `name` select the node, and `requests` are the pause requests it carries."""

    controller: str
    name: str
    requests: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.controller} {self.name} is paused ({', '.join(self.requests)})"


@dataclass(frozen=True)
class NodeSample:
    """The first nodes of a label selection, in name order, and how many it holds: what a
    bounded read (`Cluster.first_nodes`) returns, so a text built from it can say how much of
    the selection it saw."""

    nodes: tuple[NodeInfo, ...]
    total: int | None
    """How many nodes the selection holds; None when the backend did not count them (a
    Kubernetes label-selected page with more after it)."""

    @property
    def partial(self) -> bool:
        """Whether the selection holds nodes that were not read."""
        return self.total is None or self.total > len(self.nodes)

    def describe(self, noun: str = "nodes") -> str:
        """How much was read, for a person: "all 12 nodes read", "33 of 4,096 nodes read",
        "the first 33 nodes read (more exist)"."""
        read = len(self.nodes)
        if not self.partial:
            return f"all {read:,} {noun} read"
        if self.total is None:
            return f"the first {read:,} {noun} read (more exist)"
        return f"{read:,} of {self.total:,} {noun} read"


@dataclass(frozen=True)
class NodeCount:
    """A label selection counted, not listed: how many nodes and GPUs it holds and which of
    its nodes are out of service (cordoned or NotReady; few, named). What the claim-time
    capacity limits read of a pool or a topology domain (`Cluster.count_nodes`)."""

    nodes: int
    gpus: int
    down: tuple[NodeInfo, ...]
    """The selected nodes that are cordoned or not Ready, in name order."""


class Cluster(Protocol):
    """Reads and changes Kubernetes objects. Writes are idempotent by construction."""

    def nodes(
        self,
        names: Collection[str] | None = None,
        *,
        labels: Mapping[str, str | None] | None = None,
    ) -> list[NodeInfo]:
        """Nodes by name (all nodes when `names` is None). Unknown names raise NodeNotFound.
        `labels` (with `names` None) selects by label instead of listing the fleet: a value is
        `key=value`, None is "key absent" (one label-selected list on the API)."""
        ...

    def first_nodes(self, labels: Mapping[str, str | None], *, limit: int) -> NodeSample:
        """At most `limit` of the nodes `labels` selects (as in `nodes`), the first in name
        order, and how many it selects: a read whose cost follows `limit`, not the selection
        (a pool's peers, a few spare candidates). `limit` is at least 1."""
        ...

    def count_nodes(self, labels: Mapping[str, str | None]) -> NodeCount:
        """The nodes `labels` selects (as in `nodes`) counted: their number, their GPUs and
        the cordoned or NotReady ones. Kept per label value by the Kubernetes node cache as it
        applies watch events, one listing counted elsewhere (kept until the next write in the
        simulator): the claim-time safety check reads these, never a pool's member list."""
        ...

    def pods_on(self, node: str) -> list[PodInfo]:
        """Every pod bound to the node, in all namespaces."""
        ...

    def events(self, node: str, *, since: datetime) -> list[ClusterEvent]:
        """Events about the node and the pods on it since `since`."""
        ...

    def pod_logs(
        self,
        pod: str,
        namespace: str,
        *,
        tail_lines: int = 500,
        container: str | None = None,
        since: timedelta | None = None,
    ) -> str: ...

    def node_logs(self, node: str, *, tail_lines: int = 500) -> str:
        """The node's kernel log (the kubelet's node log query, `/api/v1/nodes/N/proxy/logs`)."""
        ...

    def cordon(self, node: str) -> Outcome: ...

    def uncordon(self, node: str) -> Outcome: ...

    def drain(self, node: str, *, grace: timedelta) -> DrainReport:
        """Evict the node's pods through the Eviction API, honouring PodDisruptionBudgets: a
        refused eviction is retried with backoff until `grace` has passed, then reported in
        `blocked`. Never a delete that bypasses a PDB."""
        ...

    def taint(self, node: str, *, key: str, value: str = "", effect: str = "NoSchedule") -> Outcome:
        """Add the taint `key=value:effect` (ALREADY_DONE when the node has it)."""
        ...

    def untaint(self, node: str, *, key: str, effect: str = "NoSchedule") -> Outcome:
        """Remove the taint with this key and effect (ALREADY_DONE when absent)."""
        ...

    def delete_pod(self, pod: str, namespace: str, *, grace: timedelta) -> Outcome:
        """Delete one pod (ALREADY_DONE when it is gone)."""
        ...

    def annotate(self, node: str, annotations: Mapping[str, str | None]) -> Outcome:
        """Set node annotations; a None value removes the key."""
        ...

    def label(self, node: str, labels: Mapping[str, str | None]) -> Outcome:
        """Set node labels; a None value removes the key."""
        ...

    def remediation_pauses(self, node: NodeInfo) -> list[RemediationPause]:
        """Pause requests of other remediators whose selection includes the node (medik8s
        NodeHealthChecks with `spec.pauseRequests`); [] when none exist or none is installed."""
        ...

    def create_job(self, manifest: Mapping[str, Any]) -> JobRun:
        """Create the batch/v1 Job `manifest` (plain data naming `metadata.name` and
        `metadata.namespace`). A Job of that name that already exists (409 AlreadyExists) is
        read instead, so a retried create never starts a second one."""
        ...

    def read_job(self, name: str, namespace: str) -> JobRun:
        """The Job's state now (an unknown Job raises JobNotFound)."""
        ...

    def job_logs(self, name: str, namespace: str, *, tail_lines: int = 20) -> str:
        """The last lines of the log of the Job's newest pod ("" while it has none)."""
        ...

    def check_permissions(self, needed: Collection[Permission]) -> list[Permission]:
        """Whether the configured identity holds each permission (SelfSubjectAccessReview)."""
        ...


def select_by_labels(nodes: Iterable[NodeInfo], labels: Mapping[str, str | None]) -> list[NodeInfo]:
    """The nodes whose labels match `labels` as `Cluster.nodes(labels=...)` means it: a value is
    `key=value`, None is "key absent". For backends with no label index (the simulator, Slurm)."""
    return [n for n in nodes if all(n.labels.get(k) == v for k, v in labels.items())]


def first_of(selected: Sequence[NodeInfo], *, limit: int) -> NodeSample:
    """The bounded read over a selection a backend had to read whole (Slurm: one GET nodes):
    the first `limit` by name, with the count."""
    if limit < 1:
        raise ValueError(f"a bounded node read needs a limit of at least 1, not {limit}")
    return NodeSample(tuple(heapq.nsmallest(limit, selected, key=_name)), len(selected))


def count_of(selected: Iterable[NodeInfo]) -> NodeCount:
    """The count over a selection a backend had to read whole (Slurm: one GET nodes)."""
    nodes = gpus = 0
    down = []
    for node in selected:
        nodes, gpus = nodes + 1, gpus + node.gpu_capacity
        if out_of_service(node):
            down.append(node)
    return NodeCount(nodes, gpus, tuple(sorted(down, key=_name)))


def out_of_service(node: NodeInfo) -> bool:
    """Cordoned or not Ready: what the capacity limits count as already out."""
    return node.unschedulable or not node.ready


def _name(node: NodeInfo) -> str:
    return node.name
