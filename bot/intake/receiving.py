"""Receive alerts: persist each one (dedup by the database's unique (fingerprint, status,
startsAt)), then group into one incident per (runbook, target) and say which runs to start.

Nothing is acknowledged before it is stored; a redelivered webhook creates nothing new; an alert
that matches no runbook is stored (visible with its reason), not dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session

from bot.incidents import lifecycle
from bot.incidents.states import IncidentState
from bot.incidents.timeline import ALERTMANAGER, EventKind
from bot.intake.alerts import Alert, AlertmanagerWebhook
from bot.intake.routing import AlertRoute, Route, Unroutable, route_alert
from storage import alerts as alert_store
from storage import incidents as incident_store


@dataclass(frozen=True)
class Received:
    """What happened to one alert of a webhook."""

    fingerprint: str
    status: str
    duplicate: bool
    incident_id: int | None = None
    runbook: str | None = None
    target: str | None = None
    target_input: str | None = None
    start_run: bool = False
    unroutable: str | None = None


def receive_webhook(
    session: Session,
    webhook: AlertmanagerWebhook,
    *,
    routes: Mapping[str, AlertRoute],
    at: datetime,
) -> list[Received]:
    return [receive_alert(session, alert, routes=routes, at=at) for alert in webhook.alerts]


def receive_alert(
    session: Session, alert: Alert, *, routes: Mapping[str, AlertRoute], at: datetime
) -> Received:
    row, is_new = alert_store.record_alert(
        session,
        fingerprint=alert.identity,
        status=alert.status,
        starts_at=alert.startsAt,
        ends_at=alert.ended_at,
        alertname=alert.alertname,
        labels=dict(alert.labels),
        annotations=dict(alert.annotations),
        received_at=at,
    )
    if not is_new:
        return Received(alert.identity, alert.status, duplicate=True, incident_id=row.incident_id)
    route = route_alert(alert, routes)
    if isinstance(route, Unroutable):
        return Received(alert.identity, alert.status, duplicate=False, unroutable=route.reason)
    assert row.id is not None
    if alert.status == "firing":
        return _firing(session, alert, route, alert_id=row.id, at=at)
    return _resolved(session, alert, route, alert_id=row.id, at=at)


def _firing(
    session: Session, alert: Alert, route: Route, *, alert_id: int, at: datetime
) -> Received:
    title = alert.annotations.get("summary") or f"{alert.alertname} on {route.target}"
    incident, opened = lifecycle.open_or_attach(
        session,
        runbook=route.runbook,
        target=route.target,
        target_kind=route.target_kind,
        severity=alert.labels.get("severity", "warning"),
        title=title,
        fired_at=alert.startsAt,
        detected_at=at,
        actor=ALERTMANAGER,
    )
    assert incident.id is not None
    alert_store.attach_alert(
        session, alert_id=alert_id, incident_id=incident.id, runbook=route.runbook
    )
    if not opened:
        lifecycle.record(
            session,
            incident_id=incident.id,
            kind=EventKind.NOTE,
            at=at,
            actor=ALERTMANAGER,
            summary=f"{alert.alertname} fired again for {route.target}; attached to {incident.ref}",
        )
    return Received(
        alert.identity,
        alert.status,
        duplicate=False,
        incident_id=incident.id,
        runbook=route.runbook,
        target=route.target,
        target_input=route.target_input,
        start_run=opened,
    )


def _resolved(
    session: Session, alert: Alert, route: Route, *, alert_id: int, at: datetime
) -> Received:
    key = incident_store.group_key(runbook=route.runbook, target=route.target)
    incident = incident_store.find_open_incident(session, key)
    if incident is None or incident.id is None:
        return Received(
            alert.identity,
            alert.status,
            duplicate=False,
            runbook=route.runbook,
            target=route.target,
        )
    alert_store.attach_alert(
        session, alert_id=alert_id, incident_id=incident.id, runbook=route.runbook
    )
    ended = alert.ended_at or at
    lifecycle.record(
        session,
        incident_id=incident.id,
        kind=EventKind.ALERT_RESOLVED,
        at=max(ended, at),
        actor=ALERTMANAGER,
        summary=f"{alert.alertname} resolved for {route.target}",
    )
    if not alert_store.has_firing_alerts(session, incident.id):
        lifecycle.transition(
            session,
            incident,
            to=IncidentState.RESOLVED,
            at=at,
            actor=ALERTMANAGER,
            reason="alert resolved",
        )
    return Received(
        alert.identity,
        alert.status,
        duplicate=False,
        incident_id=incident.id,
        runbook=route.runbook,
        target=route.target,
    )
