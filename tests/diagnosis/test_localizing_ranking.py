"""Localization ranks layers bottom-up by evidence.

Covers: the lowest layer with strong evidence wins over louder symptoms above it; weak evidence
alone picks the highest score; no findings means `none`; ruled-out layers are those whose checks
passed with no finding; missing signals are reported and lower the confidence; culprits prefer
the most precise (GPU/HCA) over a bare node; round trip through dicts.
"""

from __future__ import annotations

from bot.diagnosis.findings import CheckOutcome, CheckStatus, Culprit, Finding
from bot.diagnosis.layers import Layer, Severity
from bot.diagnosis.localizing import Verdict, localize


def fired(check: str, layer: Layer, severity: Severity, **culprit: str) -> CheckOutcome:
    finding = Finding(check, layer, severity, f"{check} fired", Culprit(**culprit))
    return CheckOutcome(check, layer, CheckStatus.FIRED, finding)


def passed(check: str, layer: Layer) -> CheckOutcome:
    return CheckOutcome(check, layer, CheckStatus.PASSED)


def unknown(check: str, layer: Layer, signal: str) -> CheckOutcome:
    return CheckOutcome(check, layer, CheckStatus.UNKNOWN, missing_signals=(signal,))


def test_lowest_strong_layer_wins_over_louder_symptoms_above() -> None:
    verdict = localize(
        [
            fired("nccl_timeout", Layer.WORKLOAD, Severity.CRITICAL, workload="llm"),
            fired("mfu_drop", Layer.WORKLOAD, Severity.WARNING, workload="llm"),
            fired(
                "ib_symbols", Layer.FABRIC, Severity.CRITICAL, node="gpu-node-04", hca="mlx5_2:1"
            ),
        ]
    )
    assert verdict.layer is Layer.FABRIC
    assert verdict.culprits == ("gpu-node-04",)
    assert verdict.culprit_details[0].hca == "mlx5_2:1"
    assert verdict.ranked[0][0] is Layer.FABRIC


def test_weak_evidence_only_picks_the_highest_score() -> None:
    verdict = localize(
        [
            fired("a", Layer.FABRIC, Severity.INFO, node="n1"),
            fired("b", Layer.WORKLOAD, Severity.WARNING, workload="llm"),
        ]
    )
    assert verdict.layer is Layer.WORKLOAD
    assert verdict.culprits == ("llm",)


def test_no_findings_is_healthy_with_ruled_out_layers() -> None:
    verdict = localize([passed("ecc", Layer.GPU_HARDWARE), passed("ib", Layer.FABRIC)])
    assert verdict.layer is Layer.NONE
    assert verdict.culprits == ()
    assert verdict.ruled_out == (Layer.FABRIC, Layer.GPU_HARDWARE)


def test_missing_signals_are_reported_and_lower_confidence() -> None:
    complete = localize(
        [fired("dbe", Layer.GPU_HARDWARE, Severity.CRITICAL, node="n"), passed("ib", Layer.FABRIC)]
    )
    partial = localize(
        [
            fired("dbe", Layer.GPU_HARDWARE, Severity.CRITICAL, node="n"),
            unknown("ib", Layer.FABRIC, "fabric.ib.symbol_error_rate"),
        ]
    )
    assert partial.missing_signals == ("fabric.ib.symbol_error_rate",)
    assert partial.confidence < complete.confidence
    assert Layer.FABRIC not in partial.ruled_out


def test_a_layer_with_a_finding_is_never_ruled_out() -> None:
    verdict = localize(
        [
            fired("dbe", Layer.GPU_HARDWARE, Severity.CRITICAL, node="n"),
            passed("sbe", Layer.GPU_HARDWARE),
        ]
    )
    assert Layer.GPU_HARDWARE not in verdict.ruled_out


def test_precise_culprit_subsumes_the_bare_node() -> None:
    verdict = localize(
        [
            fired("xid", Layer.GPU_HARDWARE, Severity.CRITICAL, node="gpu-node-03"),
            fired("dbe", Layer.GPU_HARDWARE, Severity.CRITICAL, node="gpu-node-03", gpu="5"),
        ]
    )
    assert [c.gpu for c in verdict.culprit_details] == ["5"]
    assert verdict.culprits == ("gpu-node-03",)


def test_verdict_round_trips_through_dicts() -> None:
    verdict = localize([fired("dbe", Layer.GPU_HARDWARE, Severity.CRITICAL, node="n", gpu="1")])
    assert Verdict.from_dict(verdict.to_dict()) == verdict
