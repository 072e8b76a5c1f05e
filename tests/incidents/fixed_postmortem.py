"""A fixed, fully known incident for the postmortem golden-structure and browser tests: every
timestamp, figure, approval, action and snapshot point is chosen here, so the tests can state
exactly what each rendering must contain."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.incidents.story import (
    ActionView,
    ApprovalView,
    ExtraFigure,
    SeriesView,
    SnapshotView,
    Story,
)
from bot.incidents.views import EventView, IncidentView

FIRED = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
DETECTED = FIRED + timedelta(minutes=2)  # MTTD 2m
DIAGNOSED = DETECTED + timedelta(seconds=30)  # time to diagnosis 30s
ACKNOWLEDGED = FIRED + timedelta(minutes=5)  # MTTA 5m
MITIGATED = FIRED + timedelta(minutes=9)  # MTTM 9m
RESOLVED = FIRED + timedelta(minutes=14)  # MTTR 14m
ONSET = FIRED - timedelta(minutes=1)


def incident() -> IncidentView:
    return IncidentView(
        id=42,
        runbook="ecc-storm",
        target="gpu-node-03",
        target_kind="node",
        severity="critical",
        title="ECC error storm on gpu-node-03",
        state="resolved",
        created_at=DETECTED,
        layer="gpu_hardware",
        confidence=0.97,
        culprits=("gpu-node-03",),
        fired_at=FIRED,
        detected_at=DETECTED,
        diagnosed_at=DIAGNOSED,
        acknowledged_at=ACKNOWLEDGED,
        acknowledged_by="U042",
        mitigated_at=MITIGATED,
        resolved_at=RESOLVED,
    )


def events() -> list[EventView]:
    def ev(at: datetime, kind: str, actor: str, summary: str, pinned: bool) -> EventView:
        return EventView(at=at, kind=kind, actor=actor, summary=summary, pinned=pinned)

    return [
        ev(FIRED, "alert_fired", "alertmanager", "GPUEccStorm firing for gpu-node-03", True),
        ev(DETECTED, "incident_opened", "bot", "INC-42 opened", True),
        ev(DETECTED, "run_started", "bot", "Runbook ecc-storm started", False),
        ev(DIAGNOSED, "finding", "bot", "GPU 5 on gpu-node-03: 4 DBE/min", False),
        ev(DIAGNOSED, "verdict", "bot", "Localized to gpu_hardware (97%)", True),
        ev(ACKNOWLEDGED, "approval_granted", "U042", "Remediation approved by U042", True),
        ev(ACKNOWLEDGED, "note", "U042", "<script>alert(1)</script> draining now", False),
        ev(MITIGATED, "action_succeeded", "bot", "gpu-node-03 cordoned", True),
        ev(MITIGATED, "verification_passed", "bot", "Verification passed: dbe = 0", True),
        ev(RESOLVED, "incident_resolved", "alertmanager", "INC-42 resolved after 14m", True),
    ]


def story() -> Story:
    start = FIRED - timedelta(minutes=10)
    steps = [start + timedelta(minutes=m) for m in range(13)]
    culprit = tuple((at, 0.0 if at < ONSET else 4.0) for at in steps)
    peer = tuple((at, 0.0) for at in steps)
    return Story(
        verdict={
            "layer": "gpu_hardware",
            "summary": "GPU 5 on gpu-node-03 reports double-bit ECC errors",
            "findings": [
                {
                    "layer": "gpu_hardware",
                    "severity": "critical",
                    "summary": "GPU 5 on gpu-node-03: 4 double-bit ECC errors/min",
                    "evidence": [
                        {"source": "dbe", "what": "gpu.ecc.dbe_rate", "value": 4.0,
                         "labels": {"gpu": "5"}}
                    ],
                }
            ],
            "ruled_out": ["network", "kubernetes"],
            "missing_signals": ["gpu.ecc.sbe_rate"],
        },
        approvals=(
            ApprovalView(
                step_id="approve",
                state="approved",
                requested_at=DIAGNOSED,
                decided_at=ACKNOWLEDGED,
                actor="U042",
            ),
        ),
        actions=(
            ActionView(
                action="cordon",
                target="gpu-node-03",
                status="succeeded",
                outcome="changed",
                detail="gpu-node-03 cordoned",
                started_at=ACKNOWLEDGED,
                finished_at=MITIGATED,
            ),
        ),
        snapshot=SnapshotView(
            signal="gpu.ecc.dbe_rate",
            start=start,
            end=steps[-1],
            onset_at=ONSET,
            series=(
                SeriesView("gpu-node-03", "culprit", {"gpu": "5"}, culprit),
                SeriesView("gpu-node-04", "peer", {"gpu": "0"}, peer),
            ),
        ),
        extra_figures=(ExtraFigure("GPU-hours lost", "1.9", "8 GPUs x 14m"),),
    )
