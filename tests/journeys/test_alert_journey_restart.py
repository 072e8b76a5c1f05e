"""Journey 2 with a restart in the middle: an ECC-storm alert is triaged, the run stops at its
approval, the process "dies", a new runtime (new DB engine, checkpointer connection, graph and
fleet restored from its saved state) approves, and the actions run exactly once.

Covers: the run waits at the approval with nothing executed; the approval survives the restart;
each action executes exactly once (fleet counters and the actions table); a second approve is
refused; the resolved alert resolves the incident with every MTTR timestamp set; the verdict
names the culprit GPU and node.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import select

from bot.config import Settings
from bot.errors import RunStateError
from bot.intake.alerts import parse_webhook
from bot.intake.receiving import receive_webhook
from bot.wiring.simulation import simulated_webhook as _webhook
from bot.wiring.runtime import open_runtime
from storage import incidents as incident_store
from storage.db import session_scope
from storage.tables import ActionRow


def fire(rt, status: str = "firing") -> int:  # type: ignore[no-untyped-def]
    alert = rt.scenario.trigger.alert
    starts = rt.fleet.t0 + rt.scenario.faults[0].start
    ends = rt.clock.now() if status == "resolved" else None
    body = _webhook(status, alert.alertname, dict(alert.labels), starts_at=starts, ends_at=ends)
    with session_scope(rt.db) as session:
        received = receive_webhook(
            session, parse_webhook(body), routes=rt.catalog.alert_routes(), at=rt.clock.now()
        )
    return received[0].incident_id  # type: ignore[no-any-return]


def test_approval_survives_restart_and_actions_run_once(
    settings: Settings, scenario_dir: Path
) -> None:
    scenario = scenario_dir / "ecc-dbe-storm.yaml"
    with open_runtime(settings, scenario_path=scenario, fresh=True) as rt:
        incident_id = fire(rt)
        loaded = rt.catalog.get("ecc-storm")
        outcome = rt.engine.start(
            loaded,
            inputs={"node": "gpu-node-03"},
            incident_id=incident_id,
            requester="alertmanager",
        )
        assert outcome.status == "awaiting_approval"
        assert [p["action"] for p in outcome.approval["proposals"]] == [
            "cordon",
            "drain",
            "open_ticket",
        ]
        assert outcome.verdict["layer"] == "gpu_hardware"
        assert outcome.verdict["culprits"] == ["gpu-node-03"]
        assert outcome.verdict["culprit_details"][0]["gpu"] == "5"
        assert rt.fleet.cordon_calls["gpu-node-03"] == 0
        run_id = outcome.run_id

    with open_runtime(settings, scenario_path=scenario) as rt:
        assert rt.fleet.cordon_calls["gpu-node-03"] == 0
        resumed = rt.engine.resume(run_id, decision="approve", actor="cli:alice")
        assert resumed.status == "completed"
        acted = resumed.steps["execute"]["results"]
        assert [r["outcome"] for r in acted] == ["changed", "changed", "changed"]
        assert rt.fleet.cordon_calls["gpu-node-03"] == 1
        assert rt.fleet.drain_calls["gpu-node-03"] == 1
        assert resumed.steps["confirm"]["status"] == "passed"
        with pytest.raises(RunStateError):
            rt.engine.resume(run_id, decision="approve", actor="cli:bob")
        fire(rt, "resolved")
        with session_scope(rt.db) as session:
            incident = incident_store.get_incident(session, incident_id)
            assert incident is not None
            assert incident.state == "resolved"
            for stamp in (
                "fired_at",
                "detected_at",
                "diagnosed_at",
                "acknowledged_at",
                "mitigated_at",
                "resolved_at",
            ):
                assert getattr(incident, stamp) is not None, stamp
            assert incident.acknowledged_by == "cli:alice"
            actions = list(session.exec(select(ActionRow)))
            assert sorted(a.action for a in actions) == ["cordon", "drain", "open_ticket"]
            kinds = [e.kind for e in incident_store.list_events(session, incident_id)]
            assert kinds.count("action_succeeded") == 3
            assert "approval_granted" in kinds and "verification_passed" in kinds


def test_rejection_carries_out_nothing(settings: Settings, scenario_dir: Path) -> None:
    with open_runtime(
        settings, scenario_path=scenario_dir / "ecc-dbe-storm.yaml", fresh=True
    ) as rt:
        incident_id = fire(rt)
        outcome = rt.engine.start(
            rt.catalog.get("ecc-storm"),
            inputs={"node": "gpu-node-03"},
            incident_id=incident_id,
            requester="alertmanager",
        )
        rejected = rt.engine.resume(
            outcome.run_id, decision="reject", actor="cli:alice", reason="job is checkpointing"
        )
        assert rejected.status == "rejected"
        assert rejected.steps["execute"]["skipped"] is True
        assert rt.fleet.cordon_calls["gpu-node-03"] == 0
        with session_scope(rt.db) as session:
            incident = incident_store.get_incident(session, incident_id)
            assert incident is not None and incident.state == "triaging"


def test_expired_approval_takes_the_rejected_branch(settings: Settings, scenario_dir: Path) -> None:
    with open_runtime(
        settings, scenario_path=scenario_dir / "ecc-dbe-storm.yaml", fresh=True
    ) as rt:
        incident_id = fire(rt)
        loaded = rt.catalog.get("ecc-storm")
        outcome = rt.engine.start(
            loaded,
            inputs={"node": "gpu-node-03"},
            incident_id=incident_id,
            requester="alertmanager",
        )
        assert rt.engine.expire_due() == []  # nothing is due yet
        rt.clock.advance(rt.deps.policy.approval_ttl)  # type: ignore[attr-defined]
        late = rt.engine.resume(outcome.run_id, decision="approve", actor="cli:alice")
        assert late.status == "rejected"
        assert late.steps["approval"]["decision"] == "expired"
        assert late.steps["execute"]["skipped"] is True
        assert rt.fleet.cordon_calls["gpu-node-03"] == 0
        with session_scope(rt.db) as session:
            kinds = [e.kind for e in incident_store.list_events(session, incident_id)]
        assert "approval_expired" in kinds


def test_scheduler_expiry_rejects_a_forgotten_approval(
    settings: Settings, scenario_dir: Path
) -> None:
    with open_runtime(
        settings, scenario_path=scenario_dir / "ecc-dbe-storm.yaml", fresh=True
    ) as rt:
        incident_id = fire(rt)
        rt.engine.start(
            rt.catalog.get("ecc-storm"),
            inputs={"node": "gpu-node-03"},
            incident_id=incident_id,
            requester="alertmanager",
        )
        rt.clock.advance(rt.deps.policy.approval_ttl)  # type: ignore[attr-defined]
        expired = rt.engine.expire_due()
        assert [o.status for o in expired] == ["rejected"]
        assert expired[0].steps["approval"]["decision"] == "expired"
        assert rt.fleet.cordon_calls["gpu-node-03"] == 0
