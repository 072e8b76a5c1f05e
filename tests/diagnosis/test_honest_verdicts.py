"""Honest verdicts (issue 14, part 5): a layer is ruled out only by checks that were read and
passed; a layer whose signals were missing is *unknown*, said so, and costs confidence.

Aspects: one unknown check keeps a layer out of `ruled_out` even when another check of it
passed; a layer with a finding is neither ruled out nor unknown; each unknown layer lowers the
confidence (capped, never to nothing); a healthy verdict names the layers nobody could look at;
`unknown_layers` and `detectors` survive the round trip through the checkpointed state; the
terminal shows them.
"""

from __future__ import annotations

from bot.diagnosis.findings import CheckOutcome, CheckStatus, Culprit, Finding
from bot.diagnosis.layers import Layer, Severity
from bot.diagnosis.localizing import MAX_UNKNOWN_PENALTY, Verdict, localize
from bot.cli.terminal import render_verdict


def fired(check: str, layer: Layer) -> CheckOutcome:
    finding = Finding(check, layer, Severity.CRITICAL, f"{check} fired", Culprit(node="n-1"))
    return CheckOutcome(check, layer, CheckStatus.FIRED, finding)


def passed(check: str, layer: Layer) -> CheckOutcome:
    return CheckOutcome(check, layer, CheckStatus.PASSED)


def unknown(check: str, layer: Layer, signal: str) -> CheckOutcome:
    return CheckOutcome(check, layer, CheckStatus.UNKNOWN, missing_signals=(signal,))


def test_a_layer_with_an_unread_signal_is_unknown_not_ruled_out() -> None:
    verdict = localize(
        [
            fired("xid74", Layer.GPU_HARDWARE),
            passed("ib_symbols", Layer.FABRIC),
            unknown("nvlink", Layer.FABRIC, "fabric.nvlink.error_rate"),
            passed("driver", Layer.NODE_SOFTWARE),
        ]
    )
    assert verdict.layer is Layer.GPU_HARDWARE
    assert verdict.ruled_out == (Layer.NODE_SOFTWARE,)
    assert verdict.unknown == (Layer.FABRIC,)
    assert verdict.missing_signals == ("fabric.nvlink.error_rate",)


def test_a_layer_with_a_finding_is_neither_unknown_nor_ruled_out() -> None:
    verdict = localize(
        [fired("dbe", Layer.GPU_HARDWARE), unknown("remap", Layer.GPU_HARDWARE, "remap")]
    )
    assert verdict.unknown == ()
    assert verdict.ruled_out == ()


def test_every_unknown_layer_costs_confidence_up_to_a_cap() -> None:
    base = [fired("dbe", Layer.GPU_HARDWARE)]
    read = localize([*base, passed("ib", Layer.FABRIC), passed("k8s", Layer.KUBERNETES)])
    one = localize([*base, unknown("ib", Layer.FABRIC, "ib"), passed("k8s", Layer.KUBERNETES)])
    two = localize([*base, unknown("ib", Layer.FABRIC, "ib"), unknown("k", Layer.KUBERNETES, "k")])
    assert read.confidence > one.confidence > two.confidence
    layers = (Layer.FABRIC, Layer.FACILITY, Layer.KUBERNETES, Layer.TELEMETRY, Layer.WORKLOAD)
    many = localize([*base, *(unknown(f"c{i}", layer, f"s{i}") for i, layer in enumerate(layers))])
    assert many.confidence > 0.05  # still a verdict, never floored to nothing
    assert many.confidence < two.confidence
    assert 0 < MAX_UNKNOWN_PENALTY < 1


def test_a_healthy_verdict_names_the_layers_nobody_could_read() -> None:
    verdict = localize([passed("dbe", Layer.GPU_HARDWARE), unknown("ib", Layer.FABRIC, "ib")])
    assert verdict.layer is Layer.NONE
    assert verdict.ruled_out == (Layer.GPU_HARDWARE,)
    assert "not checked (signals missing): fabric" in verdict.summary
    assert verdict.confidence == 0.5


def test_unknown_layers_and_detector_notes_round_trip_and_reach_the_terminal() -> None:
    verdict = localize([fired("dbe", Layer.GPU_HARDWARE), unknown("ib", Layer.FABRIC, "ib")])
    noted = Verdict.from_dict(verdict.to_dict() | {"detectors": ["xid gauge held"]})
    assert noted.unknown == (Layer.FABRIC,)
    assert noted.detectors == ("xid gauge held",)
    lines = render_verdict(noted.to_dict())
    assert "  Not checked: fabric (signals missing)" in lines
    assert "  Detector:    xid gauge held" in lines
