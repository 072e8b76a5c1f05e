"""SimTelemetry: the Telemetry port answered natively from the simulated fleet's series.

Evaluates a SignalSpec the way its PromQL would: select the metric's series by the catalog's
label matchers, joins (`* on(...) group_left(...)` info series), the host label and, for
workload signals, the workload label; apply the range function over `[now − window, now]`;
combine series that share a sample identity (`agg by (...)`); scale. Histogram quantiles sum
bucket rates by `le` and interpolate as `histogram_quantile` does. One read is one backend
query, whatever the node count (a range read too); `queries` counts them for tests.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from integrations.signals import (
    DEFAULT_HOST_LABELS,
    DEFAULT_WORKLOAD_LABELS,
    SignalCatalog,
    SignalSpec,
)
from integrations.telemetry import Sample, SeriesPoints, SignalQuery, SignalResult
from simulator.fleet import Fleet
from simulator.selection import Labels, Selection, histogram_quantile

__all__ = ["SimTelemetry", "histogram_quantile"]


class SimTelemetry:
    """Reads named signals from a Fleet. Stricter than production: it counts queries."""

    def __init__(
        self,
        fleet: Fleet,
        catalog: SignalCatalog,
        *,
        host_labels: Mapping[str, str] = DEFAULT_HOST_LABELS,
        workload_labels: Mapping[str, str] = DEFAULT_WORKLOAD_LABELS,
    ) -> None:
        self.fleet = fleet
        self.catalog = catalog
        self.host_labels = dict(host_labels)
        self.workload_labels = dict(workload_labels)
        self.queries = 0
        self._lock = threading.Lock()

    def read(self, query: SignalQuery) -> SignalResult:
        """Evaluate `query.signal` for its nodes, its workload, or the whole fleet.

        Node signals: `nodes`, else the nodes the workload runs on, else every node; a node
        without a series (an unknown node too) is in `missing_nodes`. Workload signals (job,
        vLLM, pod series): series whose workload label is `workload`, narrowed to `nodes` when
        given; only requested nodes can be missing. Raises UnknownSignal for an unknown signal.
        """
        spec = self.catalog.get(query.signal)
        with self._lock:
            self.queries += 1
        wanted = self._nodes(spec, query)
        at = self.fleet.offset(self.fleet.now())
        scale = spec.scale
        samples = []
        for part, nodes in _parts(spec, query, wanted):
            found = self._select(spec, part, nodes).at_one(at)
            for identity, value in found.items():
                if value is not None:  # an identity's labels: one dict, shared by its samples
                    samples.append(Sample(identity.node, value * scale, identity.labels))
        seen = {s.node for s in samples}
        candidates = wanted if wanted is not None else []
        missing = tuple(n for n in candidates if n not in seen)
        return SignalResult(
            signal=query.signal, samples=tuple(samples), missing_nodes=missing, queries=1
        )

    def read_range(
        self, query: SignalQuery, *, start: datetime, end: datetime, step: timedelta
    ) -> list[SeriesPoints]:
        """`read` evaluated at `start`, `start + step`, ... up to `end` (one backend query, as a
        Prometheus range query is); a series absent at a step has no point there. The series
        are selected once, not per step (selection.py)."""
        if step <= timedelta(0) or end < start:
            raise ValueError(f"signal '{query.signal}': a range needs start <= end and step > 0")
        spec = self.catalog.get(query.signal)
        with self._lock:
            self.queries += 1
        wanted = self._nodes(spec, query)
        steps: list[datetime] = []
        at = start
        while at <= end:
            steps.append(at)
            at += step
        found = self._select(spec, query, wanted).at([self.fleet.offset(at) for at in steps])
        made: dict[int, tuple[tuple[datetime, float], ...]] = {}  # values shared by series
        series = []
        for group, values in found.items():
            points = made.get(id(values))
            if points is None:
                points = made[id(values)] = _points(steps, values, scale=spec.scale)
            series.append((group, points))
        return [
            SeriesPoints(node=node, labels=dict(labels), points=points)
            for (node, labels), points in sorted(series)
            if points
        ]

    def _select(self, spec: SignalSpec, query: SignalQuery, wanted: list[str] | None) -> Selection:
        labels = Labels(
            host=self.host_labels.get(spec.source, DEFAULT_HOST_LABELS[spec.source]),
            workload=self.workload_labels.get(spec.source, ""),
        )
        return Selection.of(self.fleet, spec, query, wanted=wanted, labels=labels)

    def _nodes(self, spec: SignalSpec, query: SignalQuery) -> list[str] | None:
        """The nodes a read answers for (None: whichever series match, nothing can be missing)."""
        if query.nodes:
            return list(dict.fromkeys(query.nodes))
        if spec.selects_by_workload:
            return None
        if query.workload is not None:
            return self.fleet.running_nodes(query.workload)
        return self.fleet.node_names


def _points(
    steps: list[datetime], values: list[float | None], *, scale: float
) -> tuple[tuple[datetime, float], ...]:
    if None not in values:  # present at every step: the common case, in one pass
        return tuple(zip(steps, [v * scale for v in values if v is not None], strict=True))
    return tuple([(at, v * scale) for at, v in zip(steps, values, strict=True) if v is not None])


PART_NODES = 128
"""Nodes a read selects and evaluates at a time. A storm's read of 4,096 members is 32,768
GPU series: in parts, each part's tracks, memos and samples found are walked while still in
the CPU's cache, not after a pass over the whole fleet's (the read alone was 4.8x the
1,024-member one, 4.2x in parts; docs/performance.md). The answer is the same."""


def _parts(
    spec: SignalSpec, query: SignalQuery, wanted: list[str] | None
) -> Iterator[tuple[SignalQuery, list[str] | None]]:
    """The query over `wanted` in parts of PART_NODES nodes, in order: a sample's identity
    includes its node, so no identity spans two parts. Whole when the nodes are not known
    (a workload's series), for a join (its info series are indexed once per selection) and
    for a few nodes."""
    if wanted is None or spec.joins or spec.selects_by_workload or len(wanted) <= PART_NODES:
        yield query, wanted
        return
    for i in range(0, len(wanted), PART_NODES):
        nodes = wanted[i : i + PART_NODES]
        yield replace(query, nodes=tuple(nodes)), nodes
