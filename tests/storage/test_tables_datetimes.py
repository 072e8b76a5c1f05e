"""Datetimes in the database.

Covers: every datetime column of every table reads back timezone-aware UTC through a new
engine; an aware non-UTC time is stored as the same instant in UTC; comparisons in queries
(expiry, lease, resolved-since) use the same UTC representation as the stored values.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from sqlalchemy.engine import Engine
from sqlmodel import select

from bot.clock import FakeClock
from storage import actions, alerts, approvals, incidents, runs
from storage.db import session_scope
from storage.tables import (
    ActionRow,
    ApprovalRow,
    FindingRow,
    Incident,
    ReceivedAlert,
    RunbookRun,
    TimelineEvent,
)

PARIS = timezone(timedelta(hours=1))


def _fill(engine: Engine, run_id: str, incident_id: int, now: datetime) -> None:
    with session_scope(engine) as session:
        incident = incidents.get_incident(session, incident_id)
        assert incident is not None
        incident.acknowledged_at = now.astimezone(PARIS)
        incidents.append_event(
            session, incident_id=incident_id, at=now, kind="note", actor="U1", summary="hi"
        )
        runs.update_run(session, run_id, status="completed", finished_at=now)
        runs.add_findings(
            session,
            run_id=run_id,
            incident_id=incident_id,
            at=now,
            findings=[
                {
                    "check_id": "hw",
                    "layer": "gpu_hardware",
                    "severity": "critical",
                    "summary": "DBE",
                    "culprit": {"node": "gpu-node-03"},
                }
            ],
        )
        approvals.request_approval(
            session,
            run_id=run_id,
            incident_id=incident_id,
            step_id="fix",
            payload={},
            at=now,
            expires_at=now + timedelta(minutes=30),
        )
        actions.claim_action(
            session,
            key="k1",
            run_id=run_id,
            step_id="act",
            action="cordon",
            target="gpu-node-03",
            params={},
            at=now,
            lease=timedelta(minutes=5),
        )
        alerts.record_alert(
            session,
            fingerprint="f1",
            status="firing",
            starts_at=now,
            ends_at=now,
            alertname="GPUEccStorm",
            labels={},
            annotations={},
            received_at=now,
        )


def test_every_datetime_column_reads_back_aware_utc(
    engine: Engine, other_engine: Engine, run_id: str, incident_id: int, clock: FakeClock
) -> None:
    _fill(engine, run_id, incident_id, clock.now())
    seen = 0
    with session_scope(other_engine) as session:
        for table in (
            Incident,
            TimelineEvent,
            RunbookRun,
            FindingRow,
            ActionRow,
            ApprovalRow,
            ReceivedAlert,
        ):
            for row in session.exec(select(table)):
                for name, value in row.model_dump().items():
                    if isinstance(value, datetime):
                        assert value.tzinfo is UTC, f"{table.__name__}.{name}"
                        seen += 1
    assert seen >= 15


def test_an_aware_non_utc_time_is_stored_as_the_same_instant(
    engine: Engine, other_engine: Engine, incident_id: int, clock: FakeClock
) -> None:
    local = clock.now().astimezone(PARIS)
    with session_scope(engine) as session:
        incident = incidents.get_incident(session, incident_id)
        assert incident is not None
        incident.acknowledged_at = local
    with session_scope(other_engine) as session:
        incident = incidents.get_incident(session, incident_id)
        assert incident is not None
        assert incident.acknowledged_at == clock.now()
        assert incident.acknowledged_at is not None
        assert incident.acknowledged_at.utcoffset() == timedelta(0)


def test_query_comparisons_use_the_stored_utc_form(
    engine: Engine, incident_id: int, clock: FakeClock
) -> None:
    with session_scope(engine) as session:
        incident = incidents.get_incident(session, incident_id)
        assert incident is not None
        incident.state, incident.resolved_at = "resolved", clock.now()
    with session_scope(engine) as session:
        since_local = (clock.now() - timedelta(seconds=1)).astimezone(PARIS)
        assert [i.id for i in incidents.list_resolved(session, since=since_local)] == [incident_id]
        later = clock.now() + timedelta(seconds=1)
        assert incidents.list_resolved(session, since=later) == []
