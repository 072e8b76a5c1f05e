"""Fault kinds: what each one changes in the series, the kernel log, pods, events and nodes.

Covers: ecc_dbe_storm, ecc_sbe_storm, row_remap_failure, xid, ib_symbol_errors and
node_not_ready in detail (verbatim `NVRM: Xid (PCI:...)` lines with the GPU's PCI id, XID
gauge, allocatable GPUs, Ready condition, absent exporter series, NodeNotReady event), the
extra kinds briefly, that every registered kind changes something observable, that faults
starting in the future do nothing yet, intensity, and injecting a fault at run time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from simulator import Fleet, SimCluster, SimTelemetry
from simulator.faults import FAULT_KINDS
from simulator.scenarios import FaultSpec
from integrations.telemetry import SignalQuery

Sim = Callable[..., tuple[Fleet, SimTelemetry, SimCluster]]
#: kern.log as rsyslog writes it: RFC 3339 stamp, host, `kernel:`, the dmesg stamp, the text.
XID_LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00 gpu-node-\d+ kernel: "
    r"\[ *\d+\.\d{6}\] NVRM: Xid \(PCI:(?P<pci>[0-9a-f]{4}:[0-9a-f]{2}:00)\): "
    r"(?P<code>\d+), "
)


def xid_lines(log: str) -> list[re.Match[str]]:
    return [m for m in map(XID_LINE.match, log.splitlines()) if m]


def read_values(telemetry: SimTelemetry, signal: str, node: str) -> dict[str, float]:
    result = telemetry.read(SignalQuery(signal=signal, nodes=(node,)))
    return {s.labels.get("gpu", s.labels.get("device", "")): s.value for s in result.samples}


#: A training job on gpu-node-00..07 and an inference service on gpu-node-12..13.
BOTH_WORKLOADS = [
    {"kind": "training", "name": "llm-pretrain", "nodes": "gpu-node-[00-07]"},
    {"kind": "inference", "name": "vllm-chat", "nodes": "gpu-node-[12-13]"},
]


def spec_for(kind: str) -> dict[str, Any]:
    """A valid fault of `kind` on gpu-node-03 (GPU 2 / HCA 1), the training workload, or the
    inference service (BOTH_WORKLOADS) for service faults."""
    target = FAULT_KINDS[kind].target
    spec: dict[str, Any] = {"kind": kind, "start": "-10m"}
    if target == "workload":
        inference = FAULT_KINDS[kind].workload_kind == "inference"
        spec["workload"] = "vllm-chat" if inference else "llm-pretrain"
    else:
        spec["node"] = "gpu-node-03"
    spec |= {"gpu": {"gpu": 2}, "hca": {"hca": 1}}.get(target, {})
    needs = FAULT_KINDS[kind].needs
    spec |= {
        k: v for k, v in {"code": 79, "version": "535.161.08", "missing": 2}.items() if k in needs
    }
    return spec


def observe(fleet: Fleet, cluster: SimCluster) -> dict[str, Any]:
    """Everything a diagnosis could look at, for comparing a faulty fleet to a healthy one."""
    now = fleet.now()
    nodes = fleet.node_names
    return {
        "series": {
            m: [(s.labels, s.value) for s in fleet.series(m, now)] for m in fleet.metric_names()
        },
        "logs": {n: cluster.node_logs(n) for n in nodes},
        "pods": sorted(map(repr, (p.info() for p in fleet.pods.values()))),
        "events": [cluster.events(n, since=fleet.t0 - timedelta(hours=1)) for n in nodes],
        "nodes": cluster.nodes(),
    }


def test_dbe_storm_writes_verbatim_xid_48_lines(sim: Sim) -> None:
    fleet, _, cluster = sim("ecc-dbe-storm.yaml")
    log = cluster.node_logs("gpu-node-03")
    gpu = fleet.nodes["gpu-node-03"].gpus[5]
    found = xid_lines(log)
    assert len(found) == 60  # 6 per minute for 10 minutes
    assert {(m["pci"], m["code"]) for m in found} == {(gpu.kernel_pci, "48")}
    assert (
        "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer" in log
    )
    assert f"NVRM: GPU at PCI:{gpu.kernel_pci}: {gpu.uuid}" in log
    assert xid_lines(cluster.node_logs("gpu-node-04")) == []


def test_dbe_storm_marks_the_gpu_unhealthy_for_the_device_plugin(sim: Sim) -> None:
    _, telemetry, cluster = sim("ecc-dbe-storm.yaml")
    info = cluster.nodes(["gpu-node-03"])[0]
    assert (info.gpu_capacity, info.gpu_allocatable) == (8, 7)
    assert read_values(telemetry, "k8s.node.gpu_allocatable", "gpu-node-03") == {"": 7.0}


def test_sbe_storm_climbs_fast_with_xid_92(sim: Sim) -> None:
    _, telemetry, cluster = sim("ecc-sbe-storm.yaml")
    sbe = read_values(telemetry, "gpu.ecc.sbe_rate", "gpu-node-06")
    assert sbe["2"] > 10.0 and sbe["1"] == 0.0
    assert read_values(telemetry, "gpu.ecc.dbe_rate", "gpu-node-06")["2"] == 0.0
    assert read_values(telemetry, "gpu.xid.last", "gpu-node-06")["2"] == 92.0
    log = cluster.node_logs("gpu-node-06")
    assert {m["code"] for m in xid_lines(log)} == {"92"}
    assert "High single-bit ECC error rate" in log


def test_row_remap_failure_sets_the_flag_and_xid_64(sim: Sim) -> None:
    _, telemetry, cluster = sim("row-remap-failure.yaml")
    assert read_values(telemetry, "gpu.row_remap.failure", "gpu-node-09")["1"] == 1.0
    assert read_values(telemetry, "gpu.row_remap.failure", "gpu-node-09")["0"] == 0.0
    assert read_values(telemetry, "gpu.xid.last", "gpu-node-09")["1"] == 64.0
    rows = read_values(telemetry, "gpu.row_remap.uncorrectable_increase", "gpu-node-09")
    assert rows["1"] == 8.0
    assert [m["code"] for m in xid_lines(cluster.node_logs("gpu-node-09"))] == ["48", "64"]


def test_xid_79_line_is_verbatim(sim: Sim) -> None:
    fleet, telemetry, cluster = sim("xid-79-fallen-off-bus.yaml")
    pci = fleet.nodes["gpu-node-02"].gpus[4].kernel_pci
    log = cluster.node_logs("gpu-node-02")
    assert f"NVRM: Xid (PCI:{pci}): 79, GPU has fallen off the bus." in log.splitlines()[-2]
    assert log.splitlines()[-1].endswith(f"NVRM: GPU {pci}.0: GPU has fallen off the bus.")
    result = telemetry.read(SignalQuery(signal="gpu.xid.last", nodes=("gpu-node-02",)))
    sample = next(s for s in result.samples if s.labels["gpu"] == "4")
    assert (sample.value, sample.labels["err_code"]) == (79.0, "79")


@pytest.mark.parametrize("code", [13, 31, 43, 45, 48, 63, 64, 74, 79, 92, 94, 95, 119])
def test_xid_code_shows_in_gauge_label_and_kernel_line(sim: Sim, code: int) -> None:
    fleet, _, cluster = sim(faults=[{"kind": "xid", "code": code, "node": "gpu-node-01", "gpu": 3}])
    series = [
        s
        for s in fleet.series("DCGM_FI_DEV_XID_ERRORS", fleet.now())
        if s.labels["Hostname"] == "gpu-node-01" and s.labels["gpu"] == "3"
    ]
    assert [(s.value, s.labels["err_code"]) for s in series] == [(float(code), str(code))]
    assert series[0].labels["err_msg"] not in ("", "No Error")
    assert [m["code"] for m in xid_lines(cluster.node_logs("gpu-node-01"))] == [str(code)]
    application = code in (13, 31, 43, 45)
    assert cluster.nodes(["gpu-node-01"])[0].gpu_allocatable == (8 if application else 7)


def test_ib_symbol_errors_climb_on_one_port(sim: Sim) -> None:
    _, telemetry, _ = sim("ib-symbol-errors.yaml")
    rates = read_values(telemetry, "fabric.ib.symbol_error_rate", "gpu-node-11")
    assert rates.pop("mlx5_3") > 1.0 and set(rates.values()) == {0.0}
    assert read_values(telemetry, "fabric.ib.port_state", "gpu-node-11")["mlx5_3"] == 4.0
    assert read_values(telemetry, "gpu.ecc.dbe_rate", "gpu-node-11") == {}  # counters off


def test_node_not_ready_hides_exporters_and_flips_ready(sim: Sim) -> None:
    fleet, telemetry, cluster = sim("node-not-ready.yaml")
    now = fleet.now()
    for metric in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS", "node_infiniband_state_id"):
        hosts = {
            s.labels.get("Hostname", s.labels.get("instance")) for s in fleet.series(metric, now)
        }
        assert "gpu-node-14" not in hosts and "gpu-node-13" in hosts
    conditions = {
        (s.labels["condition"], s.labels["status"]): s.value
        for s in fleet.series("kube_node_status_condition", now)
        if s.labels["node"] == "gpu-node-14"
    }
    assert conditions[("Ready", "true")] == 0.0 and conditions[("Ready", "false")] == 1.0
    info = cluster.nodes(["gpu-node-14"])[0]
    assert not info.ready and info.conditions["Ready"] in ("False", "Unknown")
    assert "node.kubernetes.io/not-ready:NoExecute" in info.taints
    assert read_values(telemetry, "k8s.node.ready", "gpu-node-14") == {"": 0.0}
    events = cluster.events("gpu-node-14", since=fleet.t0 - timedelta(hours=1))
    assert [(e.reason, e.message) for e in events] == [
        ("NodeNotReady", "Node gpu-node-14 status is now: NodeNotReady")
    ]
    assert cluster.node_logs("gpu-node-14") == ""


def test_gpu_fallen_off_bus_removes_that_gpu_only(sim: Sim) -> None:
    fleet, _, cluster = sim(faults=[spec_for("gpu_fallen_off_bus")])
    gpus = {
        s.labels["gpu"]
        for s in fleet.series("DCGM_FI_DEV_GPU_TEMP", fleet.now())
        if s.labels["Hostname"] == "gpu-node-03"
    }
    assert gpus == {"0", "1", "3", "4", "5", "6", "7"}
    assert "GPU has fallen off the bus." in cluster.node_logs("gpu-node-03")


def test_thermal_throttle_heats_and_slows_every_gpu_of_the_node(sim: Sim) -> None:
    _, telemetry, _ = sim(faults=[{"kind": "thermal_throttle", "node": "gpu-node-03"}])
    temps = read_values(telemetry, "gpu.temperature", "gpu-node-03")
    clocks = read_values(telemetry, "gpu.sm_clock", "gpu-node-03")
    assert min(temps.values()) >= 85.0 and max(clocks.values()) < 1500.0


def test_ib_port_down_and_flap(sim: Sim) -> None:
    _, telemetry, cluster = sim(
        faults=[spec_for("ib_port_down"), {**spec_for("ib_link_flap"), "node": "gpu-node-04"}]
    )
    assert read_values(telemetry, "fabric.ib.port_state", "gpu-node-03")["mlx5_1"] == 1.0
    flaps = read_values(telemetry, "fabric.ib.link_downed_increase", "gpu-node-04")
    assert flaps["mlx5_1"] >= 10 and flaps["mlx5_0"] == 0
    assert "Link down" in cluster.node_logs("gpu-node-04")


def test_exporter_down_leaves_the_node_ready(sim: Sim) -> None:
    _, telemetry, cluster = sim(faults=[spec_for("exporter_down")])
    assert telemetry.read(
        SignalQuery(signal="gpu.xid.last", nodes=("gpu-node-03",))
    ).missing_nodes == ("gpu-node-03",)
    assert cluster.nodes(["gpu-node-03"])[0].ready
    exporter = next(p for p in cluster.pods_on("gpu-node-03") if p.workload != "llm-pretrain")
    assert exporter.restarts > 0
    assert "Failed to watch metrics" in cluster.pod_logs(exporter.name, exporter.namespace)


def test_driver_version_skew_relabels_the_node(sim: Sim) -> None:
    fleet, _, cluster = sim(faults=[spec_for("driver_version_skew")])
    versions = {
        s.labels["Hostname"]: s.labels["DCGM_FI_DRIVER_VERSION"]
        for s in fleet.series("DCGM_FI_DEV_GPU_TEMP", fleet.now())
    }
    assert versions.pop("gpu-node-03") == "535.161.08"
    assert set(versions.values()) == {"550.54.15"}
    assert "Kernel Module  535.161.08" in cluster.node_logs("gpu-node-03")


def test_oom_kill_and_partial_gang_placement(sim: Sim) -> None:
    fleet, _, cluster = sim(faults=[spec_for("pod_oom_killed"), spec_for("gang_partial_placement")])
    worker = next(p for p in cluster.pods_on("gpu-node-00") if p.workload == "llm-pretrain")
    assert (worker.last_terminated_reason, worker.restarts) == ("OOMKilled", 1)
    assert "Memory cgroup out of memory: Killed process" in cluster.node_logs("gpu-node-00")
    pending = sorted(p.name for p in fleet.pods.values() if p.phase == "Pending")
    assert pending == ["llm-pretrain-worker-6", "llm-pretrain-worker-7"]


@pytest.mark.parametrize("kind", sorted(FAULT_KINDS))
def test_every_kind_changes_something_observable(sim: Sim, kind: str) -> None:
    healthy = observe(*sim(workloads=BOTH_WORKLOADS)[::2])
    faulty = observe(*sim(faults=[spec_for(kind)], workloads=BOTH_WORKLOADS)[::2])
    assert [k for k in healthy if healthy[k] != faulty[k]], f"{kind} changed nothing"


def test_a_fault_in_the_future_has_not_happened_yet(sim: Sim, clock: Any) -> None:
    fault = {"kind": "ecc_dbe_storm", "node": "gpu-node-03", "gpu": 5, "start": "+5m"}
    _, telemetry, cluster = sim(faults=[fault])
    assert read_values(telemetry, "gpu.ecc.dbe_rate", "gpu-node-03")["5"] == 0.0
    assert xid_lines(cluster.node_logs("gpu-node-03")) == []
    clock.advance(minutes=10)
    assert read_values(telemetry, "gpu.ecc.dbe_rate", "gpu-node-03")["5"] > 0.0


def test_intensity_scales_the_error_rate(sim: Sim) -> None:
    half = {"kind": "ecc_dbe_storm", "node": "gpu-node-03", "gpu": 5, "intensity": 0.5}
    _, full_t, _ = sim(faults=[{**half, "intensity": 1.0}])
    _, half_t, _ = sim(faults=[half])
    full = read_values(full_t, "gpu.ecc.dbe_rate", "gpu-node-03")["5"]
    assert read_values(half_t, "gpu.ecc.dbe_rate", "gpu-node-03")["5"] == pytest.approx(full / 2)


def test_inject_starts_a_fault_relative_to_now(sim: Sim, clock: Any) -> None:
    fleet, telemetry, _ = sim()
    clock.advance(hours=1)
    fleet.inject(FaultSpec(kind="ecc_dbe_storm", node="gpu-node-07", gpu=0, start=timedelta(0)))
    assert read_values(telemetry, "gpu.ecc.dbe_rate", "gpu-node-07")["0"] == 0.0
    clock.advance(minutes=5)
    assert read_values(telemetry, "gpu.ecc.dbe_rate", "gpu-node-07")["0"] > 0.0
