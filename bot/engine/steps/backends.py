"""Telemetry backends that could not answer during a run, as one generic check outcome.

A gather step whose backend raised TelemetryUnavailable records `unavailable: <backend>` (see
steps.gather). Before localizing, those steps become one `telemetry` finding (warning) naming
the backend and every signal it could not read, so the verdict lists the missing signals and
ranks the telemetry layer as suspect; a lower layer with strong evidence still wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.diagnosis.findings import CheckOutcome, CheckStatus, Culprit, Evidence, Finding
from bot.diagnosis.layers import Layer, Severity

CHECK_ID = "telemetry_backend"


def backend_outcome(steps: Mapping[str, Any]) -> CheckOutcome | None:
    """One fired `telemetry` outcome for the steps whose backend was unavailable, else None."""
    failed = {
        step_id: data
        for step_id, data in steps.items()
        if isinstance(data, Mapping) and data.get("kind") == "signal" and data.get("unavailable")
    }
    if not failed:
        return None
    backends = sorted({str(d["unavailable"]) for d in failed.values()})
    signals = tuple(sorted({str(d.get("signal", step_id)) for step_id, d in failed.items()}))
    finding = Finding(
        check_id=CHECK_ID,
        layer=Layer.TELEMETRY,
        severity=Severity.WARNING,
        summary=(
            f"telemetry backend {', '.join(backends)} did not answer: {len(signals)} signal(s) "
            f"missing ({', '.join(signals)}); checks that need them are unknown, not passed"
        ),
        culprit=Culprit(),
        evidence=tuple(
            Evidence(source=step_id, what=str(d.get("signal", step_id)), value=d.get("error"))
            for step_id, d in sorted(failed.items())
        ),
    )
    return CheckOutcome(
        check_id=CHECK_ID,
        layer=Layer.TELEMETRY,
        status=CheckStatus.FIRED,
        finding=finding,
        missing_signals=signals,
    )
