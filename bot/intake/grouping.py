"""Group a webhook's new firing alerts into incidents: one per (runbook, target), or one parent
incident per alert storm. Each group costs one incident lookup (or creation) and one bulk
attach, whatever its number of alerts.

`Received` says what happened to each alert; the caller commits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session

from bot.incidents import lifecycle
from bot.incidents.timeline import ALERTMANAGER, EventKind
from bot.intake.routing import AlertRoute
from bot.intake.storms import (
    Firing,
    StormKey,
    StormPolicy,
    find_storm_parent,
    storm_domain,
    worst_severity,
)
from storage import alerts as alert_store


@dataclass(frozen=True)
class Received:
    """What happened to one alert of a webhook.

    `start_run` is set on at most one alert per new incident. For a storm's parent incident,
    `members` lists every target of the storm and `target_kind` is `storm`.
    """

    fingerprint: str
    status: str
    duplicate: bool
    incident_id: int | None = None
    runbook: str | None = None
    target: str | None = None
    target_input: str | None = None
    start_run: bool = False
    unroutable: str | None = None
    target_kind: str | None = None
    members: tuple[str, ...] = ()
    resolved_incident: bool = False


def group_firing(
    session: Session,
    firing: Sequence[Firing],
    *,
    routes: Mapping[str, AlertRoute],
    at: datetime,
    storms: StormPolicy | None,
) -> dict[int, Received]:
    """Results by webhook position: one incident per (runbook, target), except a storm of
    alerts whose runbook can triage a node set (`storms.runbooks`): one parent incident."""
    if storms is None or not storms.enabled:
        return _by_target(session, firing, at=at)
    groups: dict[StormKey, list[Firing]] = {}
    alone = [f for f in firing if f.route.runbook not in storms.runbooks]
    results: dict[int, Received] = _by_target(session, alone, at=at)
    for item in firing:
        if item.route.runbook not in storms.runbooks:
            continue
        domain = storm_domain(item.alert.labels, storms.domain_labels)
        groups.setdefault(StormKey(item.route.runbook, item.alert.alertname, domain), []).append(
            item
        )
    for key, batch in groups.items():
        parent = find_storm_parent(session, key, batch=batch, policy=storms, routes=routes, at=at)
        if parent is None:
            results.update(_by_target(session, batch, at=at))
            continue
        assert parent.incident.id is not None
        for position, item in enumerate(batch):
            starts = parent.opened and position == 0
            results[item.index] = Received(
                item.alert.identity,
                item.alert.status,
                duplicate=False,
                incident_id=parent.incident.id,
                runbook=key.runbook,
                target=key.target,
                target_input="nodes",
                start_run=starts,
                target_kind=parent.incident.target_kind,
                members=parent.members if starts else (item.route.target,),
            )
    return results


def _by_target(session: Session, firing: Sequence[Firing], *, at: datetime) -> dict[int, Received]:
    groups: dict[tuple[str, str], list[Firing]] = {}
    for item in firing:
        groups.setdefault((item.route.runbook, item.route.target), []).append(item)
    results: dict[int, Received] = {}
    for batch in groups.values():
        results.update(open_for_alerts(session, batch, at=at))
    return results


def open_for_alerts(
    session: Session, batch: Sequence[Firing], *, at: datetime
) -> dict[int, Received]:
    """Open (or attach to) the incident of one (runbook, target) for all its new alerts."""
    first = min(batch, key=lambda f: f.alert.startsAt)
    route, alert = first.route, first.alert
    incident, opened = lifecycle.open_or_attach(
        session,
        runbook=route.runbook,
        target=route.target,
        target_kind=route.target_kind,
        severity=worst_severity(f.alert.labels.get("severity", "warning") for f in batch),
        title=alert.annotations.get("summary") or f"{alert.alertname} on {route.target}",
        fired_at=alert.startsAt,
        detected_at=at,
        actor=ALERTMANAGER,
    )
    assert incident.id is not None
    alert_store.attach_alerts(
        session,
        alert_ids=[f.alert_id for f in batch],
        incident_id=incident.id,
        runbook=route.runbook,
    )
    if not opened:
        names = ", ".join(sorted({f.alert.alertname for f in batch}))
        lifecycle.record(
            session,
            incident_id=incident.id,
            kind=EventKind.NOTE,
            at=at,
            actor=ALERTMANAGER,
            summary=f"{names} fired again for {route.target}; attached to {incident.ref}",
        )
    return {
        item.index: Received(
            item.alert.identity,
            item.alert.status,
            duplicate=False,
            incident_id=incident.id,
            runbook=route.runbook,
            target=route.target,
            target_input=route.target_input,
            start_run=opened and item is first,
            target_kind=route.target_kind,
        )
        for item in batch
    }
