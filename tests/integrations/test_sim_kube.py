"""kube-state-metrics pod series, Prometheus' `up`, and node topology labels.

Covers: `gang_partial_placement` shows the `missing` pods Pending (node empty) in
`k8s.pod.pending` and the placed ranks waiting at init (progress 0, `last completed NCCL work:
-1`, the dump-signal line, GPUs idle); `pod_oom_killed` shows in
`kube_pod_container_status_last_terminated_reason{reason="OOMKilled"}` and a restart, from the
fault's start only; a drain evicts pods (Pending afterwards) and their job series vanish;
exporter_down sets `up{job="dcgm-exporter"}` to 0 on its node only, node_not_ready both
exporters' `up` and its job series; every node carries rack and leaf labels on
`kube_node_labels` and NodeInfo, readable for the whole fleet in one query.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from simulator import Fleet, SimCluster, SimTelemetry
from simulator.scenarios import parse_scenario
from integrations.telemetry import SignalQuery, SignalResult

Sim = Callable[..., tuple[Fleet, SimTelemetry, SimCluster]]
JOB = "llm-pretrain"


def read(telemetry: SimTelemetry, signal: str, **kwargs: Any) -> SignalResult:
    return telemetry.read(SignalQuery(signal=signal, **kwargs))


def test_a_partly_placed_gang_leaves_pods_pending_and_ranks_waiting(sim: Sim) -> None:
    fault = {"kind": "gang_partial_placement", "workload": JOB, "missing": 2}
    _, telemetry, cluster = sim(faults=[fault])
    pending = read(telemetry, "k8s.pod.pending", workload=JOB)
    assert {s.labels["pod"]: s.value for s in pending.samples if s.value} == {
        f"{JOB}-worker-6": 1.0,
        f"{JOB}-worker-7": 1.0,
    }
    assert {s.node for s in pending.samples if s.value} == {""}  # unscheduled
    assert len(pending.samples) == 8
    assert all(s.labels["label_app_kubernetes_io_name"] == JOB for s in pending.samples)
    window = timedelta(minutes=5)
    progress = read(telemetry, "job.progress", workload=JOB, window=window)
    assert {s.node for s in progress.samples} == {f"gpu-node-0{i}" for i in range(6)}
    assert {s.value for s in progress.samples} == {0.0}
    completed = read(telemetry, "job.nccl_last_completed", workload=JOB)
    assert {s.value for s in completed.samples} == {-1.0}
    util = read(telemetry, "gpu.util", nodes=("gpu-node-00", "gpu-node-07"), window=window)
    assert {s.value for s in util.samples} == {0.0}  # waiting at init; the rest never ran
    log = cluster.pod_logs(f"{JOB}-worker-0", "ml")
    assert "last completed NCCL work: -1." in log
    assert "Last enqueued NCCL work: -1, last completed NCCL work: -1." in log


def test_an_oom_kill_shows_in_kube_state_metrics_from_its_start(sim: Sim, clock: Any) -> None:
    fault = {"kind": "pod_oom_killed", "workload": JOB, "node": "gpu-node-02", "start": "+5m"}
    _, telemetry, _ = sim(faults=[fault])
    assert read(telemetry, "k8s.pod.oom_killed", workload=JOB).samples == ()
    clock.advance(minutes=10)
    oom = read(telemetry, "k8s.pod.oom_killed", workload=JOB)
    assert [(s.node, s.labels["pod"], s.labels["container"]) for s in oom.samples] == [
        ("gpu-node-02", f"{JOB}-worker-2", "trainer")
    ]
    restarts = read(telemetry, "k8s.pod.restarts_increase", nodes=("gpu-node-02",))
    by_pod = {s.labels["pod"]: s.value for s in restarts.samples}
    assert by_pod[f"{JOB}-worker-2"] == 1.0
    assert sum(by_pod.values()) == 1.0  # the exporter pod did not restart


def test_a_drain_leaves_the_pod_pending_and_its_job_series_gone(sim: Sim, clock: Any) -> None:
    fleet, telemetry, _ = sim()
    fleet.drain("gpu-node-04", grace=timedelta(seconds=30))
    clock.advance(minutes=5)
    pending = read(telemetry, "k8s.pod.pending", workload=JOB)
    assert [s.labels["pod"] for s in pending.samples if s.value] == [f"{JOB}-worker-4"]
    steps = read(telemetry, "job.step_time", workload=JOB, window=timedelta(minutes=2))
    assert "gpu-node-04" not in {s.node for s in steps.samples}
    assert len(steps.samples) == 7


def test_up_reports_exporter_and_node_outages(sim: Sim) -> None:
    faults = [
        {"kind": "exporter_down", "node": "gpu-node-09"},
        {"kind": "node_not_ready", "node": "gpu-node-05"},
    ]
    fleet, telemetry, _ = sim(faults=faults)
    dcgm = {s.node: s.value for s in read(telemetry, "telemetry.dcgm_up").samples}
    node = {s.node: s.value for s in read(telemetry, "telemetry.node_exporter_up").samples}
    assert [n for n, v in dcgm.items() if v == 0.0] == ["gpu-node-05", "gpu-node-09"]
    assert [n for n, v in node.items() if v == 0.0] == ["gpu-node-05"]
    assert len(dcgm) == len(node) == len(fleet.node_names)  # up itself is never absent
    steps = read(telemetry, "job.step_time", workload=JOB, window=timedelta(minutes=5))
    assert "gpu-node-05" not in {s.node for s in steps.samples}
    labels = next(
        s.labels for s in fleet.series("up", fleet.now()) if s.labels["node"] == "gpu-node-09"
    )
    assert labels["job"] in ("dcgm-exporter", "node-exporter") and "instance" in labels


def test_topology_labels_in_one_query_and_on_node_info(sim: Sim) -> None:
    fleet, telemetry, cluster = sim(nodes=20)
    result = read(telemetry, "k8s.node.topology")
    assert result.queries == 1 and len(result.samples) == 20
    topology = {
        s.node: (s.labels["label_gpu_oncall_io_rack"], s.labels["label_gpu_oncall_io_leaf_switch"])
        for s in result.samples
    }
    assert topology["gpu-node-17"] == ("rack-02", "leaf-02")
    info = cluster.nodes(["gpu-node-17"])[0]
    assert info.labels["gpu-oncall.io/rack"] == "rack-02"
    assert info.labels["gpu-oncall.io/leaf-switch"] == "leaf-02"


def test_a_leaf_can_span_racks(raw_scenario: Callable[..., dict[str, Any]], clock: Any) -> None:
    raw = raw_scenario(nodes=32)
    raw["fleet"]["nodes_per_leaf"] = 16
    fleet = Fleet(parse_scenario(raw), clock)
    assert (fleet.nodes["gpu-node-12"].rack, fleet.nodes["gpu-node-12"].leaf_switch) == (
        "rack-01",
        "leaf-00",
    )
