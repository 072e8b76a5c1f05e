"""Telemetry queries per run do not grow with the fleet or the job (DESIGN §3, §12).

Covers: the same fault diagnosed by `nccl-hang` (a job spanning the whole fleet, one IB port
down) and by `node-diagnose` (one node's DBE storm) on 16, 256 and 4,096 nodes issues the same
number of queries, at most 32, and still finds the culprit among all of them; so does
`node-storm` for an 8-node GPUEccStorm storm, whose topology and driver reads cover the whole
fleet.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.config import Settings
from bot.evaluation.evaluating import isolated, trigger
from bot.wiring.runtime import load_catalogs, open_runtime
from simulator.scenarios import Scenario, parse_scenario
from simulator.telemetry import SimTelemetry
from simulator.topology import node_names

SIZES = (16, 256, 4096)


def scenario(nodes: int, *, fault: dict[str, Any], trigger_: dict[str, Any]) -> Scenario:
    names = node_names(nodes)
    return parse_scenario(
        {
            "apiVersion": "gpu-oncall/v1",
            "kind": "Scenario",
            "metadata": {"name": f"queries-{nodes}"},
            "fleet": {
                "nodes": nodes,
                "workloads": [{"kind": "training", "name": "llm-pretrain", "nodes": names}],
            },
            "faults": [fault | {"node": names[nodes // 2 + 1]}],
            "trigger": trigger_,
        }
    )


def queries_and_culprits(settings: Settings, case: Scenario) -> tuple[int, list[str]]:
    with open_runtime(
        isolated(settings), scenario=case, fresh=True, catalogs=load_catalogs(settings)
    ) as rt:
        assert isinstance(rt.deps.telemetry, SimTelemetry)
        outcome = trigger(rt, case).outcome
        assert outcome is not None
        return rt.deps.telemetry.queries, list(outcome.verdict["culprits"])


@pytest.mark.parametrize(
    ("fault", "make_trigger"),
    [
        pytest.param(
            {"kind": "ib_port_down", "hca": 3},
            lambda node: {
                "alert": {"alertname": "NCCLCollectiveHang", "labels": {"job": "llm-pretrain"}}
            },
            id="nccl-hang",
        ),
        pytest.param(
            {"kind": "ecc_dbe_storm", "gpu": 2},
            lambda node: {"command": f"diagnose {node}"},
            id="node-diagnose",
        ),
    ],
)
def test_queries_per_run_are_constant_from_16_to_4096_nodes(
    settings: Settings, fault: dict[str, Any], make_trigger: Any
) -> None:
    counts = []
    for nodes in SIZES:
        culprit = node_names(nodes)[nodes // 2 + 1]
        case = scenario(nodes, fault=fault, trigger_=make_trigger(culprit))
        queries, culprits = queries_and_culprits(settings, case)
        assert culprits == [culprit]
        counts.append(queries)
    assert counts[0] == counts[1] == counts[2]
    assert counts[0] <= 32  # one query per signal read (NVLink and PCIe too since issue 14)


def storm_scenario(nodes: int) -> tuple[Scenario, list[str]]:
    """DBE errors on 8 nodes spread over the fleet, arriving as one GPUEccStorm storm."""
    names = node_names(nodes)
    members = [names[i * nodes // 8] for i in range(8)]
    case = parse_scenario(
        {
            "apiVersion": "gpu-oncall/v1",
            "kind": "Scenario",
            "metadata": {"name": f"storm-queries-{nodes}"},
            "fleet": {"nodes": nodes, "dcgm_counters": "all"},
            "faults": [{"kind": "ecc_dbe_storm", "nodes": members, "gpu": 1}],
            "trigger": {"storm": {"alertname": "GPUEccStorm", "nodes": members}},
        }
    )
    return case, members


def test_storm_queries_are_constant_from_16_to_4096_nodes(settings: Settings) -> None:
    counts = []
    for nodes in SIZES:
        case, members = storm_scenario(nodes)
        queries, culprits = queries_and_culprits(settings, case)
        assert culprits == members
        counts.append(queries)
    assert counts[0] == counts[1] == counts[2]
    assert counts[0] <= 32  # one query per signal read (NVLink and PCIe too since issue 14)
