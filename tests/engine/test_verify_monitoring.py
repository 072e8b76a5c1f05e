"""An incident is mitigated only when a verification passes.

Covers: actions that succeeded with a passing verification stamp `mitigated_at`; a skipped
verification (its `when` does not hold), a failed one, and a runbook without one all leave the
incident in `monitoring`, unmitigated and unresolved, with the reason in plain words on the
timeline; a skipped verification is itself on the timeline, saying why it did not run.
"""

from __future__ import annotations

from typing import Any

from bot.incidents.timeline import EventKind
from bot.wiring.runtime import Runtime
from storage.tables import TimelineEvent
from tests.engine.runbook_helpers import (
    ecc_runbook,
    incident_record,
    load,
    open_incident,
    start,
)


def run(rt: Runtime, verify: dict[str, Any] | None) -> tuple[str, Any, list[TimelineEvent]]:
    """A cordon the runbook auto-approves, then `verify`; the incident's state, its
    `mitigated_at` and its timeline."""
    then = [] if verify is None else [
        {"id": "confirm", "title": "Verify the DBE rate", "verify": verify}
    ]
    raw = ecc_runbook("verify-cordon", policy={"auto_approve": [{"action": "cordon"}]}, then=then)
    loaded = load(rt, raw, file="tests/verify.yaml")
    incident_id = open_incident(rt, loaded)
    outcome = start(rt, loaded, incident_id=incident_id)
    assert outcome.steps["execute"]["succeeded"] is True
    incident, events = incident_record(rt, incident_id)
    return incident.state, incident.mitigated_at, events


def reasons(events: list[TimelineEvent]) -> list[str]:
    return [e.summary for e in events if e.kind == EventKind.STATE_CHANGED]


def test_a_passing_verification_mitigates(rt: Runtime) -> None:
    state, mitigated_at, events = run(
        rt, {"signal": "gpu.ecc.dbe_rate", "expect": "value >= 0.0", "within": "3m"}
    )
    assert mitigated_at is not None
    assert state == "resolved"  # no alert fires for a person's run: verified is resolved
    assert "mitigating → monitoring: actions carried out and verified" in reasons(events)


def test_a_skipped_verification_leaves_the_incident_unmitigated_in_monitoring(
    rt: Runtime,
) -> None:
    state, mitigated_at, events = run(
        rt,
        {
            "signal": "gpu.ecc.dbe_rate",
            "expect": "value == 0.0",
            "within": "3m",
            "when": "where.layer == 'fabric'",
        },
    )
    assert (state, mitigated_at) == ("monitoring", None)
    assert reasons(events)[-1] == (
        "mitigating → monitoring: not mitigated: nothing confirmed the fix (it checks only when "
        "where.layer == 'fabric', which does not hold for this incident); the incident stays in "
        "monitoring until a person checks and resolves it"
    )
    assert any(
        e.summary.startswith("Verify the DBE rate: not run (it checks only when") for e in events
    )


def test_a_failed_verification_leaves_the_incident_unmitigated_in_monitoring(
    rt: Runtime,
) -> None:
    state, mitigated_at, events = run(
        rt, {"signal": "gpu.ecc.dbe_rate", "expect": "value < 0.0", "within": "2m"}
    )
    assert (state, mitigated_at) == ("monitoring", None)
    last = reasons(events)[-1]
    assert last.startswith("mitigating → monitoring: not mitigated: verification failed (")
    assert "gpu.ecc.dbe_rate still read" in last
    assert any(e.kind == EventKind.VERIFICATION_FAILED for e in events)


def test_a_runbook_without_verification_does_not_claim_mitigation(rt: Runtime) -> None:
    state, mitigated_at, events = run(rt, None)
    assert (state, mitigated_at) == ("monitoring", None)
    assert "the runbook has no verification step" in reasons(events)[-1]
