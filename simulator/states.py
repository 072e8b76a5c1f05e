"""Live Kubernetes-side state of a simulated node: cordon history, when it was drained, and
the taints, annotations and label changes written through the Cluster port.

Plain data owned by the Fleet; times are fleet seconds since t0. Cordons are kept as
intervals, not a flag, so `kube_node_spec_unschedulable` can be read at any past time.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class NodeState:
    """Live Kubernetes-side state of a node (times are fleet seconds since t0)."""

    cordons: list[list[float | None]] = field(default_factory=list)
    """[start, end] intervals during which the node was cordoned."""
    drained_t: float | None = None
    taints: list[tuple[str, str, str]] = field(default_factory=list)
    """(key, value, effect) of the taints written through the Cluster port, oldest first."""
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str | None] = field(default_factory=dict)
    """Label writes over the node's built-in labels (None: removed)."""

    @property
    def cordoned(self) -> bool:
        return bool(self.cordons) and self.cordons[-1][1] is None

    def cordoned_at(self, t: float) -> float:
        for start, end in self.cordons:
            if start is not None and start <= t and (end is None or t < end):
                return 1.0
        return 0.0
