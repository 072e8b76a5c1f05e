"""Telemetry backends that did not answer become one suspect-telemetry outcome
(bot.engine.steps.backends), which localization ranks below real evidence.

Covers: no unavailable step -> no outcome; two signal steps on one unreachable backend -> one
fired `telemetry` warning naming the backend and both signals (as missing signals); alone it is
the verdict, under a critical GPU finding it ranks second and the missing signals are named.
"""

from __future__ import annotations

from bot.diagnosis.findings import CheckOutcome, CheckStatus, Culprit, Finding
from bot.diagnosis.layers import Layer, Severity
from bot.diagnosis.localizing import localize
from bot.engine.steps.backends import CHECK_ID, backend_outcome

URL = "http://prometheus:9090"
STEPS = {
    "dbe": {"kind": "signal", "signal": "gpu.ecc.dbe_rate", "unavailable": URL, "error": "x"},
    "xid": {"kind": "signal", "signal": "gpu.xid.last", "unavailable": URL, "error": "x"},
    "temp": {"kind": "signal", "signal": "gpu.temperature", "max": 61.0},
    "kernel": {"kind": "cluster", "read": "node_logs"},
}


def test_no_unavailable_backend_adds_nothing() -> None:
    assert backend_outcome({"temp": STEPS["temp"], "kernel": STEPS["kernel"]}) is None


def test_one_outcome_names_the_backend_and_every_signal_it_missed() -> None:
    outcome = backend_outcome(STEPS)
    assert outcome is not None
    assert (outcome.check_id, outcome.layer, outcome.status) == (
        CHECK_ID,
        Layer.TELEMETRY,
        CheckStatus.FIRED,
    )
    assert outcome.missing_signals == ("gpu.ecc.dbe_rate", "gpu.xid.last")
    assert outcome.finding is not None and URL in outcome.finding.summary
    assert outcome.finding.severity is Severity.WARNING


def test_alone_it_is_the_verdict_under_real_evidence_it_ranks_below() -> None:
    suspect = backend_outcome(STEPS)
    assert suspect is not None
    alone = localize([suspect])
    assert alone.layer is Layer.TELEMETRY
    assert alone.missing_signals == ("gpu.ecc.dbe_rate", "gpu.xid.last")
    hardware = CheckOutcome(
        check_id="hw_log",
        layer=Layer.GPU_HARDWARE,
        status=CheckStatus.FIRED,
        finding=Finding(
            "hw_log", Layer.GPU_HARDWARE, Severity.CRITICAL, "XID 48", Culprit(node="n1")
        ),
    )
    both = localize([hardware, suspect])
    assert both.layer is Layer.GPU_HARDWARE
    assert [layer for layer, _ in both.ranked] == [Layer.GPU_HARDWARE, Layer.TELEMETRY]
    assert "gpu.xid.last" in both.missing_signals
