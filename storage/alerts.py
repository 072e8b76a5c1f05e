"""Received-alert queries: deduplication of Alertmanager deliveries by the database.

An alert is identified by (fingerprint, status, startsAt), a unique constraint. A redelivery
finds the stored row and changes nothing, so it never overwrites what a human entered.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlmodel import Session, col, select

from storage.db import insert_unique
from storage.errors import RecordNotFoundError
from storage.tables import ReceivedAlert


def get_alert(
    session: Session, *, fingerprint: str, status: str, starts_at: datetime
) -> ReceivedAlert | None:
    """The stored alert with this identity, or None."""
    statement = select(ReceivedAlert).where(
        ReceivedAlert.fingerprint == fingerprint,
        ReceivedAlert.status == status,
        ReceivedAlert.starts_at == starts_at,
    )
    return session.exec(statement).first()


def record_alert(
    session: Session,
    *,
    fingerprint: str,
    status: str,
    starts_at: datetime,
    ends_at: datetime | None,
    alertname: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    received_at: datetime,
) -> tuple[ReceivedAlert, bool]:
    """Store an alert unless it was received before. Returns (row, is_new)."""
    row = ReceivedAlert(
        fingerprint=fingerprint,
        status=status,
        starts_at=starts_at,
        ends_at=ends_at,
        alertname=alertname,
        labels=dict(labels),
        annotations=dict(annotations),
        received_at=received_at,
    )
    return insert_unique(
        session,
        row,
        existing=lambda: get_alert(
            session, fingerprint=fingerprint, status=status, starts_at=starts_at
        ),
    )


def attach_alert(
    session: Session, *, alert_id: int, incident_id: int, runbook: str | None
) -> ReceivedAlert:
    """Link a stored alert to the incident (and runbook) it was routed to."""
    row = session.get(ReceivedAlert, alert_id)
    if row is None:
        raise RecordNotFoundError(f"no received alert #{alert_id}")
    row.incident_id = incident_id
    row.runbook = runbook
    session.add(row)
    session.flush()
    return row


def list_alerts_for_incident(session: Session, incident_id: int) -> list[ReceivedAlert]:
    """The alerts routed to an incident, in order of receipt."""
    statement = (
        select(ReceivedAlert)
        .where(ReceivedAlert.incident_id == incident_id)
        .order_by(col(ReceivedAlert.received_at), col(ReceivedAlert.id))
    )
    return list(session.exec(statement))


def has_firing_alerts(session: Session, incident_id: int) -> bool:
    """Whether any alert of the incident is still firing (its latest status per fingerprint)."""
    latest: dict[str, str] = {}
    for row in sorted(list_alerts_for_incident(session, incident_id), key=lambda a: a.received_at):
        latest[row.fingerprint] = row.status
    return any(status == "firing" for status in latest.values())
