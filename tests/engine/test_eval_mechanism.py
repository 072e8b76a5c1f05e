"""Mechanism accuracy: scenarios name their deciding finding and eval scores it (issue 22 item 4).

Covers: a verdict with the right layer but the wrong mechanism (KV exhaustion reported as a
traffic spike) is scored wrong on the mechanism only; scenarios without `expect.finding` are not
counted; an unknown `expect.finding` is refused naming the file and the field; the combined and
partial-fault scenarios (two faults on different layers, a silent detector, faults younger
than the window, KV vs traffic, flapping, stale gauges) meet their bars with no forbidden action.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.config import Settings, StorageSettings
from bot.engine.running import RunOutcome
from bot.errors import UserInputError
from bot.evaluation.evaluating import evaluate, load_scenarios
from bot.evaluation.scoring import ScenarioResult, render_json, score, summarize
from simulator import SCENARIO_DIR
from simulator.scenarios import Expect

COMBINED = Path(SCENARIO_DIR) / "combined"


def outcome(layer: str, mechanism: str | None) -> RunOutcome:
    verdict = {"kind": "localize", "layer": layer, "culprits": ["vllm-chat"]}
    verdict["mechanism"] = mechanism
    return RunOutcome("run", "INC-1", "inference-slo-breach", "completed", steps={"where": verdict})


def scored(expect: Expect, mechanism: str | None) -> ScenarioResult:
    return score(
        "case",
        expect,
        runbook="inference-slo-breach",
        outcome=outcome("workload", mechanism),
        error=None,
        queries=1,
        diagnosis_ms=1.0,
        destructive=frozenset(),
    )


def test_the_right_layer_with_the_wrong_mechanism_is_wrong_on_the_mechanism_only() -> None:
    expect = Expect(
        runbook="inference-slo-breach", layer="workload", culprits=["vllm-chat"],
        finding="kv_exhausted",
    )
    wrong = scored(expect, "traffic_spike")
    right = scored(expect, "kv_exhausted")
    assert wrong.layer_correct and wrong.culprit_correct and not wrong.mechanism_correct
    assert right.mechanism_correct
    assert wrong.to_json()["predicted_finding"] == "traffic_spike"
    unscored = scored(Expect(runbook="inference-slo-breach", layer="workload"), "traffic_spike")
    summary = summarize([wrong, right, unscored])
    assert (summary["mechanism_scored"], summary["mechanism_accuracy"]) == (2, 0.5)


def test_an_unknown_deciding_finding_is_refused_naming_the_file(tmp_path: Path) -> None:
    data = yaml.safe_load((COMBINED / "slo-kv-exhausted-rate-flat.yaml").read_text())
    data["expect"]["finding"] = "kv_full"
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(UserInputError, match=r"typo.yaml: field 'expect.finding'.*'kv_full'"):
        load_scenarios([path])


@pytest.fixture(scope="module")
def combined(tmp_path_factory: pytest.TempPathFactory) -> list[ScenarioResult]:
    db = tmp_path_factory.mktemp("eval-combined") / "oncall.db"
    return evaluate([COMBINED], settings=Settings(storage=StorageSettings(url=f"sqlite:///{db}")))


def test_combined_and_partial_faults_meet_the_bars(combined: list[ScenarioResult]) -> None:
    summary = render_json(combined)["summary"]
    assert len(combined) >= 30
    assert summary["mechanism_scored"] == len(combined)  # every one names its deciding finding
    misses = [
        (r.name, r.predicted_layer, r.predicted_culprits, r.predicted_finding)
        for r in combined
        if not (r.layer_correct and r.culprit_correct and r.mechanism_correct)
    ]
    assert summary["layer_accuracy"] >= 0.9, misses
    assert summary["culprit_accuracy"] >= 0.9, misses
    assert summary["mechanism_accuracy"] >= 0.9, misses
    assert summary["forbidden_action_count"] == 0, [
        (r.name, r.forbidden_actions_proposed) for r in combined if r.forbidden_actions_proposed
    ]
