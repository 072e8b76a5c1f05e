"""Scenario files: loading, validation errors and node naming.

Covers: every shipped scenario loads and its expectations are consistent (a `diagnose`
command expects the node-diagnose runbook); errors name the file and the field path and say
what is valid (unknown fault kind, unknown field, unknown node with the padding hint, GPU/HCA
index out of range, xid without code, unknown workload, trigger with both or neither form,
bad duration, malformed YAML, unreadable file); relative durations; node-name zero padding.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from integrations.errors import ScenarioError
from simulator import SCENARIO_DIR, load_scenario
from simulator.faults import FAULT_KINDS
from simulator.scenarios import parse_offset, parse_scenario, render_offset
from simulator.topology import node_names

SHIPPED = sorted(SCENARIO_DIR.glob("*.yaml"))
REQUIRED = {
    "ecc-dbe-storm.yaml",
    "ecc-sbe-storm.yaml",
    "row-remap-failure.yaml",
    "xid-79-fallen-off-bus.yaml",
    "ib-symbol-errors.yaml",
    "node-not-ready.yaml",
    "healthy-node.yaml",
    "ecc-dbe-default-counters.yaml",
}
Raw = Callable[..., dict[str, Any]]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    return path


def error_of(raw: dict[str, Any]) -> str:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(raw, source="scenarios/x.yaml")
    return str(info.value)


def test_the_required_scenarios_are_shipped() -> None:
    assert {p.name for p in SHIPPED} >= REQUIRED


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_scenario_loads_with_consistent_expectations(path: Path) -> None:
    scenario = load_scenario(path)
    assert scenario.name == path.stem
    assert scenario.expect is not None
    if scenario.trigger.command and scenario.trigger.command.startswith("diagnose "):
        assert scenario.expect.runbook == "node-diagnose"
    if scenario.expect.layer == "none":
        assert scenario.expect.culprits == []


def test_unknown_fault_kind_names_file_field_and_the_valid_kinds(raw_scenario: Raw) -> None:
    message = error_of(raw_scenario(faults=[{"kind": "ecc_storm", "node": "gpu-node-03"}]))
    assert message.startswith(
        "scenarios/x.yaml: field 'faults.0.kind': unknown fault kind 'ecc_storm' (kinds: "
    )
    assert "ecc_dbe_storm" in message and "node_not_ready" in message


def test_unknown_field_lists_the_valid_fields(raw_scenario: Raw) -> None:
    raw = raw_scenario()
    raw["fleet"]["gpus"] = 8
    message = error_of(raw)
    assert "field 'fleet.gpus': unknown field" in message
    assert "gpus_per_node" in message


def test_unknown_node_says_how_names_are_padded(raw_scenario: Raw) -> None:
    message = error_of(raw_scenario(faults=[{"kind": "node_not_ready", "node": "gpu-node-3"}]))
    assert "field 'faults.0.node': unknown node 'gpu-node-3'" in message
    assert "gpu-node-00 .. gpu-node-15" in message and "2 digits" in message


def test_gpu_index_out_of_range(raw_scenario: Raw) -> None:
    raw = raw_scenario(faults=[{"kind": "ecc_dbe_storm", "node": "gpu-node-01", "gpu": 8}])
    assert "field 'faults.0.gpu': GPU index 8 out of range" in error_of(raw)


def test_hca_index_out_of_range(raw_scenario: Raw) -> None:
    raw = raw_scenario(faults=[{"kind": "ib_symbol_errors", "node": "gpu-node-01", "hca": 9}])
    assert "field 'faults.0.hca': HCA index 9 out of range" in error_of(raw)


def test_xid_needs_a_code(raw_scenario: Raw) -> None:
    raw = raw_scenario(faults=[{"kind": "xid", "node": "gpu-node-01", "gpu": 0}])
    assert "field 'faults.0.code': xid needs 'code'" in error_of(raw)


def test_gpu_fault_needs_a_gpu(raw_scenario: Raw) -> None:
    raw = raw_scenario(faults=[{"kind": "ecc_dbe_storm", "node": "gpu-node-01"}])
    assert "field 'faults.0.gpu': ecc_dbe_storm needs 'gpu'" in error_of(raw)


def test_unknown_workload_lists_the_workloads(raw_scenario: Raw) -> None:
    raw = raw_scenario(faults=[{"kind": "pod_oom_killed", "workload": "llm-pretrian"}])
    assert (
        "field 'faults.0.workload': unknown workload 'llm-pretrian' (workloads: llm-pretrain)"
        in error_of(raw)
    )


def test_workload_on_nodes_outside_the_fleet(raw_scenario: Raw) -> None:
    raw = raw_scenario(workloads=[{"kind": "training", "name": "t", "nodes": "gpu-node-[14-17]"}])
    assert "field 'fleet.workloads.0.nodes': unknown node 'gpu-node-16'" in error_of(raw)


@pytest.mark.parametrize(
    "trigger", [{}, {"command": "diagnose gpu-node-01", "alert": {"alertname": "X"}}]
)
def test_trigger_needs_exactly_one_form(raw_scenario: Raw, trigger: dict[str, Any]) -> None:
    raw = raw_scenario()
    raw["trigger"] = trigger
    assert "field 'trigger': give exactly one of 'alert', 'storm' or 'command'" in error_of(raw)


def test_trigger_command_names_a_fleet_node(raw_scenario: Raw) -> None:
    raw = raw_scenario()
    raw["trigger"] = {"command": "diagnose gpu-node-99"}
    assert "field 'trigger.command': unknown node 'gpu-node-99'" in error_of(raw)


def test_bad_start_duration(raw_scenario: Raw) -> None:
    fault = {"kind": "node_not_ready", "node": "gpu-node-01", "start": "10 min"}
    raw = raw_scenario(faults=[fault])
    assert "field 'faults.0.start': invalid duration '10 min'" in error_of(raw)


def test_malformed_yaml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "apiVersion: gpu-oncall/v1\nfleet: {nodes: [\n")
    with pytest.raises(ScenarioError, match=r"x\.yaml: invalid YAML"):
        load_scenario(path)


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"nope\.yaml: cannot read scenario"):
        load_scenario(tmp_path / "nope.yaml")


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"x\.yaml: field '\(top level\)'"):
        load_scenario(write(tmp_path, "- 1\n- 2\n"))


def test_a_file_error_names_file_and_field(tmp_path: Path) -> None:
    text = (SCENARIO_DIR / "ecc-dbe-storm.yaml").read_text().replace("ecc_dbe_storm", "ecc_storm")
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, text))
    assert str(info.value).startswith(
        f"{tmp_path / 'x.yaml'}: field 'faults.0.kind': unknown fault kind 'ecc_storm'"
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("-10m", -600),
        ("30s", 30),
        ("1h", 3600),
        ("-1h30m", -5400),
        ("+2m", 120),
        ("500ms", 0.5),
        (0, 0),
        (-45, -45),
    ],
)
def test_relative_durations(text: str | int, seconds: float) -> None:
    assert parse_offset(text) == timedelta(seconds=seconds)


def test_durations_round_trip() -> None:
    for text in ("-10m", "30s", "1h", "-1500ms", "0s"):
        assert render_offset(parse_offset(text)) == text


@pytest.mark.parametrize(
    ("count", "last"),
    [
        (1, "gpu-node-00"),
        (16, "gpu-node-15"),
        (100, "gpu-node-99"),
        (101, "gpu-node-100"),
        (256, "gpu-node-255"),
        (4096, "gpu-node-4095"),
    ],
)
def test_node_names_are_padded_to_the_largest_index(count: int, last: str) -> None:
    names = node_names(count)
    assert names[-1] == last
    assert len({len(n) for n in names}) == 1
    assert len(names) == count


def test_node_seven_is_padded_by_fleet_size() -> None:
    assert node_names(16)[7] == "gpu-node-07"
    assert node_names(256)[7] == "gpu-node-007"


def test_every_fault_kind_has_a_distinct_name_and_layer() -> None:
    assert len(FAULT_KINDS) >= 6
    for name, kind in FAULT_KINDS.items():
        assert kind.name == name
        assert kind.layer in {
            "facility",
            "fabric",
            "gpu_hardware",
            "node_software",
            "kubernetes",
            "telemetry",
            "workload",
        }
