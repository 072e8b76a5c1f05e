"""What the simulated fleet's exporters expose: every metric's series, laid out and readable.

Owns the per-node label sets (cached) and builds tracks on demand from the healthy seeds plus
the fault impacts and live node state the Fleet shares with it. Knows nothing about pods, logs
or actions; times here are fleet seconds since t0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from integrations.sim.fault_base import Impact
from integrations.sim.metrics import METRICS, EntityKey, MetricDef, NodeView
from integrations.sim.scenarios import FleetSpec
from integrations.sim.states import NodeState
from integrations.sim.topology import NodeSpec
from integrations.sim.tracks import Computed, Effect, Track, order_effects


@dataclass(frozen=True)
class Series:
    """One exported sample: metric name, labels as the exporter writes them, value."""

    metric: str
    labels: dict[str, str]
    value: float


class SeriesSource:
    """Lays out and reads the series of dcgm-exporter, node_exporter and kube-state-metrics.

    `impacts` and `state` are the Fleet's own dicts, shared: a fault placed or a node cordoned
    shows up in the next read. Call `forget(node)` when a node's labels change.
    """

    def __init__(
        self,
        *,
        nodes: dict[str, NodeSpec],
        spec: FleetSpec,
        busy: set[str],
        impacts: dict[str, list[Impact]],
        state: dict[str, NodeState],
        driver_version: Callable[[str], str],
    ) -> None:
        self._nodes = nodes
        self._spec = spec
        self._busy = busy
        self._impacts = impacts
        self._state = state
        self._driver_version = driver_version
        self._views: dict[str, NodeView] = {}

    def metric_names(self) -> list[str]:
        return [name for name in METRICS if self.metric(name) is not None]

    def metric(self, name: str) -> MetricDef | None:
        """The metric if an exporter of this fleet exposes it, else None (its series are absent)."""
        definition = METRICS.get(name)
        if definition is None:
            return None
        if not definition.default_on and self._spec.dcgm_counters != "all":
            return None
        return definition

    def tracks(self, metric: str, nodes: Iterable[str] | None = None) -> Iterator[Track]:
        """The metric's tracks on `nodes` (all nodes when None); unknown nodes have none."""
        definition = self.metric(metric)
        if definition is None:
            return
        for node in self._nodes if nodes is None else nodes:
            if node in self._nodes:
                yield from self._node_tracks(definition, node)

    def series(self, metric: str, t: float) -> list[Series]:
        out: list[Series] = []
        for track in self.tracks(metric):
            value = track.value(t)
            if value is not None:
                out.append(Series(metric, track.labels_for(value), value))
        return out

    def value(self, metric: str, node: str, *, entity: EntityKey, t: float) -> float | None:
        for track in self.tracks(metric, [node]):
            if track.entity == entity:
                return track.value(t)
        return None

    def forget(self, node: str) -> None:
        """Drop the node's cached labels (its driver version changed)."""
        self._views.pop(node, None)

    def _node_tracks(self, definition: MetricDef, node: str) -> list[Track]:
        """Built on every call, not cached: cheap (tuples, slotted tracks, shared labels), and
        memory stays flat however many metrics a 4,096-node sweep touches. Fault windows are
        shared objects, so a drain shows up in the next read without invalidation."""
        impacts = [
            i
            for i in self._impacts.get(node, ())
            if i.metric in (None, definition.name) and i.family in (None, definition.family)
        ]
        extra = self._state_effects(definition.name, node)
        return [
            Track(
                node=node,
                labels=seed.labels,
                base=seed.base,
                slope=seed.slope,
                effects=_effects_for(seed.entity, impacts=impacts, extra=extra)
                if impacts or extra
                else (),
                entity=seed.entity,
                value_labels=definition.value_labels,
            )
            for seed in definition.seeds(self._view(node))
        ]

    def _state_effects(self, metric: str, node: str) -> list[Computed]:
        if metric == "kube_node_spec_unschedulable":
            return [Computed(self._state[node].cordoned_at)]
        return []

    def _view(self, node: str) -> NodeView:
        view = self._views.get(node)
        if view is None:
            view = self._make_view(self._nodes[node])
            self._views[node] = view
        return view

    def _make_view(self, node: NodeSpec) -> NodeView:
        host, driver = self._spec.dcgm_host_label, self._driver_version(node.name)
        gpu_labels = tuple(
            {
                "gpu": str(g.index),
                "UUID": g.uuid,
                "pci_bus_id": g.pci_bus_id,
                "device": f"nvidia{g.index}",
                "modelName": self._spec.gpu_model,
                host: node.name,
                "DCGM_FI_DRIVER_VERSION": driver,
            }
            for g in node.gpus
        )
        hca_labels = tuple(
            {"device": h.device, "port": h.port, "instance": node.name} for h in node.hcas
        )
        return NodeView(
            spec=node,
            busy=node.name in self._busy,
            gpu_labels=gpu_labels,
            hca_labels=hca_labels,
            node_labels={"node": node.name},
        )


def _effects_for(
    entity: EntityKey, *, impacts: list[Impact], extra: list[Computed]
) -> tuple[Effect, ...]:
    hits = [i.effect for i in impacts if i.entity is None or i.entity == entity]
    return order_effects([*extra, *hits])
