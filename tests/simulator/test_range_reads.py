"""SimTelemetry's reads select their series once, and answer exactly as the per-point definition.

Covers, on generated fleets (the shipped scenarios of up to 32 nodes, with their faults,
workloads and pods, some written to: drained, cordoned, repaired) and generated queries (any
catalog signal, as catalogued or with another range function, identity and aggregation; asked
nodes, a workload, both or neither; windows, ranges and steps):
- `read_range` gives, at every step, exactly what the reference gives at that time: the
  previous implementation, kept here, which selected, filtered and evaluated every track anew
  at each point (same series, labels, values to the bit, absence where there was absence);
- `read` gives exactly the reference's samples, in its order, and the same missing nodes;
- the pod series of named nodes or of a workload (read from an index) are those a scan of
  every pod finds, in the same order.
The reference shares with selection.py only what this change did not touch: how samples combine
(`AGGREGATE`), a join's labels (`join_labels`) and `histogram_quantile`.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from integrations.signals import (
    DEFAULT_HOST_LABELS,
    LabelJoin,
    SignalCatalog,
    SignalSpec,
    load_signal_catalog,
)
from integrations.telemetry import SignalQuery
from runbooks import SIGNALS_FILE
from simulator import SCENARIO_DIR, Fleet, SimTelemetry
from simulator import telemetry as sim_telemetry
from simulator.pod_metrics import pod_tracks
from simulator.scenarios import Scenario, load_scenario
from simulator.selection import AGGREGATE, Identity, histogram_quantile, interned, join_labels
from simulator.tracks import Computed, Effect, SampleGrid, Track, evaluate

T0 = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)
Group = tuple[str, tuple[tuple[str, str], ...]]


@cache
def catalog() -> SignalCatalog:
    return load_signal_catalog(SIGNALS_FILE)


@cache
def small_scenarios() -> tuple[Path, ...]:
    return tuple(
        path
        for path in sorted(SCENARIO_DIR.glob("*.yaml"))
        if load_scenario(path).fleet.nodes <= 32
    )


@cache
def scenario(path: Path) -> Scenario:
    return load_scenario(path)


class Clock:
    def __init__(self) -> None:
        self.at = T0

    def __call__(self) -> datetime:
        return self.at


# --- the reference: the per-point implementation this change replaced ----------------------


def reference_at(
    telemetry: SimTelemetry, query: SignalQuery, wanted: list[str] | None, *, end: float
) -> dict[Group, float | None]:
    """The signal's value per sample identity over `[end - window, end]`, every track of the
    query selected, filtered and evaluated anew (the old `SimTelemetry._at` and `_groups`)."""
    fleet, spec = telemetry.fleet, telemetry.catalog.get(query.signal)
    grid = SampleGrid.over(start=end - query.window.total_seconds(), end=end)
    scope = wanted if not spec.selects_by_workload else (list(query.nodes) or None)
    pods_of = query.workload if spec.selects_by_workload else None
    tracks = fleet.tracks(spec.series_metric, scope, workload=pods_of)
    host = telemetry.host_labels.get(spec.source, DEFAULT_HOST_LABELS[spec.source])
    workload_label = telemetry.workload_labels.get(spec.source, "")
    by_workload = spec.selects_by_workload and query.workload is not None
    nodes = set(query.nodes) if query.nodes else None
    match = tuple(spec.match.items())
    joins = [
        _join_index(fleet, j, at=grid.end, workload=query.workload if by_workload else None)
        for j in spec.joins
    ]
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
            joined = join_labels(labels, joins=spec.joins, indexes=joins)
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
        key = (node, tuple([(k, labels[k]) for k in spec.identity_labels if k in labels]))
        if quantile:
            per_le = buckets.setdefault(key, {})
            le = float(labels.get("le", "nan"))
            per_le[le] = per_le.get(le, 0.0) + value
            continue
        values.setdefault(key, []).append(value)
    if quantile:
        q = spec.quantile or 0.5
        return {key: histogram_quantile(q, per_le) for key, per_le in buckets.items()}
    combine = AGGREGATE[spec.agg]
    single = spec.agg != "count"
    return {
        key: found[0] if single and len(found) == 1 else combine(found)
        for key, found in values.items()
    }


def _join_index(
    fleet: Fleet, join: LabelJoin, *, at: float, workload: str | None
) -> dict[tuple[str, ...], dict[str, str]]:
    index: dict[tuple[str, ...], dict[str, str]] = {}
    for track in fleet.tracks(join.metric, workload=workload):
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
    effects = track.effects
    if not effects:
        return _linear(track, fn, grid=grid)
    if track.value_labels is not None or not any(isinstance(e, Computed) for e in effects):
        return evaluate(track, fn, grid=grid)
    if effects not in shared:
        shared[effects] = evaluate(track, fn, grid=grid)
    return shared[effects]


def _linear(track: Track, fn: str, *, grid: SampleGrid) -> tuple[float, float]:
    """The closed forms of a track without effects, one grid at a time."""
    slope = track.slope
    last = track.base + slope * grid.end
    first = track.base + slope * grid.start
    points = [grid.end - k * 30.0 for k in range(int((grid.end - grid.start) // 30.0), -1, -1)]
    if points[0] > grid.start:
        points.insert(0, grid.start)
    forms = {
        "last": last,
        "max_over_time": max(first, last),
        "min_over_time": min(first, last),
        "avg_over_time": track.base + slope * (sum(points) / len(points)),
        "changes": 0.0 if slope == 0 else float(len(points) - 1),
        "increase": slope * grid.seconds,
        "rate": slope,
    }
    return forms[fn], last


def reference_range(
    telemetry: SimTelemetry, query: SignalQuery, times: Iterable[datetime]
) -> list[tuple[str, list[tuple[str, str]], list[tuple[datetime, float]]]]:
    spec = telemetry.catalog.get(query.signal)
    wanted = telemetry._nodes(spec, query)
    points: dict[Group, list[tuple[datetime, float]]] = {}
    for at in times:
        groups = reference_at(telemetry, query, wanted, end=telemetry.fleet.offset(at))
        for key, value in groups.items():
            if value is not None:
                points.setdefault(key, []).append((at, value * spec.scale))
    return [
        (node, list(dict(labels).items()), found)
        for (node, labels), found in sorted(points.items())
    ]


# --- generated fleets and queries ----------------------------------------------------------


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    path = draw(st.sampled_from(small_scenarios()))
    spec = scenario(path)
    names = list(spec.fleet.node_names)
    faulty = [f.node for f in spec.faults if f.node] or names[:1]
    node_pick = st.sampled_from(faulty) | st.sampled_from(names) | st.just("gpu-node-unknown")
    workloads = [w.name for w in spec.fleet.workloads]
    signal = catalog().get(draw(st.sampled_from(catalog().names())))
    changes: dict[str, str] = {}  # the catalog's signal, or one aggregated otherwise
    if draw(st.booleans()):
        changes["agg"] = draw(st.sampled_from(["max", "min", "avg", "sum", "count"]))
        changes["per"] = draw(st.sampled_from(["node", "gpu", "hca", "rank", "pod"]))
        if signal.fn != "quantile":
            changes["fn"] = draw(st.sampled_from(FNS))
    return {
        "scenario": path,
        "signal": signal.model_copy(update=changes),
        "nodes": tuple(draw(st.lists(node_pick, max_size=4))),
        "workload": draw(st.none() | st.sampled_from(workloads)) if workloads else None,
        "window_s": draw(st.sampled_from([60, 90, 300, 900, 1800])),
        "later_s": draw(st.integers(min_value=0, max_value=3600)),
        "write": draw(st.sampled_from(["none", "drain", "cordon", "repair"])),
        "write_node": draw(st.sampled_from(faulty)),
        "span_s": draw(st.integers(min_value=0, max_value=2400)),
        "step_s": draw(st.sampled_from([7, 15, 30, 45, 60, 240])),
        "ahead_s": draw(st.integers(min_value=-600, max_value=600)),
    }


FNS = ["last", "rate", "increase", "changes", "max_over_time", "min_over_time", "avg_over_time"]


def build(case: dict[str, Any]) -> tuple[SimTelemetry, SignalQuery, Clock]:
    clock = Clock()
    fleet = Fleet(scenario(case["scenario"]), clock)
    if case["write"] != "none":
        clock.at = T0 + timedelta(seconds=case["later_s"] // 2)
        if case["write"] == "drain":
            fleet.drain(case["write_node"], grace=timedelta(seconds=30))
        elif case["write"] == "cordon":
            fleet.cordon(case["write_node"])
        else:
            fleet.repair(case["write_node"])
    clock.at = T0 + timedelta(seconds=case["later_s"])
    signal: SignalSpec = case["signal"]
    query = SignalQuery(
        signal=signal.name,
        nodes=case["nodes"],
        workload=case["workload"],
        window=timedelta(seconds=case["window_s"]),
    )
    return SimTelemetry(fleet, SignalCatalog({signal.name: signal})), query, clock


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_a_range_read_is_the_per_point_definition_at_every_step(case: dict[str, Any]) -> None:
    telemetry, query, clock = build(case)
    end = clock.at + timedelta(seconds=case["ahead_s"])
    start, step = end - timedelta(seconds=case["span_s"]), timedelta(seconds=case["step_s"])
    times = [start + k * step for k in range(case["span_s"] // case["step_s"] + 1)]
    found = telemetry.read_range(query, start=start, end=end, step=step)
    got = [(s.node, list(s.labels.items()), list(s.points)) for s in found]
    assert repr(got) == repr(reference_range(telemetry, query, times))  # repr: NaN == NaN


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.sampled_from([sim_telemetry.PART_NODES, 1, 2, 3]))
def test_an_instant_read_is_the_per_point_definition(case: dict[str, Any], part: int) -> None:
    """Also when the read selects its nodes a few at a time (PART_NODES)."""
    telemetry, query, clock = build(case)
    expected = expected_at(telemetry, query, clock)
    with patch.object(sim_telemetry, "PART_NODES", part):
        result = telemetry.read(query)
    assert repr([(s.node, s.labels, s.value) for s in result.samples]) == repr(expected)
    seen = {node for node, _labels, _value in expected}
    wanted = telemetry._nodes(telemetry.catalog.get(query.signal), query)
    assert result.missing_nodes == tuple(n for n in wanted or [] if n not in seen)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cases(),
    st.sampled_from(["node", "gpu", "hca", "rank", "pod"]),
    st.booleans(),
    st.integers(min_value=0, max_value=3600),
)
def test_reads_grouping_one_metric_differently_are_each_the_per_point_definition(
    case: dict[str, Any], per: str, other_first: bool, then_s: int
) -> None:
    """A track keeps the sample identity of the last read that grouped it (with the value its
    labels came from: the XID gauge's `err_code`), and each read shares one labels dict per
    identity: a read grouping the same series by other labels, before or after, on the same
    fleet, and the same reads later (other values), are each the per-point definition."""
    telemetry, query, clock = build(case)
    spec = telemetry.catalog.get(query.signal)
    other = spec.model_copy(update={"name": f"{spec.name}.by_{per}", "per": per})
    telemetry.catalog = SignalCatalog({spec.name: spec, other.name: other})
    by_other = replace(query, signal=other.name)
    reads = [by_other, query, by_other] if other_first else [query, by_other, query]
    for index, read in enumerate([*reads, *reads]):
        if index == len(reads):
            clock.at += timedelta(seconds=then_s)
        got = telemetry.read(read)
        assert repr([(s.node, s.labels, s.value) for s in got.samples]) == repr(
            expected_at(telemetry, read, clock)
        )


def expected_at(telemetry: SimTelemetry, query: SignalQuery, clock: Clock) -> list[Any]:
    """An instant read's samples by the per-point definition: (node, labels, value)."""
    spec = telemetry.catalog.get(query.signal)
    wanted = telemetry._nodes(spec, query)
    return [
        (node, dict(labels), value * spec.scale)
        for (node, labels), value in reference_at(
            telemetry, query, wanted, end=telemetry.fleet.offset(clock.at)
        ).items()
        if value is not None
    ]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.sampled_from(["kube_pod_info", "kube_pod_status_phase"]), st.booleans())
def test_pod_series_of_named_nodes_are_those_of_a_scan_of_every_pod(
    case: dict[str, Any], metric: str, by_nodes: bool
) -> None:
    telemetry, query, _clock = build(case)
    fleet = telemetry.fleet
    nodes = query.nodes if by_nodes else None
    scan = [
        p
        for p in fleet.pods.values()
        if (nodes is None or p.node in nodes)
        and (query.workload is None or (p.workload == query.workload and not p.daemonset))
    ]
    found = fleet.tracks(metric, nodes, workload=query.workload)
    assert [(t.entity, t.labels) for t in found] == [
        (t.entity, t.labels) for t in pod_tracks(metric, scan)
    ]


def test_equal_groups_are_one_identity_while_held_even_interned_by_many_threads() -> None:
    """Reads in several threads intern the sample identities they meet: equal groups must give
    one Identity, or a read would count one identity's series as two."""
    groups = [(f"node-{i}", (("gpu", str(i % 8)), ("UUID", f"GPU-{i}"))) for i in range(2_000)]
    start = threading.Barrier(8, timeout=30)
    found: list[list[Identity]] = []

    def intern_all() -> None:
        fresh = [(node, tuple((k, v) for k, v in pairs)) for node, pairs in groups]  # equal, new
        start.wait()
        found.append([interned(g) for g in fresh])

    threads = [threading.Thread(target=intern_all) for _ in range(8)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch between any two bytecodes: races show
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert len(found) == 8
    for i, group in enumerate(groups):
        assert len({id(identities[i]) for identities in found}) == 1
        assert found[0][i].group == group and found[0][i].labels == dict(group[1])


def test_a_metric_read_by_two_groupings_is_grouped_once_for_each() -> None:
    """The XID gauge is read by its last value per GPU and by its changes (other identity
    labels): each track remembers both groupings, so reading both again interns nothing and
    answers the same samples."""
    clock = Clock()
    fleet = Fleet(scenario(SCENARIO_DIR / "ecc-dbe-storm.yaml"), clock)
    names = ("gpu.xid.last", "gpu.xid.changes", "gpu.ecc.dbe_rate")
    specs = {name: catalog().get(name) for name in names}
    assert len({specs[n].identity_labels for n in names[:2]}) == 2  # two ways to group
    telemetry = SimTelemetry(fleet, SignalCatalog(specs))
    queries = [SignalQuery(signal=n, window=timedelta(minutes=15)) for n in names]
    clock.at = T0 + timedelta(minutes=20)
    first = [telemetry.read(q).samples for q in queries]
    assert all(first)
    with patch("simulator.selection.interned", side_effect=AssertionError("grouped again")):
        again = [telemetry.read(q).samples for q in queries]
    assert again == first
