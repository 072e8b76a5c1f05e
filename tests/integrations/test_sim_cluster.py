"""SimCluster: nodes, pods, events, logs and idempotent writes over the simulated fleet.

Covers: cordon/uncordon/drain are idempotent (the second call is ALREADY_DONE) and counted on
the fleet; drain cordons, evicts workload pods (they go Pending) and skips DaemonSet pods;
cordon shows in NodeInfo, taints, events and kube_node_spec_unschedulable; after a drain and
a full window the DBE rate is 0 while the XID gauge keeps its last code and a row-remap failure
stays set; cable faults outlast a drain until repaired; unknown nodes and pods raise errors
that list what exists; pods, pod logs and node labels look like a GPU cluster's; a fleet
rebuilt in another process from `export_state` continues identically.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from integrations.cluster import Outcome
from integrations.errors import NodeNotFound, PodNotFound, ScenarioError
from simulator import Fleet, SimCluster, SimTelemetry
from simulator.scenarios import FaultSpec
from integrations.telemetry import SignalQuery

Sim = Callable[..., tuple[Fleet, SimTelemetry, SimCluster]]
GRACE = timedelta(seconds=30)
NODE = "gpu-node-03"


def value(
    telemetry: SimTelemetry,
    signal: str,
    *,
    gpu: str = "5",
    window: timedelta = timedelta(minutes=5),
) -> float:
    result = telemetry.read(SignalQuery(signal=signal, nodes=(NODE,), window=window))
    return next(s.value for s in result.samples if s.labels.get("gpu") == gpu)


def test_cordon_twice_changes_once(sim: Sim) -> None:
    fleet, _, cluster = sim()
    assert cluster.cordon(NODE) is Outcome.CHANGED
    assert cluster.cordon(NODE) is Outcome.ALREADY_DONE
    assert fleet.cordon_calls[NODE] == 2
    info = cluster.nodes([NODE])[0]
    assert info.unschedulable and "node.kubernetes.io/unschedulable:NoSchedule" in info.taints
    reasons = [e.reason for e in cluster.events(NODE, since=fleet.t0 - timedelta(hours=1))]
    assert reasons == ["NodeNotSchedulable"]


def test_uncordon_twice_changes_once(sim: Sim) -> None:
    fleet, _, cluster = sim()
    assert cluster.uncordon(NODE) is Outcome.ALREADY_DONE
    cluster.cordon(NODE)
    assert cluster.uncordon(NODE) is Outcome.CHANGED
    assert cluster.uncordon(NODE) is Outcome.ALREADY_DONE
    assert not cluster.nodes([NODE])[0].unschedulable
    assert fleet.uncordon_calls[NODE] == 3


def test_drain_twice_evicts_once(sim: Sim) -> None:
    fleet, _, cluster = sim("ecc-dbe-storm.yaml")
    first = cluster.drain(NODE, grace=GRACE)
    assert first.outcome is Outcome.CHANGED
    assert first.evicted == ("llm-pretrain-worker-3",)
    assert len(first.skipped) == 1 and first.skipped[0].startswith("nvidia-dcgm-exporter-")
    second = cluster.drain(NODE, grace=GRACE)
    assert second.outcome is Outcome.ALREADY_DONE and second.evicted == ()
    assert fleet.drain_calls[NODE] == 2
    assert cluster.nodes([NODE])[0].unschedulable


def test_drained_pods_go_pending_and_daemonsets_stay(sim: Sim) -> None:
    fleet, _, cluster = sim("ecc-dbe-storm.yaml")
    cluster.drain(NODE, grace=GRACE)
    assert [p.workload for p in cluster.pods_on(NODE)] == ["nvidia-dcgm-exporter"]
    worker = fleet.pod("llm-pretrain-worker-3", "ml").info()
    assert (worker.phase, worker.node) == ("Pending", None)
    events = cluster.events(NODE, since=fleet.t0)
    assert [(e.kind, e.reason) for e in events] == [
        ("Node", "NodeNotSchedulable"),
        ("Pod", "Evicted"),
    ]


def test_after_drain_and_a_full_window_the_dbe_rate_is_zero(sim: Sim, clock: Any) -> None:
    fleet, telemetry, cluster = sim("ecc-dbe-storm.yaml")
    assert value(telemetry, "gpu.ecc.dbe_rate") > 0
    cluster.cordon(NODE)
    cluster.drain(NODE, grace=GRACE)
    assert fleet.drained_at(NODE) == fleet.now()
    clock.advance(minutes=1)
    assert value(telemetry, "gpu.ecc.dbe_rate") > 0  # the window still holds pre-drain errors
    clock.advance(minutes=4)
    assert value(telemetry, "gpu.ecc.dbe_rate") == 0.0
    assert value(telemetry, "gpu.xid.changes") == 0.0
    assert value(telemetry, "gpu.xid.last") == 48.0  # DCGM keeps the last XID
    assert fleet.drain_calls[NODE] == 1 and fleet.cordon_calls[NODE] == 1


def test_kernel_log_stops_growing_after_the_drain(sim: Sim, clock: Any) -> None:
    _, _, cluster = sim("ecc-dbe-storm.yaml")
    cluster.drain(NODE, grace=GRACE)
    before = cluster.node_logs(NODE)
    clock.advance(minutes=10)
    assert cluster.node_logs(NODE) == before


def test_row_remap_failure_outlasts_the_drain(sim: Sim, clock: Any) -> None:
    faults = [{"kind": "row_remap_failure", "node": NODE, "gpu": 1, "start": "-5m"}]
    _, telemetry, cluster = sim(faults=faults)
    cluster.drain(NODE, grace=GRACE)
    clock.advance(minutes=30)
    assert value(telemetry, "gpu.row_remap.failure", gpu="1") == 1.0


def test_a_bad_cable_outlasts_a_drain_until_repaired(sim: Sim, clock: Any) -> None:
    fleet, telemetry, cluster = sim("ib-symbol-errors.yaml")
    query = SignalQuery(
        signal="fabric.ib.symbol_error_rate", nodes=("gpu-node-11",), window=timedelta(minutes=5)
    )

    def worst() -> float:
        return max(s.value for s in telemetry.read(query).samples)

    cluster.drain("gpu-node-11", grace=GRACE)
    clock.advance(minutes=10)
    assert worst() > 1.0
    assert fleet.repair("gpu-node-11") == 1
    clock.advance(minutes=10)
    assert worst() == 0.0


def test_unschedulable_metric_follows_cordon(sim: Sim, clock: Any) -> None:
    fleet, _, cluster = sim()
    metric = "kube_node_spec_unschedulable"
    assert fleet.value(metric, NODE, entity=("node",), at=fleet.now()) == 0.0
    cluster.cordon(NODE)
    clock.advance(minutes=1)
    assert fleet.value(metric, NODE, entity=("node",), at=fleet.now()) == 1.0
    assert fleet.value(metric, NODE, entity=("node",), at=fleet.t0 - timedelta(minutes=1)) == 0.0


def test_unknown_node_lists_known_nodes(sim: Sim) -> None:
    _, _, cluster = sim()
    calls: list[Callable[[], object]] = [
        lambda: cluster.nodes(["gpu-node-99"]),
        lambda: cluster.cordon("gpu-node-99"),
        lambda: cluster.drain("gpu-node-99", grace=GRACE),
        lambda: cluster.node_logs("gpu-node-99"),
        lambda: cluster.pods_on("gpu-node-99"),
    ]
    for call in calls:
        with pytest.raises(NodeNotFound, match=r"'gpu-node-99' not found \(nodes: gpu-node-00"):
            call()


def test_unknown_pod_is_not_found(sim: Sim) -> None:
    _, _, cluster = sim()
    with pytest.raises(PodNotFound, match="ml/nope"):
        cluster.pod_logs("nope", "ml")


def test_pods_per_node(sim: Sim) -> None:
    _, _, cluster = sim("ecc-dbe-storm.yaml")
    pods = {p.name: p for p in cluster.pods_on("gpu-node-12")}
    worker = pods["vllm-chat-worker-0"]
    assert (worker.namespace, worker.workload, worker.gpus, worker.phase) == (
        "ml",
        "vllm-chat",
        8,
        "Running",
    )
    assert [p.namespace for p in pods.values() if p.workload == "nvidia-dcgm-exporter"] == [
        "gpu-operator"
    ]
    assert [p.workload for p in cluster.pods_on("gpu-node-10")] == ["nvidia-dcgm-exporter"]


def test_pod_logs_show_the_workload_and_the_cuda_error(sim: Sim) -> None:
    _, _, cluster = sim("ecc-dbe-storm.yaml")
    log = cluster.pod_logs("llm-pretrain-worker-3", "ml")
    assert "RuntimeError: CUDA error: uncorrectable ECC error encountered" in log
    assert "step_time" in log
    assert "CUDA error" not in cluster.pod_logs("llm-pretrain-worker-4", "ml")
    assert "Engine 000" in cluster.pod_logs("vllm-chat-worker-0", "ml", tail_lines=1)


def test_node_info_of_a_healthy_node(sim: Sim) -> None:
    _, _, cluster = sim()
    info = cluster.nodes(["gpu-node-10"])[0]
    assert info.ready and not info.unschedulable and info.taints == ()
    assert info.conditions == {
        "Ready": "True",
        "MemoryPressure": "False",
        "DiskPressure": "False",
        "PIDPressure": "False",
    }
    assert (info.gpu_capacity, info.gpu_allocatable) == (8, 8)
    assert info.labels["gpu-oncall.io/rack"] == "rack-01"
    assert len(cluster.nodes()) == 16


def test_a_restored_fleet_continues_where_the_first_stopped(sim: Sim, clock: Any) -> None:
    fleet, telemetry, cluster = sim("ecc-dbe-storm.yaml")
    clock.advance(minutes=1)
    cluster.cordon(NODE)
    cluster.drain(NODE, grace=GRACE)
    fleet.inject(FaultSpec(kind="ib_symbol_errors", node="gpu-node-09", hca=2))
    clock.advance(minutes=6)
    saved = json.loads(json.dumps(fleet.export_state()))

    again = Fleet.from_scenario(fleet.scenario, now=clock, t0=fleet.t0)
    again.restore_state(saved)
    other = SimCluster(again)
    assert other.nodes() == cluster.nodes()
    assert other.pods_on(NODE) == cluster.pods_on(NODE)
    assert other.events(NODE, since=fleet.t0) == cluster.events(NODE, since=fleet.t0)
    assert (again.cordon_calls, again.drain_calls) == (fleet.cordon_calls, fleet.drain_calls)
    for metric in ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "node_infiniband_symbol_error_total"):
        assert again.series(metric, clock()) == fleet.series(metric, clock())
    assert other.drain(NODE, grace=GRACE).outcome is Outcome.ALREADY_DONE
    with pytest.raises(ScenarioError, match="freshly built"):
        again.restore_state(saved)
