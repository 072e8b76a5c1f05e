"""SimTelemetry reads named signals from the simulated fleet like PromQL would.

Covers: the DBE storm shows a DBE rate on exactly GPU 5 of gpu-node-03 and 0 elsewhere; the
XID gauge carries `err_code`, and `changes` sees a new XID once; with dcgm-exporter's default
counters the ECC series are absent on every node (missing, never 0.0) while row remapping and
the XID gauge remain; unknown nodes and a host-label mismatch are missing; label matchers
select one Ready series per node; workload queries use the workload's nodes; an empty query is
a fleet sweep; one backend query per read for 16 and 4,096 nodes; a 4,096-node read is correct.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from integrations.errors import UnknownSignal
from integrations.signals import SignalCatalog
from simulator import Fleet, SimCluster, SimTelemetry
from simulator.scenarios import parse_scenario
from integrations.telemetry import SignalQuery, SignalResult

Sim = Callable[..., tuple[Fleet, SimTelemetry, SimCluster]]
T0 = datetime(2026, 1, 1, tzinfo=UTC)
DBE_STORM = [{"kind": "ecc_dbe_storm", "node": "gpu-node-03", "gpu": 5, "start": "-10m"}]


def read(telemetry: SimTelemetry, signal: str, *nodes: str, **kwargs: Any) -> SignalResult:
    return telemetry.read(SignalQuery(signal=signal, nodes=tuple(nodes), **kwargs))


def by_gpu(result: SignalResult) -> dict[tuple[str, str], float]:
    return {(s.node, s.labels["gpu"]): s.value for s in result.samples}


def test_dbe_storm_rate_is_on_exactly_one_gpu(sim: Sim) -> None:
    fleet, telemetry, _ = sim("ecc-dbe-storm.yaml")
    result = read(telemetry, "gpu.ecc.dbe_rate", *fleet.node_names)
    values = by_gpu(result)
    assert len(values) == 16 * 8
    assert values.pop(("gpu-node-03", "5")) > 0.0
    assert set(values.values()) == {0.0}
    assert result.missing_nodes == ()


def test_dbe_rate_is_errors_per_minute_over_the_window(sim: Sim) -> None:
    _, telemetry, _ = sim(faults=DBE_STORM)
    result = read(telemetry, "gpu.ecc.dbe_rate", "gpu-node-03", window=timedelta(minutes=5))
    # 6 DBE/min at intensity 1, the whole 5-minute window inside the storm.
    assert by_gpu(result)[("gpu-node-03", "5")] == pytest.approx(6.0)


def test_dbe_sample_is_identified_by_gpu_and_uuid(sim: Sim) -> None:
    fleet, telemetry, _ = sim(faults=DBE_STORM)
    sample = max(read(telemetry, "gpu.ecc.dbe_rate", "gpu-node-03").samples, key=lambda s: s.value)
    assert sample.labels == {"gpu": "5", "UUID": fleet.nodes["gpu-node-03"].gpus[5].uuid}


def test_xid_gauge_carries_the_code_and_changes_once(sim: Sim, clock: Any) -> None:
    _, telemetry, _ = sim(faults=DBE_STORM)
    last = max(read(telemetry, "gpu.xid.last", "gpu-node-03").samples, key=lambda s: s.value)
    assert (last.value, last.labels["err_code"], last.labels["gpu"]) == (48.0, "48", "5")
    assert by_gpu(read(telemetry, "gpu.xid.changes", "gpu-node-03"))[("gpu-node-03", "5")] == 1.0
    clock.advance(minutes=20)
    assert by_gpu(read(telemetry, "gpu.xid.changes", "gpu-node-03"))[("gpu-node-03", "5")] == 0.0


def test_remapped_rows_and_pending_flag_during_a_dbe_storm(sim: Sim) -> None:
    _, telemetry, _ = sim(faults=DBE_STORM)
    rows = by_gpu(read(telemetry, "gpu.row_remap.uncorrectable_increase", "gpu-node-03"))
    pending = by_gpu(read(telemetry, "gpu.row_remap.pending", "gpu-node-03"))
    assert rows[("gpu-node-03", "5")] > 0 and pending[("gpu-node-03", "5")] == 1.0
    assert rows[("gpu-node-03", "4")] == 0.0 and pending[("gpu-node-03", "4")] == 0.0


def test_default_counters_make_ecc_absent_not_zero(sim: Sim) -> None:
    fleet, telemetry, _ = sim("ecc-dbe-default-counters.yaml")
    for signal in ("gpu.ecc.dbe_rate", "gpu.ecc.sbe_rate", "gpu.row_remap.pending"):
        result = read(telemetry, signal, *fleet.node_names)
        assert result.samples == ()
        assert set(result.missing_nodes) == set(fleet.node_names)
    rows = read(telemetry, "gpu.row_remap.uncorrectable_increase", *fleet.node_names)
    assert by_gpu(rows)[("gpu-node-03", "5")] > 0 and rows.missing_nodes == ()
    xid = read(telemetry, "gpu.xid.last", *fleet.node_names)
    assert by_gpu(xid)[("gpu-node-03", "5")] == 48.0 and xid.missing_nodes == ()
    failure = read(telemetry, "gpu.row_remap.failure", *fleet.node_names)
    assert failure.missing_nodes == ()


def test_default_counters_leave_ecc_out_of_the_exporter(make_fleet: Callable[..., Fleet]) -> None:
    fleet = make_fleet(counters="default")
    names = fleet.metric_names()
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" not in names
    assert "DCGM_FI_DEV_XID_ERRORS" in names and "DCGM_FI_DEV_ROW_REMAP_FAILURE" in names
    assert fleet.series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", fleet.now()) == []


def test_absence_is_never_zero(sim: Sim) -> None:
    _, telemetry, _ = sim("node-not-ready.yaml")
    result = read(telemetry, "gpu.xid.last", "gpu-node-14", "gpu-node-13", "gpu-node-77")
    assert result.missing_nodes == ("gpu-node-14", "gpu-node-77")
    assert {s.node for s in result.samples} == {"gpu-node-13"}


def test_a_host_label_the_exporter_does_not_use_finds_nothing(
    make_fleet: Callable[..., Fleet], catalog: SignalCatalog
) -> None:
    fleet = make_fleet()
    telemetry = SimTelemetry(fleet, catalog, host_labels={"dcgm": "hostname"})
    result = read(telemetry, "gpu.temperature", "gpu-node-01")
    assert result.samples == () and result.missing_nodes == ("gpu-node-01",)


def test_matchers_select_one_ready_series_per_node(sim: Sim) -> None:
    fleet, telemetry, _ = sim()
    result = read(telemetry, "k8s.node.ready", *fleet.node_names)
    assert [s.value for s in result.samples] == [1.0] * 16
    assert all(s.labels == {} for s in result.samples)


def test_workload_query_reads_the_workload_nodes(sim: Sim) -> None:
    _, telemetry, _ = sim("ecc-dbe-storm.yaml")
    result = telemetry.read(SignalQuery(signal="gpu.temperature", workload="vllm-chat"))
    assert {s.node for s in result.samples} == {"gpu-node-12", "gpu-node-13"}


def test_empty_query_sweeps_the_fleet(sim: Sim) -> None:
    fleet, telemetry, _ = sim()
    result = telemetry.read(SignalQuery(signal="fabric.ib.port_state"))
    assert len(result.samples) == 16 * 8 and {s.value for s in result.samples} == {4.0}


def test_healthy_baseline(sim: Sim) -> None:
    fleet, telemetry, _ = sim("healthy-node.yaml")
    nodes = fleet.node_names
    temps = [s.value for s in read(telemetry, "gpu.temperature", *nodes).samples]
    assert min(temps) >= 45.0 and max(temps) <= 65.0
    for signal in (
        "gpu.ecc.dbe_rate",
        "gpu.ecc.sbe_rate",
        "gpu.xid.last",
        "gpu.xid.changes",
        "fabric.ib.symbol_error_rate",
        "fabric.ib.link_downed_increase",
        "gpu.row_remap.failure",
    ):
        result = read(telemetry, signal, *nodes)
        assert result.missing_nodes == () and {s.value for s in result.samples} == {0.0}, signal


def test_unknown_signal_is_refused(sim: Sim) -> None:
    _, telemetry, _ = sim()
    with pytest.raises(UnknownSignal):
        read(telemetry, "gpu.ecc.dbee_rate", "gpu-node-01")


@pytest.fixture(scope="module")
def big_fleet() -> Fleet:
    """4,096 nodes (gpu-node-0000 ..), a DBE storm on GPU 7 of gpu-node-2049."""
    raw = {
        "apiVersion": "gpu-oncall/v1",
        "kind": "Scenario",
        "metadata": {"name": "big"},
        "fleet": {
            "nodes": 4096,
            "dcgm_counters": "all",
            "workloads": [
                {"kind": "training", "name": "llm-pretrain", "nodes": "gpu-node-[0000-1023]"}
            ],
        },
        "faults": [{"kind": "ecc_dbe_storm", "node": "gpu-node-2049", "gpu": 7}],
        "trigger": {"command": "diagnose gpu-node-2049"},
    }
    return Fleet(parse_scenario(raw), lambda: T0)


@pytest.mark.parametrize("signal", ["gpu.xid.last", "fabric.ib.port_state", "k8s.node.ready"])
def test_one_query_per_read_whatever_the_fleet_size(
    make_fleet: Callable[..., Fleet], big_fleet: Fleet, catalog: SignalCatalog, signal: str
) -> None:
    for fleet in (make_fleet(nodes=16), big_fleet):
        telemetry = SimTelemetry(fleet, catalog)
        result = read(telemetry, signal, *fleet.node_names)
        assert (result.queries, telemetry.queries) == (1, 1)
        assert {s.node for s in result.samples} == set(fleet.node_names)


def test_a_4096_node_fleet_answers_for_every_node(big_fleet: Fleet, catalog: SignalCatalog) -> None:
    telemetry = SimTelemetry(big_fleet, catalog)
    nodes = tuple(big_fleet.node_names)
    result = telemetry.read(SignalQuery(signal="gpu.ecc.dbe_rate", nodes=nodes))
    assert len(result.samples) == 4096 * 8 and result.missing_nodes == ()
    hot = [(s.node, s.labels["gpu"]) for s in result.samples if s.value > 0]
    assert hot == [("gpu-node-2049", "7")]
    sweep = telemetry.read(SignalQuery(signal="gpu.ecc.dbe_rate"))
    assert sweep.samples == result.samples and telemetry.queries == 2
