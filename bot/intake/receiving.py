"""Receive alerts: persist every alert of a webhook in one statement (the database's unique
(fingerprint, status, startsAt) skips redeliveries), then group the new firing ones into
incidents (grouping.py) and attach resolved ones to theirs, and say which runs to start.

Nothing is acknowledged before it is stored; a redelivered webhook creates nothing new; an alert
that matches no runbook is stored (visible with its reason), not dropped. The caller commits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from sqlmodel import Session

from bot.incidents import lifecycle
from bot.incidents.opening import record_many
from bot.incidents.states import IncidentState
from bot.incidents.timeline import ALERTMANAGER, EventKind
from bot.intake.alerts import Alert, AlertmanagerWebhook, RejectedAlert
from bot.intake.grouping import Received, group_firing
from bot.intake.routing import AlertRoute, Route, Unroutable, route_alert
from bot.intake.storms import Firing, StormPolicy
from storage import alerts as alert_store
from storage import incidents as incident_store
from storage.tables import Incident

__all__ = [
    "Received",
    "receive_alert",
    "receive_alerts",
    "receive_redelivered",
    "stored_already",
    "receive_rejected",
    "receive_webhook",
    "resolve_alert",
]


def receive_webhook(
    session: Session,
    webhook: AlertmanagerWebhook,
    *,
    routes: Mapping[str, AlertRoute],
    at: datetime,
    storms: StormPolicy | None = None,
) -> list[Received]:
    """Store every alert of the webhook and group the new firing ones; one result per alert."""
    return _receive(session, webhook.alerts, routes=routes, at=at, storms=storms)


def receive_alerts(
    session: Session,
    alerts: Sequence[Alert],
    *,
    routes: Mapping[str, AlertRoute],
    at: datetime,
    storms: StormPolicy | None = None,
    found: alert_store.Found | None = None,
) -> list[Received]:
    """Store and group some alerts of a webhook (the ones its screening took); `found`: what
    `stored_already` read of them just before (not looked up again)."""
    return _receive(session, alerts, routes=routes, at=at, storms=storms, found=found)


def receive_rejected(
    session: Session,
    rejected: Sequence[RejectedAlert],
    *,
    at: datetime,
    found: alert_store.Found | None = None,
) -> list[Received]:
    """Store refused alerts as they were kept, attached to nothing, with their reason (so
    `gpu-oncall alerts --unrouted` shows them); a redelivery stores nothing new."""
    new = [_new(r.stored) for r in rejected]
    rows = alert_store.record_alerts(session, new, received_at=at, looked_up=found)
    return [
        Received(r.stored.identity, r.stored.status, duplicate=not row.is_new, unroutable=r.reason)
        for r, row in zip(rejected, rows, strict=True)
    ]


def stored_already(
    session: Session, alerts: Sequence[Alert], rejected: Sequence[RejectedAlert]
) -> alert_store.Found:
    """Which alerts of a webhook (taken and refused) are stored already, from one read."""
    wanted = [_new(a).identity for a in alerts] + [_new(r.stored).identity for r in rejected]
    return alert_store.existing_alerts(session, list(dict.fromkeys(wanted)))


def receive_redelivered(
    alerts: Sequence[Alert], rejected: Sequence[RejectedAlert], found: alert_store.Found
) -> tuple[list[Received], list[Received]] | None:
    """The results for a webhook whose every alert is stored already (a redelivery), as
    `receive_alerts` and `receive_rejected` would give them, from what `stored_already` found:
    nothing to write, so no write lock. None when any alert is new (the caller stores them)."""
    taken = [_new(a).identity for a in alerts]
    if any(key not in found for key in taken) or any(
        _new(r.stored).identity not in found for r in rejected
    ):
        return None
    return (
        [
            Received(a.identity, a.status, duplicate=True, incident_id=found[key][1])
            for a, key in zip(alerts, taken, strict=True)
        ],
        [
            Received(r.stored.identity, r.stored.status, duplicate=True, unroutable=r.reason)
            for r in rejected
        ],
    )


def receive_alert(
    session: Session, alert: Alert, *, routes: Mapping[str, AlertRoute], at: datetime
) -> Received:
    """Store and handle one alert on its own (no storm grouping)."""
    return _receive(session, [alert], routes=routes, at=at, storms=None)[0]


def _receive(
    session: Session,
    alerts: Sequence[Alert],
    *,
    routes: Mapping[str, AlertRoute],
    at: datetime,
    storms: StormPolicy | None,
    found: alert_store.Found | None = None,
) -> list[Received]:
    new = [_new(a) for a in alerts]
    stored = alert_store.record_alerts(session, new, received_at=at, looked_up=found)
    results: dict[int, Received] = {}
    firing: list[Firing] = []
    resolved: list[Firing] = []
    for index, (alert, row) in enumerate(zip(alerts, stored, strict=True)):
        if not row.is_new:
            results[index] = Received(
                alert.identity, alert.status, duplicate=True, incident_id=row.incident_id
            )
            continue
        route = route_alert(alert, routes)
        if isinstance(route, Unroutable):
            results[index] = Received(
                alert.identity, alert.status, duplicate=False, unroutable=route.reason
            )
        else:
            (firing if alert.status == "firing" else resolved).append(
                Firing(index, alert, route, row.id)
            )
    # Firing first: a resolved alert must not close an incident another alert just joined.
    results.update(group_firing(session, firing, routes=routes, at=at, storms=storms))
    for item in resolved:
        results[item.index] = resolve_alert(
            session, item.alert, route=item.route, alert_id=item.alert_id, at=at
        )
    return [results[i] for i in range(len(alerts))]


def _new(alert: Alert) -> alert_store.NewAlert:
    return alert_store.NewAlert(
        fingerprint=alert.identity,
        status=alert.status,
        starts_at=alert.startsAt,
        ends_at=alert.ended_at,
        alertname=alert.alertname,
        labels=alert.labels,
        annotations=alert.annotations,
    )


def resolve_alert(
    session: Session, alert: Alert, *, route: Route, alert_id: int, at: datetime
) -> Received:
    """Attach a resolved alert to the incident its firing delivery went to, and resolve that
    incident (stamping `resolved_at`) once none of its alerts is firing any more."""
    incident = _incident_of(session, alert, route)
    base = Received(
        alert.identity, alert.status, duplicate=False, runbook=route.runbook, target=route.target
    )
    if incident is None or incident.id is None:
        return base
    alert_store.attach_alerts(
        session, alert_ids=[alert_id], incident_id=incident.id, runbook=incident.runbook
    )
    # When Prometheus saw it end; never after we heard of it (its clock may run ahead of ours).
    ended = min(alert.ended_at or at, at)
    event = {
        "incident_id": incident.id,
        "kind": EventKind.ALERT_RESOLVED,
        "at": ended,
        "actor": ALERTMANAGER,
        "summary": f"{alert.alertname} resolved for {route.target}",
    }
    record_many(session, events=[event])  # one statement, no ORM flush
    resolved = False
    if incident.state != IncidentState.RESOLVED and not alert_store.has_firing_alerts(
        session, incident.id
    ):
        lifecycle.resolve_as_reported(
            session, incident, at=at, reported_at=ended, actor=ALERTMANAGER, reason="alert resolved"
        )
        resolved = True
    return Received(
        alert.identity,
        alert.status,
        duplicate=False,
        incident_id=incident.id,
        runbook=incident.runbook,
        target=incident.target,
        resolved_incident=resolved,
    )


def _incident_of(session: Session, alert: Alert, route: Route) -> Incident | None:
    """The incident the alert's firing delivery joined (a storm parent, too), else the open
    incident of its (runbook, target)."""
    incident = alert_store.incident_of_alert(session, alert.identity)
    if incident is not None:
        return incident
    key = incident_store.group_key(runbook=route.runbook, target=route.target)
    return incident_store.find_open_incident(session, key)
