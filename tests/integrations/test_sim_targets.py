"""Fault targets beyond one node, and faults composing.

Covers: a `rack` target throttles every node of the rack and no other; a `leaf` target on an
HCA kind without `hca` takes down every port of every node behind the leaf; a `nodes` range
hits exactly those nodes; repairing one node of a group ends only its share; scenario errors
name the field (two targets at once, an unknown rack/leaf, a group target on a workload fault,
a service fault on a training job, a pinned node outside the workload); two faults compose
(a throttled node plus data-loader starvation slow the job more than either; an IB fault and
a straggler on different nodes each keep their own evidence).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from integrations.errors import ScenarioError
from simulator import Fleet, SimCluster, SimTelemetry
from simulator.scenarios import parse_scenario
from integrations.telemetry import SignalQuery

Sim = Callable[..., tuple[Fleet, SimTelemetry, SimCluster]]
JOB = "llm-pretrain"
FIVE = timedelta(minutes=5)


def nodes_where(
    telemetry: SimTelemetry, signal: str, test: Callable[[float], bool], **kw: Any
) -> set[str]:
    result = telemetry.read(SignalQuery(signal=signal, window=FIVE, **kw))
    return {s.node for s in result.samples if test(s.value)}


def test_a_rack_target_throttles_every_node_of_the_rack(sim: Sim) -> None:
    _, telemetry, _ = sim(nodes=24, faults=[{"kind": "power_cap", "rack": "rack-01"}])
    capped = nodes_where(telemetry, "gpu.clock_event_reasons", lambda v: v == 0x4)
    assert capped == {f"gpu-node-{i:02d}" for i in range(8, 16)}


def test_a_leaf_target_downs_every_port_behind_the_leaf(sim: Sim) -> None:
    _, telemetry, _ = sim(nodes=24, faults=[{"kind": "ib_port_down", "leaf": "leaf-02"}])
    result = telemetry.read(SignalQuery(signal="fabric.ib.port_state", window=FIVE))
    down = {(s.node, s.labels["device"]) for s in result.samples if s.value != 4.0}
    assert down == {(f"gpu-node-{i}", f"mlx5_{h}") for i in range(16, 24) for h in range(8)}


def test_a_nodes_range_hits_exactly_those_nodes(sim: Sim) -> None:
    fault = {"kind": "thermal_throttle", "nodes": "gpu-node-[09-10]"}
    _, telemetry, _ = sim(faults=[fault])
    hot = nodes_where(telemetry, "gpu.temperature", lambda v: v >= 85.0)
    assert hot == {"gpu-node-09", "gpu-node-10"}


def test_repairing_one_node_of_a_group_ends_only_its_share(sim: Sim, clock: Any) -> None:
    fleet, telemetry, _ = sim(faults=[{"kind": "ib_symbol_errors", "leaf": "leaf-00"}])
    assert fleet.repair("gpu-node-03") == 8  # one fault per port
    clock.advance(minutes=10)
    erring = nodes_where(telemetry, "fabric.ib.symbol_error_rate", lambda v: v > 0)
    assert erring == {f"gpu-node-0{i}" for i in range(8)} - {"gpu-node-03"}


@pytest.mark.parametrize(
    ("fault", "field", "message"),
    [
        (
            {"kind": "thermal_throttle", "node": "gpu-node-01", "rack": "rack-00"},
            "faults.0.rack",
            "give one of node, nodes, rack, leaf",
        ),
        ({"kind": "power_cap", "rack": "rack-09"}, "faults.0.rack", "unknown rack 'rack-09'"),
        ({"kind": "ib_port_down", "leaf": "leaf-7"}, "faults.0.leaf", "unknown leaf 'leaf-7'"),
        (
            {"kind": "dataloader_starvation", "workload": JOB, "rack": "rack-00"},
            "faults.0.rack",
            "targets a workload",
        ),
        (
            {"kind": "traffic_spike", "workload": JOB},
            "faults.0.workload",
            "needs an inference workload",
        ),
        (
            {"kind": "straggler_rank", "workload": JOB, "node": "gpu-node-12"},
            "faults.0.node",
            "is not one of workload",
        ),
        (
            {"kind": "thermal_throttle", "nodes": "gpu-node-[14-17]"},
            "faults.0.nodes",
            "unknown node 'gpu-node-16'",
        ),
    ],
)
def test_scenario_errors_name_the_field(
    raw_scenario: Callable[..., dict[str, Any]], fault: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(ScenarioError, match=f"field '{field}'") as error:
        parse_scenario(raw_scenario(faults=[fault]))
    assert message in str(error.value)


def test_a_throttled_node_and_a_starved_loader_compose(sim: Sim) -> None:
    def step_time(*faults: dict[str, Any]) -> float:
        _, telemetry, _ = sim(faults=list(faults))
        query = SignalQuery(signal="job.step_time", workload=JOB, window=FIVE)
        return min(s.value for s in telemetry.read(query).samples)

    thermal = {"kind": "thermal_throttle", "node": "gpu-node-02"}
    starved = {"kind": "dataloader_starvation", "workload": JOB}
    both = step_time(thermal, starved)
    assert both > step_time(thermal) > 1.2 and both > step_time(starved) > 1.2


def test_an_ib_fault_and_a_straggler_keep_their_own_evidence(sim: Sim) -> None:
    faults = [
        {"kind": "ib_symbol_errors", "node": "gpu-node-01", "hca": 2},
        {"kind": "straggler_rank", "workload": JOB, "node": "gpu-node-06"},
    ]
    _, telemetry, cluster = sim(faults=faults)
    errors = nodes_where(telemetry, "fabric.ib.symbol_error_rate", lambda v: v > 0)
    assert errors == {"gpu-node-01"}
    busy = nodes_where(telemetry, "gpu.tensor_active", lambda v: v > 0.45, workload=JOB)
    assert busy == {"gpu-node-06"}
    query = SignalQuery(signal="job.nccl_last_completed", workload=JOB)
    completed = {s.node: s.value for s in telemetry.read(query).samples}
    assert min(completed, key=completed.__getitem__) == "gpu-node-06"
    assert "NET/IB : Got completion" in cluster.pod_logs(f"{JOB}-worker-1", "ml")
    assert "NET/IB : Got completion" not in cluster.pod_logs(f"{JOB}-worker-6", "ml")
