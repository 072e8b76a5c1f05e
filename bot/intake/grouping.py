"""Group a webhook's new firing alerts into incidents: one per (runbook, target), or one parent
incident per alert storm. A webhook's groups are found or opened, and its alerts attached, in a
few statements whatever their number (`incidents.opening`).

`Received` says what happened to each alert; the caller commits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlmodel import Session

from bot.incidents.opening import OpenRequest, open_or_attach_ids, record_many
from bot.incidents.timeline import ALERTMANAGER, EventKind
from bot.intake.routing import AlertRoute
from bot.intake.storms import (
    STORM_KIND,
    Firing,
    StormKey,
    StormPolicy,
    find_storm_parent,
    storm_domain,
    storm_inputs,
    worst_severity,
)
from storage import alerts as alert_store


@dataclass(frozen=True)
class Received:
    """What happened to one alert of a webhook.

    `start_run` is set on at most one alert per new incident. For a storm's parent incident,
    `members` lists every target of the storm and `target_kind` is `storm`. `extends_run` is set
    on the first alert of a batch that joins a storm opened earlier: its `members` (the batch's
    targets) go into the storm's next run (bot/engine/storm_runs.py).
    """

    fingerprint: str
    status: str
    duplicate: bool
    incident_id: int | None = None
    runbook: str | None = None
    target: str | None = None
    target_input: str | None = None
    start_run: bool = False
    extends_run: bool = False
    unroutable: str | None = None
    target_kind: str | None = None
    members: tuple[str, ...] = ()
    resolved_incident: bool = False

    def run_inputs(self, runbook_inputs: Iterable[str]) -> dict[str, str] | None:
        """Inputs of the run this alert starts: its target, or a storm's members as `nodes`
        (None when the runbook takes no `nodes` input)."""
        if self.target_kind == STORM_KIND:
            return storm_inputs(self.members, runbook_inputs)
        return {self.target_input or "node": self.target or ""}


def group_firing(
    session: Session,
    firing: Sequence[Firing],
    *,
    routes: Mapping[str, AlertRoute],
    at: datetime,
    storms: StormPolicy | None,
) -> dict[int, Received]:
    """Results by webhook position: one incident per (runbook, target), except a storm of
    alerts that a storm runbook triages (`route.storm_runbook`): one parent incident."""
    if storms is None or not storms.enabled:
        return _by_target(session, firing, at=at)
    groups: dict[StormKey, list[Firing]] = {}
    alone = [f for f in firing if f.route.storm_runbook is None]
    results: dict[int, Received] = _by_target(session, alone, at=at)
    for item in firing:
        if item.route.storm_runbook is None:
            continue
        domain = storm_domain(item.alert.labels, storms.domain_labels)
        key = StormKey(item.route.storm_runbook, item.alert.alertname, domain)
        groups.setdefault(key, []).append(item)
    for key, batch in groups.items():
        parent = find_storm_parent(session, key, batch=batch, policy=storms, routes=routes, at=at)
        if parent is None:
            results.update(_by_target(session, batch, at=at))
            continue
        assert parent.incident.id is not None
        for position, item in enumerate(batch):
            starts = parent.opened and position == 0
            joins = not parent.opened and position == 0
            results[item.index] = Received(
                item.alert.identity,
                item.alert.status,
                duplicate=False,
                incident_id=parent.incident.id,
                runbook=key.runbook,
                target=key.target,
                target_input="nodes",
                start_run=starts,
                extends_run=joins,
                target_kind=parent.incident.target_kind,
                members=parent.members if starts or joins else (item.route.target,),
            )
    return results


def _by_target(session: Session, firing: Sequence[Firing], *, at: datetime) -> dict[int, Received]:
    """One incident per (runbook, target), all groups opened or found in a few statements."""
    groups: dict[tuple[str, str], list[Firing]] = {}
    for item in firing:
        groups.setdefault((item.route.runbook, item.route.target), []).append(item)
    if not groups:
        return {}
    batches = list(groups.values())
    requests = [_request(batch) for batch in batches]
    opened = open_or_attach_ids(session, requests, detected_at=at, actor=ALERTMANAGER)
    links: list[tuple[int, int, str | None]] = []
    notes: list[dict[str, Any]] = []
    results: dict[int, Received] = {}
    for batch, (incident_id, new) in zip(batches, opened, strict=True):
        first = min(batch, key=lambda f: f.alert.startsAt)
        links += [(f.alert_id, incident_id, f.route.runbook) for f in batch]
        if not new:
            names = ", ".join(sorted({f.alert.alertname for f in batch}))
            notes.append(
                {
                    "incident_id": incident_id,
                    "kind": EventKind.NOTE,
                    "at": at,
                    "actor": ALERTMANAGER,
                    "summary": f"{names} fired again for {first.route.target}; "
                    f"attached to INC-{incident_id}",
                }
            )
        for item in batch:
            results[item.index] = Received(
                item.alert.identity,
                item.alert.status,
                duplicate=False,
                incident_id=incident_id,
                runbook=item.route.runbook,
                target=item.route.target,
                target_input=item.route.target_input,
                start_run=new and item is first,
                target_kind=item.route.target_kind,
            )
    alert_store.link_alerts(session, links)
    record_many(session, events=notes)
    return results


def _request(batch: Sequence[Firing]) -> OpenRequest:
    """The incident a (runbook, target)'s alerts open: titled by the earliest one."""
    first = min(batch, key=lambda f: f.alert.startsAt)
    route, alert = first.route, first.alert
    return OpenRequest(
        runbook=route.runbook,
        target=route.target,
        target_kind=route.target_kind,
        severity=worst_severity(f.alert.labels.get("severity", "warning") for f in batch),
        title=alert.annotations.get("summary") or f"{alert.alertname} on {route.target}",
        fired_at=alert.startsAt,
    )
