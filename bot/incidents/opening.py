"""Open many incidents at once, for alert intake under load: the same incidents, timestamps and
timeline events as `lifecycle.open_incident`, in a few statements whatever their number.

`lifecycle.open_incident` builds its events with `opening_events` too, so both paths write the
same timeline. The inserts bypass the ORM, so the `/metrics` histograms are told explicitly
(`figures.record_inserted`). Times are passed in; the caller commits.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlmodel import Session

from bot.incidents import figures
from bot.incidents.timeline import ALERTMANAGER, PINNED_BY_DEFAULT, EventKind
from storage import incidents as store
from storage.tables import Incident

logger = logging.getLogger(__name__)


def _aware(value: datetime, name: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware UTC datetime, got {value.isoformat()}")
    return value.astimezone(UTC)


@dataclass(frozen=True)
class OpenRequest:
    """An incident to open unless its (runbook, target) already has an open one."""

    runbook: str
    target: str
    target_kind: str
    severity: str
    title: str
    fired_at: datetime | None


def open_or_attach_many(
    session: Session, requests: Sequence[OpenRequest], *, detected_at: datetime, actor: str
) -> list[tuple[Incident, bool]]:
    """`open_or_attach` for many (runbook, target)s in a few statements, whatever their number
    (alert intake under load). Same incidents, timestamps and timeline events; safe across
    replicas. Returns (incident, opened) per request; requests with the same group share one."""
    opened = open_or_attach_ids(session, requests, detected_at=detected_at, actor=actor)
    rows = store.get_incidents(session, {incident_id for incident_id, _ in opened})
    return [(rows[incident_id], new) for incident_id, new in opened]


def open_or_attach_ids(
    session: Session, requests: Sequence[OpenRequest], *, detected_at: datetime, actor: str
) -> list[tuple[int, bool]]:
    """`open_or_attach_many` without loading the incidents: (incident id, opened) per request.
    Reads only (group key, id) pairs, so a webhook's incidents cost one lookup, one insert of
    the missing ones and one insert of their opening events."""
    detected_at = _aware(detected_at, "detected_at")
    keys = [store.group_key(runbook=r.runbook, target=r.target) for r in requests]
    found = store.find_open_incident_ids(session, set(keys))
    missing: dict[str, OpenRequest] = {}
    for key, request in zip(keys, requests, strict=True):
        if key not in found:
            missing.setdefault(key, request)
    fired = {key: clamp_fired_at(request, detected_at) for key, request in missing.items()}
    rows = [
        {
            "runbook": request.runbook,
            "target": request.target,
            "target_kind": request.target_kind,
            "severity": request.severity,
            "title": request.title,
            "group_key": key,
            "fired_at": fired[key][1],
            "fired_at_source": None if fired[key][1] is None else "alert",
            "detected_at": detected_at,
            "created_at": detected_at,
        }
        for key, request in missing.items()
    ]
    created = store.insert_incidents(session, rows)
    figures.record_inserted(session, created.values())
    lost = [key for key in missing if key not in created]  # another replica opened them first
    if lost:
        found.update(store.find_open_incident_ids(session, lost))
    events = [
        event_row(**event)
        for key, incident_id in created.items()
        for event in opening_events(
            incident_id, missing[key], reported=fired[key][0], detected_at=detected_at, actor=actor
        )
    ]
    store.append_events(session, events)
    for key, incident_id in created.items():
        log_opened(incident_id, missing[key], actor=actor)
    found.update(created)
    return [(found[key], key in created) for key in keys]


def log_opened(incident_id: int, request: OpenRequest, *, actor: str) -> None:
    """One INFO line per incident opened (`serve` logs INFO by default)."""
    logger.info(
        "INC-%s opened by %s: %s (%s, severity %s)",
        incident_id,
        actor,
        request.title,
        request.runbook,
        request.severity,
        extra={"incident_id": incident_id, "target": request.target},
    )


def record_many(session: Session, *, events: Sequence[Mapping[str, Any]]) -> None:
    """`record` for many events in one statement; each mapping holds `record`'s arguments."""
    store.append_events(session, [event_row(**event) for event in events])


def clamp_fired_at(
    request: OpenRequest, detected_at: datetime
) -> tuple[datetime | None, datetime | None]:
    """(reported, used) fired_at: a startsAt later than our detection (clock skew between
    Prometheus and the bot) is clamped to `detected_at`."""
    reported = None if request.fired_at is None else _aware(request.fired_at, "fired_at")
    if reported is not None and reported > detected_at:
        return reported, detected_at
    return reported, reported


def opening_events(
    incident_id: int,
    request: OpenRequest,
    *,
    reported: datetime | None,
    detected_at: datetime,
    actor: str,
) -> list[dict[str, Any]]:
    """`alert_fired` (when the alert said when) and `incident_opened`, as `record` arguments."""
    events: list[dict[str, Any]] = []
    if reported is not None:
        fired_at = min(reported, detected_at)
        payload: dict[str, Any] = {"starts_at": reported.isoformat()}
        if reported != fired_at:
            payload["clamped_to"] = fired_at.isoformat()
        events.append(
            {
                "incident_id": incident_id,
                "kind": EventKind.ALERT_FIRED,
                "at": fired_at,
                "actor": ALERTMANAGER,
                "summary": f"Alert fired for {request.target}",
                "payload": payload,
            }
        )
    events.append(
        {
            "incident_id": incident_id,
            "kind": EventKind.INCIDENT_OPENED,
            "at": detected_at,
            "actor": actor,
            "summary": f"INC-{incident_id} opened: {request.title}",
            "payload": {
                "runbook": request.runbook,
                "target": request.target,
                "severity": request.severity,
            },
        }
    )
    return events


def event_row(
    *,
    incident_id: int,
    kind: EventKind,
    at: datetime,
    actor: str,
    summary: str,
    payload: Mapping[str, Any] | None = None,
    pinned: bool | None = None,
    run_id: str | None = None,
    step_id: str | None = None,
) -> dict[str, Any]:
    """A timeline row as `record` would write it (pinned by default for the curated kinds)."""
    return {
        "incident_id": incident_id,
        "at": _aware(at, "at"),
        "kind": kind.value,
        "actor": actor,
        "summary": summary,
        "payload": dict(payload or {}),
        "pinned": kind in PINNED_BY_DEFAULT if pinned is None else pinned,
        "run_id": run_id,
        "step_id": step_id,
    }
