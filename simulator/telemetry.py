"""SimTelemetry: the Telemetry port answered natively from the simulated fleet's series.

Evaluates a SignalSpec the way its PromQL would: select the metric's series by the catalog's
label matchers, joins (`* on(...) group_left(...)` info series), the host label and, for
workload signals, the workload label; apply the range function over `[now − window, now]`;
combine series that share a sample identity (`agg by (...)`); scale. Histogram quantiles sum
bucket rates by `le` and interpolate as `histogram_quantile` does. One read is one backend
query, whatever the node count (a range read too); `queries` counts them for tests.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta

from integrations.signals import (
    DEFAULT_HOST_LABELS,
    DEFAULT_WORKLOAD_LABELS,
    LabelJoin,
    SignalCatalog,
    SignalSpec,
)
from integrations.telemetry import Sample, SeriesPoints, SignalQuery, SignalResult
from simulator.fleet import Fleet
from simulator.tracks import Computed, Effect, SampleGrid, Track, evaluate

Group = tuple[str, tuple[tuple[str, str], ...]]
"""A sample identity: its node and its identity labels."""
_AGG: dict[str, Callable[[list[float]], float]] = {
    "max": max,
    "min": min,
    "sum": math.fsum,
    "avg": lambda values: math.fsum(values) / len(values),
    "count": lambda values: float(len(values)),
}


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
        groups = self._at(spec, query, wanted, end=self.fleet.offset(self.fleet.now()))
        samples = [
            Sample(node=node, value=value * spec.scale, labels=dict(labels))
            for (node, labels), value in groups.items()
            if value is not None
        ]
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
        Prometheus range query is); a series absent at a step has no point there."""
        if step <= timedelta(0) or end < start:
            raise ValueError(f"signal '{query.signal}': a range needs start <= end and step > 0")
        spec = self.catalog.get(query.signal)
        with self._lock:
            self.queries += 1
        wanted = self._nodes(spec, query)
        points: dict[Group, list[tuple[datetime, float]]] = {}
        at = start
        while at <= end:
            groups = self._at(spec, query, wanted, end=self.fleet.offset(at))
            for key, value in groups.items():
                if value is not None:
                    points.setdefault(key, []).append((at, value * spec.scale))
            at += step
        return [
            SeriesPoints(node=node, labels=dict(labels), points=tuple(found))
            for (node, labels), found in sorted(points.items())
        ]

    def _at(
        self, spec: SignalSpec, query: SignalQuery, wanted: list[str] | None, *, end: float
    ) -> dict[Group, float | None]:
        """The signal's value per sample identity over `[end - window, end]` (fleet time)."""
        grid = SampleGrid.over(start=end - query.window.total_seconds(), end=end)
        scope = wanted if not spec.selects_by_workload else (list(query.nodes) or None)
        pods_of = query.workload if spec.selects_by_workload else None
        tracks = self.fleet.tracks(spec.series_metric, scope, workload=pods_of)
        return self._groups(spec, query, grid=grid, tracks=tracks)

    def _nodes(self, spec: SignalSpec, query: SignalQuery) -> list[str] | None:
        """The nodes a read answers for (None: whichever series match, nothing can be missing)."""
        if query.nodes:
            return list(dict.fromkeys(query.nodes))
        if spec.selects_by_workload:
            return None
        if query.workload is not None:
            return self.fleet.running_nodes(query.workload)
        return self.fleet.node_names

    def _groups(
        self, spec: SignalSpec, query: SignalQuery, *, grid: SampleGrid, tracks: Iterable[Track]
    ) -> dict[Group, float | None]:
        host = self.host_labels.get(spec.source, DEFAULT_HOST_LABELS[spec.source])
        workload_label = self.workload_labels.get(spec.source, "")
        by_workload = spec.selects_by_workload and query.workload is not None
        nodes = set(query.nodes) if query.nodes else None
        match = tuple(spec.match.items())
        joins = [
            self._join_index(j, at=grid.end, workload=query.workload if by_workload else None)
            for j in spec.joins
        ]
        identity = spec.identity_labels
        quantile = spec.fn == "quantile"
        fn = "rate" if quantile else spec.fn
        values: dict[Group, list[float]] = {}
        buckets: dict[Group, dict[float, float]] = {}
        shared: dict[tuple[Effect, ...], tuple[float, float] | None] = {}
        for track in tracks:
            labels = track.labels
            if match and any(labels.get(k) != v for k, v in match):
                continue
            if joins:
                joined = _joined(labels, joins=spec.joins, indexes=joins)
                if joined is None:
                    continue
                labels = joined
            node = labels.get(host)
            if node is None or node != track.node or (nodes is not None and node not in nodes):
                continue
            if by_workload and labels.get(workload_label) != query.workload:
                continue
            result = _evaluate(track, fn, grid=grid, shared=shared)
            if result is None:
                continue
            value, last = result
            if track.value_labels is not None:
                labels = track.labels_for(last)
            key = (node, tuple([(k, labels[k]) for k in identity if k in labels]))
            if quantile:
                per_le = buckets.setdefault(key, {})
                le = float(labels.get("le", "nan"))
                per_le[le] = per_le.get(le, 0.0) + value
                continue
            found = values.get(key)
            if found is None:
                values[key] = [value]
            else:
                found.append(value)
        if quantile:
            q = spec.quantile or 0.5
            return {key: histogram_quantile(q, per_le) for key, per_le in buckets.items()}
        combine = _AGG[spec.agg]
        single = spec.agg != "count"
        return {
            key: found[0] if single and len(found) == 1 else combine(found)
            for key, found in values.items()
        }

    def _join_index(
        self, join: LabelJoin, *, at: float, workload: str | None
    ) -> dict[tuple[str, ...], dict[str, str]]:
        """The join metric's series present at `at`, keyed by the join keys."""
        index: dict[tuple[str, ...], dict[str, str]] = {}
        for track in self.fleet.tracks(join.metric, workload=workload):
            if track.value(at) is None:
                continue
            key = tuple(track.labels.get(k, "") for k in join.keys)
            index[key] = {k: track.labels[k] for k in join.labels if k in track.labels}
        return index


def _evaluate(
    track: Track,
    fn: str,
    *,
    grid: SampleGrid,
    shared: dict[tuple[Effect, ...], tuple[float, float] | None],
) -> tuple[float, float] | None:
    """`evaluate`, once per distinct model reading: a track whose value a model computes
    (`Computed`) does not depend on its baseline, so tracks with equal effects (a node's GPUs
    reading its training job through one shared reader) share one evaluation. The key holds
    the effects themselves (Computed compares by its reader's identity), never bare ids."""
    effects = track.effects
    if (
        not effects
        or track.value_labels is not None
        or not any(isinstance(e, Computed) for e in effects)
    ):
        return evaluate(track, fn, grid=grid)
    if effects not in shared:
        shared[effects] = evaluate(track, fn, grid=grid)
    return shared[effects]


def _joined(
    labels: dict[str, str],
    *,
    joins: tuple[LabelJoin, ...],
    indexes: list[dict[tuple[str, ...], dict[str, str]]],
) -> dict[str, str] | None:
    out = dict(labels)
    for join, index in zip(joins, indexes, strict=True):
        extra = index.get(tuple(labels.get(k, "") for k in join.keys))
        if extra is None:
            return None
        out.update(extra)
    return out


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """Prometheus' `histogram_quantile` over cumulative bucket rates keyed by `le` (None where
    PromQL gives NaN: no +Inf bucket, or no observations)."""
    items = sorted((le, count) for le, count in buckets.items() if not math.isnan(le))
    if not items or not math.isinf(items[-1][0]) or items[-1][1] <= 0:
        return None
    rank = q * items[-1][1]
    lower, below = 0.0, 0.0
    for i, (le, count) in enumerate(items):
        if count >= rank:
            if math.isinf(le):
                return items[i - 1][0] if i > 0 else None
            if i == 0 and le <= 0:
                return le
            inside = count - below
            return lower + (le - lower) * ((rank - below) / inside if inside > 0 else 1.0)
        lower, below = le, count
    return None
