"""The Cluster port: read and change Kubernetes objects the runbooks need.

Speaks the domain (validated node names, small frozen records), never V1Node. Writes are
idempotent by construction and say whether they changed anything. Implemented by
`integrations.sim.cluster.SimCluster` and (later) `integrations.k8s.KubernetesCluster`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol


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
    taints: tuple[str, ...] = ()  # "key=value:Effect"
    gpu_capacity: int = 0
    gpu_allocatable: int = 0


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


@dataclass(frozen=True)
class ClusterEvent:
    at: datetime
    kind: str  # involved object kind: Node | Pod
    name: str
    reason: str
    message: str
    type: str = "Normal"  # Normal | Warning


@dataclass(frozen=True)
class DrainReport:
    """What a drain did: pods evicted, pods left alone (DaemonSets), pods blocked by a PDB."""

    outcome: Outcome
    evicted: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()


class Cluster(Protocol):
    """Reads and changes Kubernetes objects. Writes are idempotent by construction."""

    def nodes(self, names: Collection[str] | None = None) -> list[NodeInfo]:
        """Nodes by name (all nodes when `names` is None). Unknown names raise NodeNotFound."""
        ...

    def pods_on(self, node: str) -> list[PodInfo]: ...

    def events(self, node: str, *, since: datetime) -> list[ClusterEvent]:
        """Events about the node and the pods on it since `since`."""
        ...

    def pod_logs(self, pod: str, namespace: str, *, tail_lines: int = 500) -> str: ...

    def node_logs(self, node: str, *, tail_lines: int = 500) -> str:
        """The node's kernel log (the kubelet's node log query, `/api/v1/nodes/N/proxy/logs`)."""
        ...

    def cordon(self, node: str) -> Outcome: ...

    def uncordon(self, node: str) -> Outcome: ...

    def drain(self, node: str, *, grace: timedelta) -> DrainReport: ...
