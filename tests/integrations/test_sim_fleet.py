"""The Fleet itself: topology, exporter label names, counters over time, determinism.

Covers: racks and node indexes; GPU UUID / PCI id formats; dcgm-exporter, node_exporter and
kube-state-metrics series carry the real label names and values; the XID gauge's err_code /
err_msg labels; `dcgm_host_label: hostname`; every counter is monotonic in time (with faults
and a drain); the same scenario builds the same fleet and another name gives other UUIDs;
naive datetimes are refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from simulator import Fleet
from simulator.metrics import METRICS
from simulator.scenarios import parse_scenario

FleetFactory = Callable[..., Fleet]
UUID = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
PCI = re.compile(r"^00000000:[0-9A-F]{2}:00\.0$")


def test_nodes_racks_and_gpus(make_fleet: FleetFactory) -> None:
    fleet = make_fleet(nodes=20)
    node = fleet.nodes["gpu-node-17"]
    assert (node.index, node.rack, node.leaf_switch) == (17, "rack-02", "leaf-02")
    assert [g.index for g in node.gpus] == list(range(8))
    assert [h.device for h in node.hcas] == [f"mlx5_{i}" for i in range(8)]
    assert all(UUID.match(g.uuid) and PCI.match(g.pci_bus_id) for g in node.gpus)
    assert len({g.pci_bus_id for g in node.gpus}) == 8
    assert len({g.uuid for n in fleet.nodes.values() for g in n.gpus}) == 20 * 8


def test_dcgm_series_carry_dcgm_exporter_labels(make_fleet: FleetFactory) -> None:
    fleet = make_fleet()
    series = [
        s
        for s in fleet.series("DCGM_FI_DEV_GPU_TEMP", fleet.now())
        if s.labels["Hostname"] == "gpu-node-02" and s.labels["gpu"] == "6"
    ]
    gpu = fleet.nodes["gpu-node-02"].gpus[6]
    assert [s.labels for s in series] == [
        {
            "gpu": "6",
            "UUID": gpu.uuid,
            "pci_bus_id": gpu.pci_bus_id,
            "device": "nvidia6",
            "modelName": "NVIDIA H100 80GB HBM3",
            "Hostname": "gpu-node-02",
            "DCGM_FI_DRIVER_VERSION": "550.54.15",
        }
    ]


def test_xid_gauge_has_err_code_and_err_msg(make_fleet: FleetFactory) -> None:
    fleet = make_fleet()
    labels = fleet.series("DCGM_FI_DEV_XID_ERRORS", fleet.now())[0].labels
    assert (labels["err_code"], labels["err_msg"]) == ("0", "No Error")


def test_infiniband_and_kube_state_metrics_labels(make_fleet: FleetFactory) -> None:
    fleet = make_fleet()
    ib = fleet.series("node_infiniband_rate_bytes_per_second", fleet.now())[0]
    assert ib.labels == {"device": "mlx5_0", "port": "1", "instance": "gpu-node-00"}
    assert ib.value == 5e10
    gpus = [
        s
        for s in fleet.series("kube_node_status_allocatable", fleet.now())
        if s.labels["resource"] == "nvidia_com_gpu"
    ]
    assert gpus[0].labels == {
        "node": "gpu-node-00",
        "resource": "nvidia_com_gpu",
        "unit": "integer",
    }
    assert len(gpus) == 16 and {s.value for s in gpus} == {8.0}
    ready = [
        s
        for s in fleet.series("kube_node_status_condition", fleet.now())
        if s.labels["node"] == "gpu-node-00" and s.labels["condition"] == "Ready"
    ]
    assert {s.labels["status"]: s.value for s in ready} == {
        "true": 1.0,
        "false": 0.0,
        "unknown": 0.0,
    }


def test_lowercase_hostname_label(raw_scenario: Callable[..., dict[str, Any]], clock: Any) -> None:
    raw = raw_scenario()
    raw["fleet"]["dcgm_host_label"] = "hostname"
    fleet = Fleet(parse_scenario(raw), clock)
    labels = fleet.series("DCGM_FI_DEV_SM_CLOCK", fleet.now())[0].labels
    assert labels["hostname"] == "gpu-node-00" and "Hostname" not in labels


def test_metric_names_cover_every_family(make_fleet: FleetFactory) -> None:
    names = make_fleet(counters="all").metric_names()
    assert names == list(METRICS)
    assert {
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "node_infiniband_symbol_error_total",
        "kube_node_status_condition",
    } <= set(names)


def test_counters_never_decrease(make_fleet: FleetFactory, clock: Any) -> None:
    faults = [
        {"kind": "ecc_dbe_storm", "node": "gpu-node-03", "gpu": 5, "start": "-3m"},
        {"kind": "ecc_sbe_storm", "node": "gpu-node-04", "gpu": 1, "start": "+2m"},
        {"kind": "ib_link_flap", "node": "gpu-node-05", "hca": 2, "start": "-1m"},
        {"kind": "row_remap_failure", "node": "gpu-node-06", "gpu": 0, "start": "+1m"},
    ]
    fleet = make_fleet(faults=faults)
    counters = [m.name for m in METRICS.values() if m.kind == "counter"]
    seen: dict[tuple[str, str], float] = {}
    for step in range(12):
        if step == 6:
            fleet.drain("gpu-node-03", grace=timedelta(seconds=30))
        for metric in counters:
            for s in fleet.series(metric, fleet.now()):
                key = (metric, repr(sorted(s.labels.items())))
                assert s.value >= seen.get(key, s.value), key
                seen[key] = s.value
        clock.advance(seconds=40)


def test_same_scenario_same_fleet(make_fleet: FleetFactory) -> None:
    faults = [{"kind": "ecc_dbe_storm", "node": "gpu-node-03", "gpu": 5}]
    one, two = make_fleet(faults=faults), make_fleet(faults=faults)
    for metric in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"):
        assert one.series(metric, one.now()) == two.series(metric, two.now())
    assert one.kernel_log("gpu-node-03", one.now()) == two.kernel_log("gpu-node-03", two.now())


def test_another_scenario_name_gives_other_uuids(make_fleet: FleetFactory) -> None:
    one, two = make_fleet(name="alpha"), make_fleet(name="beta")
    assert one.nodes["gpu-node-00"].gpus[0].uuid != two.nodes["gpu-node-00"].gpus[0].uuid


def test_naive_datetimes_are_refused(make_fleet: FleetFactory) -> None:
    fleet = make_fleet()
    with pytest.raises(ValueError, match="timezone-aware"):
        fleet.series("DCGM_FI_DEV_GPU_TEMP", datetime(2026, 1, 1))  # noqa: DTZ001 (the point)
