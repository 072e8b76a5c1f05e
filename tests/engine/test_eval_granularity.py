"""Eval scores culprits at GPU / HCA granularity and reports actions and timing.

Covers: a verdict naming the right node but the wrong GPU (or HCA) is a culprit miss; the HCA
port a runbook adds (`mlx5_3:1`) does not matter; a scenario naming no device is scored at node
level; the `--json` report carries expected actions, action accuracy, device accuracy and the
run's timing; the devices a run predicts do not depend on what `expect` says (nothing reads it);
`expect.gpus` / `expect.hcas` naming a device the fleet lacks fail naming the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.config import Settings
from bot.engine.running import RunOutcome
from bot.evaluation.evaluating import evaluate
from bot.evaluation.scoring import render_json, score
from integrations.errors import ScenarioError
from simulator.scenarios import Expect, load_scenario, parse_scenario


def outcome(*culprits: dict[str, str], layer: str = "gpu_hardware") -> RunOutcome:
    verdict = {
        "kind": "localize",
        "layer": layer,
        "culprits": sorted({c["node"] for c in culprits}),
        "culprit_details": list(culprits),
    }
    propose = {"kind": "propose", "actions": ["cordon", "open_ticket"]}
    return RunOutcome(
        run_id="r1",
        incident="INC-1",
        runbook="nccl-hang",
        status="awaiting_approval",
        steps={"where": verdict, "fix": propose},
    )


def scored(expect: dict[str, Any], run: RunOutcome) -> Any:
    return score(
        "s",
        Expect.model_validate({"runbook": "nccl-hang", **expect}),
        runbook="nccl-hang",
        outcome=run,
        error=None,
        queries=3,
        diagnosis_ms=12.5,
        run_ms=20.0,
        destructive=frozenset({"cordon", "drain"}),
    )


def test_the_right_node_with_the_wrong_gpu_is_a_culprit_miss() -> None:
    expect = {"layer": "gpu_hardware", "culprits": ["gpu-node-05"], "gpus": ["gpu-node-05:2"]}
    right = scored(expect, outcome({"node": "gpu-node-05", "gpu": "2"}))
    wrong = scored(expect, outcome({"node": "gpu-node-05", "gpu": "7"}))
    vague = scored(expect, outcome({"node": "gpu-node-05"}))
    assert right.culprit_correct and right.predicted_devices == ("gpu-node-05:2",)
    assert wrong.layer_correct and not wrong.culprit_correct
    assert not vague.culprit_correct


def test_hca_culprits_are_compared_by_device_whatever_the_port() -> None:
    expect = {"layer": "fabric", "culprits": ["gpu-node-29"], "hcas": ["gpu-node-29:mlx5_3"]}
    right = scored(expect, outcome({"node": "gpu-node-29", "hca": "mlx5_3:1"}, layer="fabric"))
    wrong = scored(expect, outcome({"node": "gpu-node-29", "hca": "mlx5_0:1"}, layer="fabric"))
    assert right.culprit_correct and not wrong.culprit_correct


def test_a_scenario_naming_no_device_is_scored_at_node_level() -> None:
    expect = {"layer": "facility", "culprits": ["gpu-node-12"]}
    result = scored(expect, outcome({"node": "gpu-node-12", "gpu": "3"}, layer="facility"))
    assert result.culprit_correct and result.expected_devices == ()


def test_the_json_report_carries_actions_devices_and_timing(
    settings: Settings, scenario_dir: Path
) -> None:
    results = evaluate([scenario_dir / "nccl-hang-ib-port-down-32.yaml"], settings=settings)
    report = render_json(results)
    row, summary = report["scenarios"][0], report["summary"]
    assert row["expected_devices"] == ["gpu-node-29:mlx5_3"]
    assert row["predicted_devices"] == ["gpu-node-29:mlx5_3"]
    assert row["expected_actions"] == ["cordon", "open_ticket", "restart_job"]
    assert row["actions_correct"] is True
    assert row["run_ms"] >= row["diagnosis_ms"] > 0
    assert summary["device_scored"] == 1 and summary["device_accuracy"] == 1.0
    assert summary["action_accuracy"] == 1.0
    assert summary["diagnosis_ms_median"] == summary["diagnosis_ms_max"] == row["diagnosis_ms"]


def test_predicted_devices_do_not_depend_on_the_expect_block(
    settings: Settings, scenario_dir: Path, tmp_path: Path
) -> None:
    src = scenario_dir / "nccl-hang-ecc-dbe.yaml"
    data = yaml.safe_load(src.read_text())
    data["expect"]["gpus"] = ["gpu-node-05:0"]  # a wrong answer key
    lying = tmp_path / "lying.yaml"
    lying.write_text(yaml.safe_dump(data))
    honest, misled = evaluate([src, lying], settings=settings)
    assert honest.predicted_devices == misled.predicted_devices == ("gpu-node-05:6",)
    assert honest.culprit_correct and not misled.culprit_correct


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("gpus", ["gpu-node-99:1"], "unknown node 'gpu-node-99'"),
        ("gpus", ["gpu-node-05:8"], "gpu index 8 out of range"),
        ("hcas", ["gpu-node-05:mlx5_9"], "hca index 9 out of range"),
        ("hcas", ["gpu-node-05:eth0"], "should match pattern"),
    ],
)
def test_a_device_the_fleet_lacks_fails_naming_the_field(
    scenario_dir: Path, field: str, value: list[str], message: str
) -> None:
    data = load_scenario(scenario_dir / "nccl-hang-ecc-dbe.yaml").model_dump(mode="json")
    data["expect"][field] = value
    with pytest.raises(ScenarioError, match=rf"field 'expect\.{field}\.0'.*{message}"):
        parse_scenario(data, source="x.yaml")


def trigger_names(scenario: Any) -> set[str]:
    """The node, job or service a scenario's trigger names."""
    given = scenario.trigger
    if given.alert is not None:
        return set(given.alert.labels.values())
    if given.storm is not None:
        return set(given.storm.alert_labels()[0].values())
    return set((given.command or "").split()[1:])


def test_the_library_hides_culprits_behind_their_triggers(scenario_dir: Path) -> None:
    """Issue 14: >= 30 scenarios whose culprit is not what the trigger names, some on 1,024+
    nodes; faults that end, flap, and detectors that lie are all in the library."""
    library = [load_scenario(p) for p in sorted(scenario_dir.glob("*.yaml"))]
    hidden = [
        s
        for s in library
        if s.expect is not None
        and s.expect.layer != "none"
        and not set(s.expect.culprits) & trigger_names(s)
    ]
    assert len(hidden) >= 30
    assert len([s for s in hidden if s.fleet.nodes >= 1024]) >= 3
    faults = [f for s in library for f in s.faults]
    assert any(f.duration is not None for f in faults)
    assert any(f.flap is not None for f in faults)
    assert {"exporter_stale", "gauge_frozen", "exporter_down"} <= {f.kind for f in faults}
    assert len([s for s in library if s.expect and (s.expect.gpus or s.expect.hcas)]) >= 40
