"""A finding must be able to explain the symptom before it can be the verdict (issue 22 items 1, 2).

Covers: a power cap beside a driver skew on an NCCL hang (the skew is the verdict, the cap a side
finding with its reason; through the shipped nccl-hang runbook too, where the cap gets a
low-risk ticket of its own and no cordon, and a node named only by a side finding is never
cordoned); a silent exporter is a side note when something explains the symptom
and the verdict only when nothing does; nothing explaining the symptom falls back to every
finding with halved confidence and says so; no symptom keeps the plain bottom-up ranking; the
mechanism and side findings survive the JSON round trip; the catalog names a mechanism for
every check of the shipped runbooks and rejects an unknown one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.config import Settings
from bot.diagnosis.findings import CheckOutcome, CheckStatus, Culprit, Finding
from bot.diagnosis.gating import gate
from bot.diagnosis.layers import Layer, Severity
from bot.diagnosis.localizing import Verdict, localize
from bot.diagnosis.mechanisms import MECHANISMS, Symptom, explains, is_detector
from bot.engine.schema import Step
from bot.evaluation.evaluating import isolated, trigger
from bot.wiring.runtime import open_runtime
from simulator import SCENARIO_DIR
from simulator.scenarios import load_scenario

RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"
COMBINED = Path(SCENARIO_DIR) / "combined"


def fired(
    check: str, layer: Layer, mechanism: str | None, *, severity: Severity = Severity.CRITICAL,
    **culprit: str,
) -> CheckOutcome:
    finding = Finding(
        check, layer, severity, f"{check} fired", Culprit(**culprit), mechanism=mechanism
    )
    return CheckOutcome(check, layer, CheckStatus.FIRED, finding)


def power_cap_and_driver_skew() -> list[CheckOutcome]:
    return [
        fired("power_cap", Layer.FACILITY, "power_cap", node="gpu-node-09"),
        fired("driver_skew", Layer.NODE_SOFTWARE, "driver_skew", node="gpu-node-12"),
        fired("hung", Layer.WORKLOAD, "no_progress", severity=Severity.INFO, workload="llm"),
    ]


def test_a_power_cap_cannot_be_the_cause_of_a_hang_when_a_driver_skew_can() -> None:
    verdict = localize(power_cap_and_driver_skew(), symptom=Symptom.HANG)
    assert verdict.layer is Layer.NODE_SOFTWARE
    assert verdict.culprits == ("gpu-node-12",)
    assert verdict.mechanism == "driver_skew"
    assert [s.check_id for s in verdict.side] == ["power_cap"]
    assert verdict.side[0].nodes == ("gpu-node-09",)
    assert "cannot stop collectives" in verdict.side[0].why
    assert "also seen: power cap on gpu-node-09" in verdict.summary
    assert Layer.FACILITY not in verdict.ruled_out


def test_the_same_findings_on_a_slowdown_make_the_power_cap_the_lowest_layer() -> None:
    verdict = localize(power_cap_and_driver_skew(), symptom=Symptom.SLOWDOWN)
    assert verdict.layer is Layer.FACILITY
    assert verdict.culprits == ("gpu-node-09",)
    assert verdict.side == ()


def test_without_a_symptom_the_plain_bottom_up_ranking_decides() -> None:
    verdict = localize(power_cap_and_driver_skew())
    assert verdict.layer is Layer.FACILITY
    assert verdict.symptom is None
    assert verdict.side == ()


def test_a_silent_exporter_is_a_side_note_when_a_lost_gpu_explains_the_hang() -> None:
    verdict = localize(
        [
            fired("exporter_down", Layer.TELEMETRY, "detector_silent", node="gpu-node-11"),
            fired("gpu_lost_unseen", Layer.GPU_HARDWARE, "gpu_lost", node="gpu-node-11"),
        ],
        symptom=Symptom.HANG,
    )
    assert verdict.layer is Layer.GPU_HARDWARE
    assert verdict.mechanism == "gpu_lost"
    assert [(s.layer, s.nodes) for s in verdict.side] == [("telemetry", ("gpu-node-11",))]


def test_a_silent_exporter_is_the_verdict_when_nothing_else_explains_the_hang() -> None:
    verdict = localize(
        [
            fired("exporter_down", Layer.TELEMETRY, "detector_silent", node="gpu-node-07"),
            fired("power_cap", Layer.FACILITY, "power_cap", node="gpu-node-02"),
        ],
        symptom=Symptom.HANG,
    )
    assert verdict.layer is Layer.TELEMETRY
    assert verdict.culprits == ("gpu-node-07",)
    assert [s.check_id for s in verdict.side] == ["power_cap"]


def test_an_engine_probe_without_a_mechanism_counts_as_a_detector() -> None:
    verdict = localize(
        [
            fired("telemetry_detector_stuck", Layer.TELEMETRY, None, node="gpu-node-05"),
            fired("data_starved", Layer.WORKLOAD, "dataloader_starvation", workload="llm"),
        ],
        symptom=Symptom.SLOWDOWN,
    )
    assert verdict.layer is Layer.WORKLOAD
    assert verdict.culprits == ("llm",)
    assert [s.check_id for s in verdict.side] == ["telemetry_detector_stuck"]


def test_nothing_that_explains_the_symptom_falls_back_to_every_finding_and_says_so() -> None:
    alone = [fired("power_cap", Layer.FACILITY, "power_cap", node="gpu-node-02")]
    plain = localize(alone)
    verdict = localize(alone, symptom=Symptom.HANG)
    assert verdict.layer is Layer.FACILITY
    assert verdict.summary.startswith("nothing found can produce a hang")
    assert verdict.confidence == pytest.approx(max(0.05, plain.confidence * 0.5))


def test_kv_exhaustion_and_a_traffic_spike_explain_latency_but_not_a_hang() -> None:
    assert explains("kv_exhausted", Symptom.LATENCY)
    assert explains("traffic_spike", Symptom.LATENCY)
    assert not explains("kv_exhausted", Symptom.HANG)
    assert not explains("power_cap", Symptom.HANG)
    assert is_detector("detector_silent") and not explains("detector_silent", Symptom.SLOWDOWN)
    assert explains("something_new", Symptom.HANG)  # unknown: the plain ranking decides


def test_mechanism_and_side_findings_survive_the_json_round_trip() -> None:
    verdict = localize(power_cap_and_driver_skew(), symptom=Symptom.HANG)
    again = Verdict.from_dict(verdict.to_dict())
    assert (again.mechanism, again.symptom, again.side) == ("driver_skew", "hang", verdict.side)
    assert again.findings == verdict.findings
    assert verdict.to_dict()["side_nodes"] == ["gpu-node-09"]


def test_every_check_of_the_shipped_runbooks_names_a_known_mechanism() -> None:
    unnamed = []
    for path in sorted(RUNBOOKS.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        if doc.get("kind") != "Runbook":
            continue
        for step in doc["steps"]:
            if "check" in step and step.get("mechanism") not in MECHANISMS:
                unnamed.append(f"{path.name}:{step['id']}")
    assert unnamed == []


def test_a_check_naming_an_unknown_mechanism_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown mechanism 'gremlins'.*kv_exhausted"):
        Step.model_validate(
            {"id": "c", "check": "true", "layer": "fabric", "finding": "x", "mechanism": "gremlins"}
        )


def test_a_node_named_only_by_a_side_finding_is_never_cordoned() -> None:
    verdict = localize(power_cap_and_driver_skew(), symptom=Symptom.HANG)
    proposals = [
        {"action": "cordon", "target": "gpu-node-12"},
        {"action": "cordon", "target": "gpu-node-09"},
        {"action": "open_ticket", "target": "gpu-node-09"},
    ]
    kept, withheld = gate(verdict, proposals)
    assert [(p["action"], p["target"]) for p in kept] == [
        ("cordon", "gpu-node-12"),
        ("open_ticket", "gpu-node-09"),
    ]
    assert [(w.action, w.target) for w in withheld] == [("cordon", "gpu-node-09")]
    assert "side finding" in withheld[0].reason and "hang" in withheld[0].reason


def test_the_nccl_hang_runbook_blames_the_skew_and_tickets_the_power_cap_apart() -> None:
    """The issue's own case, through the shipped runbook on the simulated fleet."""
    scenario = load_scenario(COMBINED / "hang-power-cap-and-driver-skew.yaml")
    blind = scenario.model_copy(update={"expect": None})
    with open_runtime(isolated(Settings()), scenario=blind, fresh=True) as rt:
        outcome = trigger(rt, blind).outcome
    assert outcome is not None
    verdict = outcome.verdict
    assert (verdict["layer"], verdict["culprits"], verdict["mechanism"]) == (
        "node_software",
        ["gpu-node-12"],
        "driver_skew",
    )
    assert verdict["side_nodes"] == ["gpu-node-09"]
    assert "also seen: power cap on gpu-node-09" in verdict["summary"]
    propose = next(o for o in outcome.steps.values() if o.get("kind") == "propose")
    targets = {(p["action"], p["target"]) for p in propose["proposals"]}
    assert ("cordon", "gpu-node-12") in targets
    assert not any(t == "gpu-node-09" and a != "open_ticket" for a, t in targets)
    side_ticket = next(
        p
        for p in propose["proposals"]
        if p["action"] == "open_ticket" and p["target"] == "gpu-node-09"
    )
    assert side_ticket["params"]["queue"] == "triage"
    assert side_ticket["risk"] == "low"
