"""Alert deduplication by the database.

Covers: a second row with the same (fingerprint, status, startsAt) is refused by the UNIQUE
constraint itself (a raw insert, no query helper); `record_alert` on a redelivery returns the
stored row unchanged (a redelivery never overwrites) and reports it as not new, also from a
second engine on the same file; a different status or startsAt is a new alert; attaching an
alert to its incident.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from storage import alerts
from storage.db import session_scope
from storage.errors import ConflictError
from storage.tables import ReceivedAlert


def _record(
    engine: Engine, at: datetime, *, status: str = "firing", **labels: str
) -> tuple[int, bool]:
    with session_scope(engine) as session:
        row, new = alerts.record_alert(
            session,
            fingerprint="3f2a9c",
            status=status,
            starts_at=at,
            ends_at=None,
            alertname="GPUEccStorm",
            labels=labels or {"Hostname": "gpu-node-03"},
            annotations={},
            received_at=at,
        )
        assert row.id is not None
        return row.id, new


def test_the_database_itself_rejects_a_duplicate_alert(engine: Engine, clock: FakeClock) -> None:
    def raw() -> ReceivedAlert:
        return ReceivedAlert(
            fingerprint="3f2a9c",
            status="firing",
            starts_at=clock.now(),
            alertname="A",
            received_at=clock.now(),
        )

    with session_scope(engine) as session:
        session.add(raw())
    duplicate = pytest.raises(ConflictError, match="same unique key already exists")
    with duplicate, session_scope(engine) as session:
        session.add(raw())


def test_a_redelivery_returns_the_stored_alert_unchanged(engine: Engine, clock: FakeClock) -> None:
    first_id, first_new = _record(engine, clock.now())
    second_id, second_new = _record(engine, clock.now(), Hostname="overwritten?")
    assert (first_new, second_new) == (True, False)
    assert first_id == second_id
    with session_scope(engine) as session:
        stored = session.get(ReceivedAlert, first_id)
        assert stored is not None
        assert stored.labels == {"Hostname": "gpu-node-03"}


def test_a_redelivery_to_another_replica_is_still_a_duplicate(
    engine: Engine, other_engine: Engine, clock: FakeClock
) -> None:
    assert _record(engine, clock.now())[1] is True
    assert _record(other_engine, clock.now())[1] is False


def test_resolved_status_or_a_new_start_is_a_new_alert(engine: Engine, clock: FakeClock) -> None:
    ids = {
        _record(engine, clock.now())[0],
        _record(engine, clock.now(), status="resolved")[0],
        _record(engine, clock.now() + timedelta(hours=1))[0],
    }
    assert len(ids) == 3


def test_attach_links_the_alert_to_its_incident(
    engine: Engine, incident_id: int, clock: FakeClock
) -> None:
    alert_id, _ = _record(engine, clock.now())
    with session_scope(engine) as session:
        alerts.attach_alert(session, alert_id=alert_id, incident_id=incident_id, runbook="ecc")
    with session_scope(engine) as session:
        linked = alerts.list_alerts_for_incident(session, incident_id)
        assert [(a.id, a.runbook) for a in linked] == [(alert_id, "ecc")]
