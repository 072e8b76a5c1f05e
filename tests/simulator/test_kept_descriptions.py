"""What the simulator keeps between reads never shows a stale fleet.

Covers: SimCluster's kept node descriptions equal a fresh describer's after every kind of write
(cordon, label, taint, annotate, a fault injected, a drain) and as time passes over a fault
that starts later; the kept tracks of a (metric, node) follow an injected fault and a repair
(the series read equals that of a fleet rebuilt from the same journal, which kept nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from integrations.signals import load_signal_catalog
from integrations.telemetry import SignalQuery
from runbooks import SIGNALS_FILE
from simulator import Fleet, SimCluster, SimTelemetry
from simulator.scenarios import FaultSpec, parse_scenario

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
POOL = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


class Clock:
    def __init__(self) -> None:
        self.at = T0

    def __call__(self) -> datetime:
        return self.at


def fleet_of(faults: list[dict[str, Any]] | None = None) -> tuple[Fleet, Clock]:
    clock = Clock()
    scenario = parse_scenario(
        {
            "apiVersion": "gpu-oncall/v1",
            "kind": "Scenario",
            "metadata": {"name": "kept-descriptions"},
            "fleet": {"nodes": 8, "dcgm_counters": "all"},
            "faults": faults or [],
            "trigger": {"command": "diagnose gpu-node-00"},
        },
        source="test",
    )
    return Fleet(scenario, clock), clock


def same_as_fresh(cluster: SimCluster) -> None:
    """The kept listing (all nodes, and one pool) equals a describer's that kept nothing."""
    fresh = SimCluster(cluster.fleet)
    assert cluster.nodes() == fresh.nodes()
    assert cluster.nodes(labels=POOL) == fresh.nodes(labels=POOL)


WRITES: list[Callable[[SimCluster], object]] = [
    lambda c: c.cordon("gpu-node-01"),
    lambda c: c.label("gpu-node-02", {"nvidia.com/gpu.product": "other"}),
    lambda c: c.taint("gpu-node-03", key="gpu-oncall.io/quarantine"),
    lambda c: c.annotate("gpu-node-04", {"gpu-oncall.io/incident": "INC-1"}),
    lambda c: c.fleet.inject(FaultSpec(kind="node_not_ready", node="gpu-node-05")),
    lambda c: c.drain("gpu-node-06", grace=timedelta(seconds=30)),
    lambda c: c.uncordon("gpu-node-01"),
]


def test_kept_descriptions_follow_every_write() -> None:
    fleet, clock = fleet_of()
    cluster = SimCluster(fleet)
    same_as_fresh(cluster)  # every node described and kept
    for write in WRITES:
        write(cluster)
        clock.at += timedelta(minutes=1)
        same_as_fresh(cluster)
    listed = {n.name: n for n in cluster.nodes()}
    assert listed["gpu-node-05"].ready is False
    assert listed["gpu-node-06"].unschedulable is True
    assert "gpu-node-02" not in {n.name for n in cluster.nodes(labels=POOL)}


def test_a_fault_that_starts_later_shows_when_it_starts() -> None:
    fleet, clock = fleet_of([{"kind": "node_not_ready", "node": "gpu-node-02", "start": "+5m"}])
    cluster = SimCluster(fleet)
    before = {n.name: n.ready for n in cluster.nodes()}
    clock.at += timedelta(minutes=10)
    after = {n.name: n.ready for n in cluster.nodes()}
    assert before["gpu-node-02"] is True and after["gpu-node-02"] is False
    same_as_fresh(cluster)


def test_kept_tracks_follow_a_fault_and_its_repair() -> None:
    fleet, clock = fleet_of()
    query = SignalQuery(signal="gpu.ecc.dbe_rate", window=timedelta(minutes=5))
    catalog = load_signal_catalog(SIGNALS_FILE)
    telemetry = SimTelemetry(fleet, catalog)
    steps: list[Callable[[], object]] = [
        lambda: None,
        lambda: fleet.inject(FaultSpec(kind="ecc_dbe_storm", node="gpu-node-03", gpu=2)),
        lambda: fleet.repair("gpu-node-03"),
    ]
    faulty: list[float] = []
    for step in steps:
        step()
        clock.at += timedelta(minutes=6)
        kept = telemetry.read(query).samples
        rebuilt, rebuilt_clock = fleet_of()  # the same journal on a fleet that kept nothing
        rebuilt.restore_state(fleet.export_state())
        rebuilt_clock.at = clock.at
        assert kept == SimTelemetry(rebuilt, catalog).read(query).samples
        faulty.append(max(x.value for x in kept if x.node == "gpu-node-03"))
    healthy, storming, repaired = faulty
    assert healthy == 0.0 and storming > 0.0 and repaired == 0.0
