"""The vocabulary of simulated series: node views, seeds and metric definitions.

A `MetricDef` says which exporter family exposes a metric and how to lay out a node's healthy
series (`Seed`s: labels plus `base + slope·t`, or a model-driven value). Pure data; the metric
tables are in metrics.py (node exporters), workload_metrics.py and pod_metrics.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple

from simulator.entities import EntityKey, Family
from simulator.topology import NodeSpec

if TYPE_CHECKING:
    from simulator.workloads import Placement, Workloads


@dataclass(frozen=True)
class NodeView:
    """What a metric needs to know about one node to lay out its healthy series."""

    spec: NodeSpec
    busy: bool
    gpu_labels: tuple[dict[str, str], ...]
    hca_labels: tuple[dict[str, str], ...]
    node_labels: dict[str, str]
    """`{"node": name}` for kube-state-metrics."""
    workloads: Workloads | None = None
    """The fleet's live workloads (training jobs, inference services), for their series."""

    def placed(self, kind: str) -> tuple[Workloads, Placement] | None:
        """The `kind` ("training" | "inference") workload pod on this node, if one runs here."""
        if self.workloads is None:
            return None
        placement = self.workloads.on(self.spec.name)
        if placement is None or placement.workload.kind != kind:
            return None
        return self.workloads, placement


class Seed(NamedTuple):
    """One healthy series before faults: entity, labels, `base + slope·t`.

    A tuple, not a dataclass: a 4,096-node read lays out 32,768 of them per metric.
    """

    entity: EntityKey
    labels: dict[str, str]
    base: float
    slope: float = 0.0
    computed: Callable[[float], float] | None = None
    """The value at fleet time t, when a model (a disturbed job or service) drives it."""
    gone_from: float | None = None
    """The series disappears from this fleet time on (its pod was evicted)."""


@dataclass(frozen=True)
class MetricDef:
    name: str
    family: Family
    kind: Literal["gauge", "counter"]
    help: str
    seeds: Callable[[NodeView], list[Seed]]
    default_on: bool = True
    """False for dcgm fields commented out in dcgm-exporter's default CSV (absent by default)."""
    value_labels: Callable[[float], dict[str, str]] | None = None
    pod_level: bool = False
    """Series about pods, not nodes (kube-state-metrics pod metrics): pod_metrics.py lays
    them out; `seeds` is unused."""
