"""What the simulated fleet's exporters expose: every metric's series, laid out and readable.

Owns the per-node label sets (cached) and builds tracks on demand from the healthy seeds plus
the fault impacts, the workload models and live node state the Fleet shares with it; pod-level
kube-state-metrics series come from the live pods. Knows nothing about logs or actions; times
here are fleet seconds since t0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from simulator.fault_base import Impact
from simulator.metrics import METRICS, SCRAPE_FAMILY, EntityKey, MetricDef, NodeView, Seed
from simulator.pod_metrics import pod_tracks
from simulator.pods import SimPod
from simulator.scenario_specs import FleetSpec
from simulator.states import NodeState
from simulator.topology import NodeSpec
from simulator.tracks import Computed, Effect, FaultWindow, Gone, Track, order_effects
from simulator.workload_metrics import OVERLAYS, WORKLOAD_METRICS, overlay
from simulator.workloads import Workloads


@dataclass(frozen=True)
class Series:
    """One exported sample: metric name, labels as the exporter writes them, value."""

    metric: str
    labels: dict[str, str]
    value: float


#: Metrics whose value comes from live node state rather than seeds and faults.
STATEFUL_METRICS = frozenset({"kube_node_spec_unschedulable", "up"})


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
        workloads: Workloads,
        pods: Mapping[tuple[str, str], SimPod],
    ) -> None:
        self._nodes = nodes
        self._spec = spec
        self._busy = busy
        self._impacts = impacts
        self._state = state
        self._driver_version = driver_version
        self._workloads = workloads
        self._pods = pods
        self._views: dict[str, NodeView] = {}
        self._built: dict[tuple[str, str], _Built] = {}
        self._pods_seen: tuple[int, _PodIndex] = (-1, ([], {}, {}))

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

    def tracks(
        self, metric: str, nodes: Iterable[str] | None = None, *, workload: str | None = None
    ) -> Iterator[Track]:
        """The metric's tracks on `nodes` (all nodes when None); unknown nodes have none. For
        pod series, `workload` keeps only that workload's pods (an index: their
        `label_app_kubernetes_io_name` is the workload's name; other pods never match it); for
        job and vLLM series, only the nodes the workload is placed on (no other node has a
        series of it). Other node series ignore `workload`."""
        definition = self.metric(metric)
        if definition is None:
            return
        if definition.pod_level:
            yield from pod_tracks(metric, self._pods_of(nodes, workload))
            return
        if nodes is None and workload is not None and definition.family in _WORKLOAD_FAMILIES:
            nodes = self._workloads.hosts(workload)  # an index, as Prometheus' on `job`
        for node in self._nodes if nodes is None else nodes:
            if node in self._nodes:
                yield from self._node_tracks(definition, node)

    def _pods_of(self, nodes: Iterable[str] | None, workload: str | None) -> list[SimPod]:
        """The pods on `nodes` now (any node when None) of `workload` (any when None; its
        DaemonSet pods never), in the fleet's order. From an index by the node each pod was
        first placed on and by workload: a pod leaves its node only for none, never for
        another (as `Fleet.pods_on` relies on), so a query that names nodes reads their pods
        only, not the fleet's."""
        wanted = None if nodes is None else set(nodes)
        if wanted is None and workload is None:
            return list(self._pods.values())
        pods, homes, of_workload = self._pod_index()
        if wanted is not None:
            places = sorted(i for node in wanted for i in homes.get(node, ()))
            if workload is not None:
                places = [i for i in places if i in of_workload.get(workload, {})]
        else:
            places = list(of_workload.get(workload or "", {}))
        return [
            p
            for p in (pods[i] for i in places)
            if (wanted is None or p.node in wanted)
            and (workload is None or (p.workload == workload and not p.daemonset))
        ]

    def _pod_index(self) -> _PodIndex:
        """(pods in the fleet's order, their places by first node, by workload), rebuilt when
        a pod is added (pods are never removed)."""
        if self._pods_seen[0] != len(self._pods):
            pods = list(self._pods.values())
            homes: dict[str, list[int]] = {}
            of_workload: dict[str, dict[int, None]] = {}
            for i, pod in enumerate(pods):
                homes.setdefault(pod.home or "", []).append(i)
                of_workload.setdefault(pod.workload or "", {})[i] = None
            self._pods_seen = (len(pods), (pods, homes, of_workload))
        return self._pods_seen[1]

    def series(self, metric: str, t: float) -> list[Series]:
        out: list[Series] = []
        for track in self.tracks(metric):
            value = track.value(t)
            if value is not None:
                out.append(Series(metric, track.labels_for(value), value))
        return out

    def value(self, metric: str, node: str, *, entity: EntityKey, t: float) -> float | None:
        definition = self.metric(metric)
        if definition is not None and not definition.pod_level and node in self._nodes:
            built = self._cached(definition, node)
            if built is not None:
                track = built.entities.get(entity)
                return None if track is None else track.value(t)
        for track in self.tracks(metric, [node]):
            if track.entity == entity:
                return track.value(t)
        return None

    def values(self, metric: str, node: str, *, t: float) -> dict[EntityKey, float | None]:
        """Every series of the metric on the node at `t`, by entity (one pass, as `value`
        reads each)."""
        definition = self.metric(metric)
        if definition is None or definition.pod_level or node not in self._nodes:
            return {}
        built = self._cached(definition, node)
        if built is not None:
            return {entity: track.value(t) for entity, track in built.entities.items()}
        out: dict[EntityKey, float | None] = {}
        for track in self._node_tracks(definition, node):
            if track.entity not in out:
                out[track.entity] = track.value(t)
        return out

    def steady(self, metric: str, node: str) -> bool:
        """The metric's series on the node are constant in time (no effects, no slope) until
        the node's view or impacts change."""
        definition = self.metric(metric)
        if definition is None or definition.pod_level or node not in self._nodes:
            return False
        built = self._cached(definition, node)
        return built is not None and all(not t.effects and not t.slope for t in built.tracks)

    def forget(self, node: str) -> None:
        """Drop the node's cached labels (its driver version changed)."""
        self._views.pop(node, None)

    def _node_tracks(self, definition: MetricDef, node: str) -> list[Track]:
        """The node's tracks of the metric (see `_cached`)."""
        built = self._cached(definition, node)
        if built is not None:
            return built.tracks
        return self._build(definition, node, self._view(node), self._impacts_on(definition, node))

    def _cached(self, definition: MetricDef, node: str) -> _Built | None:
        """The node's tracks of the metric, built once per (metric, node) and kept while they
        cannot differ: the same node view (labels, busy) and the same impacts (compared by
        identity). Fault windows are shared objects, so a drain shows up in the next read
        without invalidation. None for metrics whose seeds follow live state (node state,
        workloads, overlays): those are built on every read."""
        name = definition.name
        if name in _LIVE_METRICS and name not in _BY_NODE_IMPACTS:
            return None
        impacts, view = self._impacts_on(definition, node), self._view(node)
        made_of = tuple(self._impacts.get(node, ())) if name in _BY_NODE_IMPACTS else impacts
        key = (name, node)
        built = self._built.get(key)
        if built is None or not built.fits(view, made_of):
            built = _Built.of(view, made_of, self._build(definition, node, view, impacts))
            self._built[key] = built
        return built

    def _impacts_on(self, definition: MetricDef, node: str) -> tuple[Impact, ...]:
        on_node = self._impacts.get(node)
        if not on_node:  # the healthy majority
            return ()
        return tuple(
            i
            for i in on_node
            if i.metric in (None, definition.name) and i.family in (None, definition.family)
        )

    def _build(
        self, definition: MetricDef, node: str, view: NodeView, impacts: tuple[Impact, ...]
    ) -> list[Track]:
        name, value_labels = definition.name, definition.value_labels
        counter = definition.kind == "counter"
        overlaid = name in OVERLAYS
        stateful = name in STATEFUL_METRICS
        tracks = []
        for seed in definition.seeds(view):
            if overlaid:
                seed = overlay(name, view, seed)
            effects: tuple[Effect, ...] = ()
            if impacts or stateful or seed.computed is not None or seed.gone_from is not None:
                extra = _own_effects(seed, counter=counter)
                if stateful:
                    extra += self._state_effects(name, node, seed.entity)
                effects = _effects_for(seed.entity, impacts=impacts, extra=extra)
            tracks.append(
                Track(
                    node=node,
                    labels=seed.labels,
                    base=seed.base,
                    slope=seed.slope,
                    effects=effects,
                    entity=seed.entity,
                    value_labels=value_labels,
                )
            )
        return tracks

    def _state_effects(self, metric: str, node: str, entity: EntityKey) -> list[Effect]:
        if metric == "kube_node_spec_unschedulable":
            return [Computed(self._state[node].cordoned_at)]
        if metric == "up":
            health = self._scrape_health(node, job=entity[-1])
            return [Computed(health)] if health is not None else []
        return []

    def _scrape_health(self, node: str, *, job: str) -> Callable[[float], float] | None:
        """`up{job}`: 0 while the exporter the job scrapes has lost all its series on the node;
        None when it never has (the seed's constant 1, read in closed form)."""
        family = SCRAPE_FAMILY[job]
        outages = [
            i.effect.window
            for i in self._impacts.get(node, ())
            if i.family == family and i.entity is None and isinstance(i.effect, Gone)
        ]
        if not outages:
            return None
        return lambda t: 0.0 if any(w.active(t) for w in outages) else 1.0

    def _view(self, node: str) -> NodeView:
        view = self._views.get(node)
        if view is None or view.busy != self._busy_now(node):
            view = self._make_view(self._nodes[node])
            self._views[node] = view
        return view

    def _busy_now(self, node: str) -> bool:
        """Busy while a workload pod runs (or ran) there: a gang rank left Pending never does."""
        return node in self._busy and self._workloads.on(node) is not None

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
            busy=self._busy_now(node.name),
            gpu_labels=gpu_labels,
            hca_labels=hca_labels,
            node_labels={"node": node.name},
            workloads=self._workloads,
        )


_PodIndex = tuple[list[SimPod], dict[str, list[int]], dict[str, dict[int, None]]]
"""Pods in the fleet's order, their places by the node first placed on and by workload."""
#: Metrics whose seeds read live state (node state, workloads) when built: never cached.
_LIVE_METRICS = STATEFUL_METRICS | frozenset(OVERLAYS) | frozenset(WORKLOAD_METRICS)
_BY_NODE_IMPACTS = frozenset({"up"})
"""Live metrics built from the node's impacts of other families (`up`: the scrape outages of
the exporters' families), kept while those impacts are the same objects."""
_WORKLOAD_FAMILIES = frozenset({"job", "vllm"})
"""Families whose series carry a workload label and exist only where the workload is placed."""


@dataclass(frozen=True, slots=True, eq=False)
class _Built:
    """A (metric, node)'s tracks and what they were built from."""

    view: NodeView
    impacts: tuple[Impact, ...]
    tracks: list[Track]
    entities: dict[EntityKey, Track]
    """The tracks by entity (the first of each, as a scan in order finds it)."""

    @classmethod
    def of(cls, view: NodeView, impacts: tuple[Impact, ...], tracks: list[Track]) -> _Built:
        entities = {t.entity: t for t in reversed(tracks)}
        return cls(view, impacts, tracks, entities)

    def fits(self, view: NodeView, impacts: tuple[Impact, ...]) -> bool:
        return (
            view is self.view
            and len(impacts) == len(self.impacts)
            and all(a is b for a, b in zip(impacts, self.impacts, strict=True))
        )


def _own_effects(seed: Seed, *, counter: bool) -> list[Effect]:
    """The seed's own model-driven value and disappearance (an evicted pod's series)."""
    own: list[Effect] = []
    if seed.computed is not None:
        own.append(Computed(seed.computed, monotonic=counter))
    if seed.gone_from is not None:
        own.append(Gone(FaultWindow(seed.gone_from)))
    return own


def _effects_for(
    entity: EntityKey, *, impacts: tuple[Impact, ...], extra: list[Effect]
) -> tuple[Effect, ...]:
    hits = [i.effect for i in impacts if i.entity is None or i.entity == entity]
    return order_effects([*extra, *hits])
