"""`gpu-oncall eval` on small scenario sets: routing, scoring, isolation and errors.

Covers: an alert scenario goes through intake to its runbook and a command scenario through
its `/gpu` verb; `--json` prints exactly the documented keys; a wrong diagnosis is scored wrong
and still exits 0; the prediction does not change when the scenario is renamed or its `expect`
block says something else (nothing reads them to decide); the run stops at the approval and
nothing is executed; an invalid scenario exits 2 naming the file and the field; a scenario
without `expect` is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.cli.main import main
from bot.config import Settings
from bot.evaluation.evaluating import evaluate

SCENARIO_KEYS = {
    "name",
    "expected_layer",
    "predicted_layer",
    "layer_correct",
    "expected_culprits",
    "predicted_culprits",
    "culprit_correct",
    "expected_devices",
    "predicted_devices",
    "expected_actions",
    "proposed_actions",
    "actions_correct",
    "forbidden_actions_proposed",
    "expected_finding",
    "predicted_finding",
    "mechanism_correct",
    "queries",
    "diagnosis_ms",
    "run_ms",
}
SUMMARY_KEYS = {
    "layer_accuracy",
    "culprit_accuracy",
    "device_scored",
    "device_accuracy",
    "mechanism_scored",
    "mechanism_accuracy",
    "action_accuracy",
    "forbidden_action_count",
    "diagnosis_ms_median",
    "diagnosis_ms_max",
    "run_ms_total",
    "scenarios",
}


def copy_scenario(src: Path, dst: Path, **changes: Any) -> Path:
    data = yaml.safe_load(src.read_text())
    for key, value in changes.items():
        data[key] = value
    dst.write_text(yaml.safe_dump(data))
    return dst


def test_alert_and_command_scenarios_are_routed_and_scored(
    settings: Settings, scenario_dir: Path
) -> None:
    results = evaluate(
        [scenario_dir / "ecc-dbe-storm.yaml", scenario_dir / "healthy-node.yaml"],
        settings=settings,
    )
    by_name = {r.name: r for r in results}
    storm, healthy = by_name["ecc-dbe-storm"], by_name["healthy-node"]
    assert storm.runbook == "ecc-storm"  # routed by the GPUEccStorm alert
    assert storm.layer_correct and storm.culprit_correct
    assert {"cordon", "drain", "open_ticket"} <= set(storm.proposed_actions)
    assert storm.queries > 0 and storm.diagnosis_ms is not None
    assert healthy.runbook == "node-diagnose"  # routed by the `diagnose` verb
    assert healthy.predicted_layer == "none" and healthy.proposed_actions == ()


def test_json_output_has_exactly_the_documented_keys(
    scenario_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    # The CLI reads Settings from the environment: point its database at tmp_path.
    monkeypatch.setenv("GPU_ONCALL_STORAGE__URL", f"sqlite:///{tmp_path / 'oncall.db'}")
    code = main(["eval", str(scenario_dir / "ib-symbol-errors.yaml"), "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"scenarios", "summary"}
    assert set(report["scenarios"][0]) == SCENARIO_KEYS
    assert set(report["summary"]) == SUMMARY_KEYS
    assert report["summary"]["scenarios"] == 1
    assert report["scenarios"][0]["predicted_layer"] == "fabric"


def test_a_wrong_diagnosis_is_scored_wrong_and_exits_zero(
    scenario_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("GPU_ONCALL_STORAGE__URL", f"sqlite:///{tmp_path / 'oncall.db'}")
    wrong = copy_scenario(
        scenario_dir / "ib-symbol-errors.yaml",
        tmp_path / "wrong.yaml",
        expect={
            "runbook": "node-diagnose",
            "layer": "gpu_hardware",
            "culprits": ["gpu-node-11"],
            "actions": [],
            "not_actions": ["cordon"],
        },
    )
    assert main(["eval", str(wrong), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["scenarios"][0]
    assert row["layer_correct"] is False
    assert row["forbidden_actions_proposed"] == ["cordon"]


def test_the_prediction_ignores_the_scenario_name_and_expect_block(
    settings: Settings, scenario_dir: Path, tmp_path: Path
) -> None:
    original = scenario_dir / "ib-link-flap.yaml"
    disguised = copy_scenario(
        original,
        tmp_path / "disguised.yaml",
        metadata={"name": "healthy-control-gpu-ecc"},
        expect={"runbook": "ecc-storm", "layer": "none", "culprits": [], "actions": []},
    )
    first, second = evaluate([original, disguised], settings=settings)
    assert second.predicted_layer == first.predicted_layer == "fabric"
    assert second.predicted_culprits == first.predicted_culprits
    assert second.proposed_actions == first.proposed_actions


def test_eval_never_carries_out_an_action(settings: Settings, scenario_dir: Path) -> None:
    results = evaluate([scenario_dir / "ecc-dbe-storm.yaml"], settings=settings)
    assert results[0].proposed_actions
    assert results[0].status == "awaiting_approval"  # stopped at the approval nobody gives
    db = Path(settings.storage.url.removeprefix("sqlite:///"))
    assert not db.exists()  # the caller's database is untouched: eval used a throw-away one


def test_an_invalid_scenario_exits_2_naming_the_file_and_field(
    scenario_dir: Path, tmp_path: Path, capsys: Any
) -> None:
    broken = copy_scenario(
        scenario_dir / "ecc-dbe-storm.yaml",
        tmp_path / "broken.yaml",
        faults=[{"kind": "ecc_storm", "node": "gpu-node-03"}],
    )
    assert main(["eval", str(broken)]) == 2
    error = capsys.readouterr().err
    assert str(broken) in error
    assert "faults.0.kind" in error


def test_a_scenario_without_expect_is_refused(
    scenario_dir: Path, tmp_path: Path, capsys: Any
) -> None:
    data = yaml.safe_load((scenario_dir / "healthy-node.yaml").read_text())
    del data["expect"]
    bare = tmp_path / "bare.yaml"
    bare.write_text(yaml.safe_dump(data))
    assert main(["eval", str(bare)]) == 2
    assert f"{bare}: field 'expect'" in capsys.readouterr().err
