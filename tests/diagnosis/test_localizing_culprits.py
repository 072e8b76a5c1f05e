"""Which culprits a verdict names: several affected nodes, context findings, domains.

Covers: a finding about several nodes (`affected`) names all of them, the precise one first;
the verdict lists its node culprits in `culprit_nodes` (not domains); an info finding (the
symptom that started the run) names no culprit when a stronger finding of its layer does, but
does when it is all there is; `affected` survives the round trip through dicts.
"""

from __future__ import annotations

from bot.diagnosis.findings import CheckOutcome, CheckStatus, Culprit, Finding
from bot.diagnosis.layers import Layer, Severity
from bot.diagnosis.localizing import localize


def fired(finding: Finding) -> CheckOutcome:
    return CheckOutcome(finding.check_id, finding.layer, CheckStatus.FIRED, finding)


def test_a_finding_about_several_nodes_names_them_all() -> None:
    finding = Finding(
        "power_brake",
        Layer.FACILITY,
        Severity.CRITICAL,
        "power brake",
        Culprit(node="gpu-node-24", gpu="3"),
        affected=("gpu-node-24", "gpu-node-25", "gpu-node-26"),
    )
    verdict = localize([fired(finding)])
    assert verdict.culprits == ("gpu-node-24", "gpu-node-25", "gpu-node-26")
    assert verdict.culprit_details[0].gpu == "3"
    assert verdict.to_dict()["culprit_nodes"] == ["gpu-node-24", "gpu-node-25", "gpu-node-26"]


def test_the_symptom_finding_names_no_culprit_beside_a_cause() -> None:
    symptom = Finding(
        "mfu_drop", Layer.WORKLOAD, Severity.INFO, "MFU low", Culprit(workload="llm-pretrain")
    )
    cause = Finding(
        "straggler", Layer.WORKLOAD, Severity.CRITICAL, "slow rank", Culprit(node="gpu-node-50")
    )
    verdict = localize([fired(symptom), fired(cause)])
    assert verdict.culprits == ("gpu-node-50",)


def test_the_symptom_alone_still_names_its_culprit() -> None:
    symptom = Finding(
        "mfu_drop", Layer.WORKLOAD, Severity.INFO, "MFU low", Culprit(workload="llm-pretrain")
    )
    verdict = localize([fired(symptom)])
    assert verdict.layer is Layer.WORKLOAD
    assert verdict.culprits == ("llm-pretrain",)


def test_affected_nodes_round_trip_through_dicts() -> None:
    finding = Finding(
        "c", Layer.FABRIC, Severity.WARNING, "s", Culprit(node="a"), affected=("a", "b")
    )
    assert Finding.from_dict(finding.to_dict()) == finding
    assert Culprit.from_dict(Culprit(domain="rack-03", domain_label="rack").to_dict()).name == (
        "rack-03"
    )
