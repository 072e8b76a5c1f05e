"""Faults that end, faults that flap, and detectors that lie, on the simulated fleet.

Covers: a fault with a `duration` acts during its window and not after it; a recovered GPU's
XID gauge keeps its last value (as dcgm-exporter's does) while its kernel log stops growing; a
flapping fault is on during each episode and off between them; a repair calls off the episodes
still to come; a stale exporter keeps answering (`up` 1) with the values it had when it froze;
a frozen gauge freezes one GPU while its neighbours move on; a PCIe fault retrains the link to
x8 from intensity 0.5 (visible only with the width fields enabled) and slows the rank on it; an
NVLink fault slows the job at low intensity and kills the rank (a hang) at high intensity; bad
`duration` / `flap` values fail naming the field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from integrations.errors import ScenarioError
from simulator import Fleet, SimCluster, SimTelemetry
from simulator.scenarios import parse_scenario
from integrations.telemetry import SignalQuery

Sim = Callable[..., tuple[Fleet, SimTelemetry, SimCluster]]
NODE = "gpu-node-03"


def gpu_values(telemetry: SimTelemetry, signal: str, node: str = NODE) -> dict[str, float]:
    result = telemetry.read(SignalQuery(signal=signal, nodes=(node,)))
    return {s.labels["gpu"]: s.value for s in result.samples}


def job_values(telemetry: SimTelemetry, signal: str) -> dict[str, float]:
    result = telemetry.read(SignalQuery(signal=signal, nodes=(), workload="llm-pretrain"))
    return {s.node: s.value for s in result.samples}


def test_a_transient_fault_acts_in_its_window_and_not_after(sim: Sim, clock: Any) -> None:
    fault = {"kind": "thermal_throttle", "node": NODE, "start": "+1m", "duration": "10m"}
    _, telemetry, _ = sim(faults=[fault])
    clock.advance(minutes=6)
    during = gpu_values(telemetry, "gpu.temperature")
    clock.advance(minutes=30)  # 25 min after the end: the 15-minute window sees none of it
    after = gpu_values(telemetry, "gpu.temperature")
    assert min(during.values()) >= 84.0
    assert max(after.values()) < 70.0


def test_a_recovered_gpu_keeps_its_last_xid_on_the_gauge(sim: Sim, clock: Any) -> None:
    fault = {"kind": "xid", "code": 48, "node": NODE, "gpu": 2, "start": "-3d", "duration": "20m"}
    _, telemetry, cluster = sim(faults=[fault])
    log_now = cluster.node_logs(NODE)
    assert gpu_values(telemetry, "gpu.xid.last")["2"] == 48.0  # days after the repair
    assert gpu_values(telemetry, "gpu.xid.changes")["2"] == 0.0  # nothing new in the window
    clock.advance(hours=1)
    assert cluster.node_logs(NODE).count("Xid") == log_now.count("Xid") == 1


def test_a_flapping_fault_is_on_in_episodes_and_off_between(sim: Sim, clock: Any) -> None:
    fault = {
        "kind": "ib_port_down",
        "node": NODE,
        "hca": 1,
        "start": "+1m",
        "flap": {"period": "10m", "on": "2m"},
    }
    fleet, _, _ = sim(faults=[fault])
    states: list[float | None] = []
    for _ in range(6):  # +2m, +5m, +8m, +11m, +14m, +17m
        clock.advance(minutes=3 if states else 2)
        state = fleet.value("node_infiniband_state_id", NODE, entity=("hca", "1"), at=clock.at)
        states.append(state)
    assert states == [1.0, 4.0, 4.0, 1.0, 4.0, 4.0]


def test_a_repair_calls_off_the_episodes_still_to_come(sim: Sim, clock: Any) -> None:
    fault = {
        "kind": "thermal_throttle",
        "node": NODE,
        "start": "-1m",
        "flap": {"period": "4m", "on": "2m"},
    }
    fleet, telemetry, _ = sim(faults=[fault])
    assert fleet.repair(NODE) == 1  # the episode under way
    clock.advance(minutes=20)
    assert max(gpu_values(telemetry, "gpu.temperature").values()) < 70.0


def test_a_stale_exporter_answers_with_the_values_it_froze_at(sim: Sim, clock: Any) -> None:
    faults = [
        {"kind": "exporter_stale", "node": NODE, "start": "-1m"},
        {"kind": "thermal_throttle", "node": NODE, "start": "+1m"},
    ]
    fleet, telemetry, _ = sim(faults=faults)
    energy_before = fleet.value(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", NODE, entity=("gpu", "0"), at=clock.at
    )
    clock.advance(minutes=20)
    up = telemetry.read(SignalQuery(signal="telemetry.dcgm_up", nodes=(NODE,)))
    assert [s.value for s in up.samples] == [1.0]  # the scrape still succeeds
    assert max(gpu_values(telemetry, "gpu.temperature").values()) < 70.0  # the throttle is hidden
    energy_after = fleet.value(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", NODE, entity=("gpu", "0"), at=clock.at
    )
    assert energy_after == energy_before  # a counter that stopped counting
    assert min(gpu_values(telemetry, "gpu.temperature", "gpu-node-04").values()) > 40.0


def test_a_frozen_gauge_freezes_one_gpu_while_the_others_move_on(sim: Sim, clock: Any) -> None:
    faults = [
        {"kind": "gauge_frozen", "node": NODE, "gpu": 4, "start": "-1m"},
        {"kind": "thermal_throttle", "node": NODE, "start": "+1m"},
    ]
    _, telemetry, _ = sim(faults=faults)
    clock.advance(minutes=20)
    temps = gpu_values(telemetry, "gpu.temperature")
    assert temps["4"] < 70.0
    assert all(t >= 84.0 for gpu, t in temps.items() if gpu != "4")


@pytest.mark.parametrize(("intensity", "width"), [(0.3, 16.0), (0.6, 8.0)])
def test_a_pcie_fault_retrains_the_link_from_half_intensity(
    sim: Sim, intensity: float, width: float
) -> None:
    fault = {"kind": "pcie_downgrade", "node": NODE, "gpu": 6, "intensity": intensity}
    fault["start"] = "-30m"
    _, telemetry, _ = sim(faults=[fault])
    widths = gpu_values(telemetry, "gpu.pcie_link_width")
    assert widths["6"] == width and widths["5"] == 16.0
    assert gpu_values(telemetry, "gpu.pcie_link_gen")["6"] == 5.0
    assert gpu_values(telemetry, "gpu.pcie_replay_rate")["6"] == pytest.approx(20.0 * intensity)


def test_pcie_link_fields_are_absent_from_the_default_csv(sim: Sim) -> None:
    fault = {"kind": "pcie_downgrade", "node": NODE, "gpu": 6}
    _, telemetry, _ = sim(faults=[fault], counters="default")
    width = telemetry.read(SignalQuery(signal="gpu.pcie_link_width", nodes=(NODE,)))
    assert width.samples == () and NODE in width.missing_nodes
    assert gpu_values(telemetry, "gpu.pcie_replay_rate")["6"] > 0.0  # in the default CSV


def test_a_pcie_fault_slows_the_rank_on_it(sim: Sim) -> None:
    fault = {"kind": "pcie_downgrade", "node": NODE, "gpu": 1, "start": "-30m"}
    _, telemetry, _ = sim(faults=[fault])
    steps = job_values(telemetry, "job.step_time")
    assert steps[NODE] == max(steps.values()) > 1.2


@pytest.mark.parametrize(("intensity", "hung"), [(0.3, False), (1.0, True)])
def test_an_nvlink_fault_slows_the_job_or_kills_the_rank(
    sim: Sim, intensity: float, hung: bool
) -> None:
    fault = {"kind": "nvlink_errors", "node": NODE, "gpu": 0, "intensity": intensity}
    fault["start"] = "-30m"
    _, telemetry, cluster = sim(faults=[fault])
    progress = job_values(telemetry, "job.progress")
    assert (max(progress.values()) == 0.0) is hung
    busbw = job_values(telemetry, "job.nccl_busbw")
    assert busbw[NODE] < 45e9
    rank_log = "\n".join(cluster.pod_logs(p.name, p.namespace) for p in cluster.pods_on(NODE))
    assert ("uncorrectable NVLink error" in rank_log) is hung


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"duration": "-5m"}, "faults.0.duration", "duration must be positive"),
        ({"flap": {"period": "2m", "on": "5m"}}, "faults.0.flap", "0 < on < period"),
    ],
)
def test_bad_duration_or_flap_names_the_field(
    raw_scenario: Callable[..., dict[str, Any]],
    change: dict[str, Any],
    field: str,
    message: str,
) -> None:
    fault = {"kind": "thermal_throttle", "node": NODE, **change}
    with pytest.raises(ScenarioError, match=rf"field '{field}'.*{message}"):
        parse_scenario(raw_scenario(faults=[fault]), source="x.yaml")
