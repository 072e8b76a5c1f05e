"""Storing a webhook's alerts at once (storage.alerts.record_alerts / link_alerts).

Covers: new alerts are stored in one call with their labels and annotations; the same call again
stores nothing and reports each row with the incident it was linked to; an identity repeated
within one call is new only the first time; a startsAt given in another time zone is the same
identity; another engine (a second replica) sees the rows as duplicates too; link_alerts links
each alert to its own incident.
"""

from __future__ import annotations

from datetime import timedelta, timezone

from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from storage import alerts
from storage.db import session_scope


def new_alert(clock: FakeClock, fingerprint: str, **changes: object) -> alerts.NewAlert:
    fields: dict[str, object] = {
        "fingerprint": fingerprint,
        "status": "firing",
        "starts_at": clock.now() - timedelta(minutes=5),
        "ends_at": None,
        "alertname": "GPUEccStorm",
        "labels": {"alertname": "GPUEccStorm", "Hostname": "gpu-node-03"},
        "annotations": {"summary": "ECC"},
    }
    fields.update(changes)
    return alerts.NewAlert(**fields)  # type: ignore[arg-type]


def test_redelivery_stores_nothing_and_reports_the_linked_incident(
    engine: Engine, other_engine: Engine, clock: FakeClock, make_incident: object
) -> None:
    incident_a = make_incident("gpu-node-03")  # type: ignore[operator]
    incident_b = make_incident("gpu-node-04")  # type: ignore[operator]
    batch = [new_alert(clock, "a"), new_alert(clock, "b")]
    with session_scope(engine) as session:
        first = alerts.record_alerts(session, batch, received_at=clock.now())
        alerts.link_alerts(
            session, [(first[0].id, incident_a, "ecc-storm"), (first[1].id, incident_b, None)]
        )
    assert [r.is_new for r in first] == [True, True]
    with session_scope(other_engine) as session:
        again = alerts.record_alerts(session, batch, received_at=clock.now())
        stored = alerts.list_alerts(session)
    assert [(r.id, r.is_new, r.incident_id) for r in again] == [
        (first[0].id, False, incident_a),
        (first[1].id, False, incident_b),
    ]
    assert len(stored) == 2
    assert {s.runbook for s in stored} == {"ecc-storm", None}
    assert stored[0].annotations == {"summary": "ECC"}


def test_repeated_identity_in_one_call_is_new_once(engine: Engine, clock: FakeClock) -> None:
    starts = clock.now() - timedelta(minutes=5)
    elsewhere = starts.astimezone(timezone(timedelta(hours=2)))
    batch = [new_alert(clock, "a", starts_at=starts), new_alert(clock, "a", starts_at=elsewhere)]
    with session_scope(engine) as session:
        rows = alerts.record_alerts(session, batch, received_at=clock.now())
        assert len(alerts.list_alerts(session)) == 1
    assert [(r.is_new, r.id) for r in rows] == [(True, rows[0].id), (False, rows[0].id)]
