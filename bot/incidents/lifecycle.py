"""Open, move and annotate incidents; every change is stamped and appended to the timeline.

This module owns the timestamp rules behind the MTTR figures (see `mttr.py`):
`detected_at` when the incident opens, `diagnosed_at` at the first verdict (`mark_diagnosed`),
`acknowledged_at` at the first human action (`mark_acknowledged`, also implied by any human
transition or note), `mitigated_at` on entering `monitoring` (an action was verified) and
`resolved_at` on entering `resolved`. Every write is checked with `mttr.check_order` first.
Times are passed in (from the Clock); nothing here calls now(). The caller commits.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlmodel import Session

from bot.errors import UserInputError
from bot.incidents.costing import read_gpu_hours
from bot.incidents.gpu_hours import GpuHours
from bot.incidents.mttr import TimestampOrderError, check_order, format_duration
from bot.incidents.opening import (
    OpenRequest,
    clamp_fired_at,
    log_opened,
    opening_events,
    record_many,
)
from bot.incidents.states import IncidentState, check_transition
from bot.incidents.timeline import EventKind, is_human_actor
from storage import incidents as store
from storage.errors import IncidentAlreadyOpenError
from storage.tables import Incident, TimelineEvent

logger = logging.getLogger(__name__)

def _aware(value: datetime, name: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware UTC datetime, got {value.isoformat()}")
    return value.astimezone(UTC)


def _check(incident: Incident, **changes: datetime | None) -> None:
    """Raise TimestampOrderError if applying `changes` would put the timestamps out of order."""
    stamps: dict[str, datetime | None] = {
        "fired_at": incident.fired_at,
        "detected_at": incident.detected_at,
        "acknowledged_at": incident.acknowledged_at,
        "diagnosed_at": incident.diagnosed_at,
        "mitigated_at": incident.mitigated_at,
        "resolved_at": incident.resolved_at,
    }
    stamps.update(changes)
    check_order(**stamps)


def _id(incident: Incident) -> int:
    if incident.id is None:
        raise ValueError("the incident has not been stored yet (no id)")
    return incident.id


def record(
    session: Session,
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
) -> None:
    """Append a timeline event; `pinned` defaults to whether the kind is in the curated story.

    One INSERT with no ORM object. The session is flushed first, as when the event was an ORM
    row: the incident's pending change (and its row lock, bot/incidents/figures.py) comes before
    the event that references it, and a clean session's flush does nothing."""
    session.flush()
    record_many(
        session,
        events=[
            {
                "incident_id": incident_id,
                "kind": kind,
                "at": at,
                "actor": actor,
                "summary": summary,
                "payload": payload,
                "pinned": pinned,
                "run_id": run_id,
                "step_id": step_id,
            }
        ],
    )


def open_incident(
    session: Session,
    *,
    runbook: str,
    target: str,
    target_kind: str,
    severity: str,
    title: str,
    fired_at: datetime | None,
    detected_at: datetime,
    actor: str,
) -> Incident:
    """Open an incident (state `open`) and record `alert_fired` (if fired_at) and `incident_opened`.

    An alert whose startsAt is later than our detection (clock skew between Prometheus and the
    bot) is clamped to `detected_at`; the reported time stays in the alert_fired payload.
    Raises IncidentAlreadyOpenError when the (runbook, target) group already has an open one.
    """
    detected_at = _aware(detected_at, "detected_at")
    request = OpenRequest(runbook, target, target_kind, severity, title, fired_at)
    reported, fired_at = clamp_fired_at(request, detected_at)
    incident = store.create_incident(
        session,
        runbook=runbook,
        target=target,
        target_kind=target_kind,
        severity=severity,
        title=title,
        at=detected_at,
        fired_at=fired_at,
        detected_at=detected_at,
    )
    for event in opening_events(
        _id(incident), request, reported=reported, detected_at=detected_at, actor=actor
    ):
        record(session, **event)
    log_opened(_id(incident), request, actor=actor)
    return incident


def open_or_attach(
    session: Session,
    *,
    runbook: str,
    target: str,
    target_kind: str,
    severity: str,
    title: str,
    fired_at: datetime | None,
    detected_at: datetime,
    actor: str,
) -> tuple[Incident, bool]:
    """The open incident for (runbook, target), opening one if needed. Returns (incident, opened).

    Safe across replicas: if another one opens the incident first, the database refuses ours
    and we attach to theirs.
    """
    existing = store.find_open_incident(session, store.group_key(runbook=runbook, target=target))
    if existing is not None:
        return existing, False
    try:
        incident = open_incident(
            session,
            runbook=runbook,
            target=target,
            target_kind=target_kind,
            severity=severity,
            title=title,
            fired_at=fired_at,
            detected_at=detected_at,
            actor=actor,
        )
    except IncidentAlreadyOpenError as exc:
        winner = store.get_incident(session, exc.incident_id) if exc.incident_id else None
        if winner is None:
            raise
        return winner, False
    return incident, True


def transition(
    session: Session,
    incident: Incident,
    *,
    to: IncidentState | str,
    at: datetime,
    actor: str,
    reason: str | None = None,
    mitigated: bool = True,
) -> Incident:
    """Move the incident to `to`, stamp its timestamps and record the change.

    Entering `monitoring` stamps `mitigated_at` unless `mitigated` is False: actions ran but no
    verification passed, so the fix is not confirmed. Moving to the current state is a no-op.
    Raises InvalidTransitionError for a move the state machine forbids and TimestampOrderError
    if `at` is earlier than the incident's history.
    A transition by a human also acknowledges the incident.
    """
    at = _aware(at, "at")
    src, dst = IncidentState(incident.state), IncidentState(to)
    if src is dst:
        return incident
    check_transition(src, dst, ref=incident.ref)
    changes: dict[str, datetime | None] = {}
    if dst is IncidentState.MONITORING and mitigated and incident.mitigated_at is None:
        changes["mitigated_at"] = at
    if dst is IncidentState.RESOLVED:
        changes["resolved_at"] = at
    if src is IncidentState.RESOLVED:
        changes["resolved_at"] = None  # reopened: resolved again later
        incident.gpu_hours_lost = None
    _follow_failure(incident, src, dst)
    _check(incident, **changes)
    if incident.detected_at is not None and at < incident.detected_at:
        raise TimestampOrderError("detected_at", incident.detected_at, f"{dst.value} time", at)
    if is_human_actor(actor):
        mark_acknowledged(session, incident, at=at, actor=actor)
    for name, value in changes.items():
        setattr(incident, name, value)
    incident.state = dst.value
    session.add(incident)
    verb = "reopened" if src is IncidentState.RESOLVED else f"{src.value} → {dst.value}"
    record(
        session,
        incident_id=_id(incident),
        kind=EventKind.STATE_CHANGED,
        at=at,
        actor=actor,
        summary=verb + (f": {reason}" if reason else ""),
        payload={"from": src.value, "to": dst.value, "reason": reason},
    )
    if dst is IncidentState.RESOLVED:
        _record_resolved(session, incident, at=at, actor=actor, reason=reason)
    logger.info(
        "%s %s by %s%s", incident.ref, verb, actor, f": {reason}" if reason else "",
        extra={"incident_id": _id(incident)},
    )
    return incident


def _follow_failure(incident: Incident, src: IncidentState, dst: IncidentState) -> None:
    """A failed incident (no run finished) has no MTTR figures, even once resolved by hand;
    taken back into triage (or reopened) it is an incident again."""
    if dst is IncidentState.FAILED and incident.kind == "incident":
        incident.kind = "failed"
    elif dst is IncidentState.TRIAGING and incident.kind == "failed":
        incident.kind = "incident"


def resolve_as_reported(
    session: Session,
    incident: Incident,
    *,
    at: datetime,
    reported_at: datetime,
    actor: str,
    reason: str,
) -> Incident:
    """Resolve the incident on an outside report (an alert's resolution) received at `at`.

    `resolved_at` is `at`, unless that is earlier than a timestamp it must follow (`fired_at`,
    `detected_at`, `mitigated_at`; e.g. a mitigation stamped by a clock ahead of ours): then it
    is that latest timestamp, so MTTR never undercuts MTTM, and a note records both times.
    The report is never refused: a refusal would be retried by the sender forever.
    """
    at = _aware(at, "at")
    stamps = {
        "fired_at": incident.fired_at,
        "detected_at": incident.detected_at,
        "mitigated_at": incident.mitigated_at,
    }
    name, latest = max(
        ((k, v) for k, v in stamps.items() if v is not None), key=lambda kv: kv[1], default=("", at)
    )
    if latest > at:
        record(
            session,
            incident_id=_id(incident),
            kind=EventKind.NOTE,
            at=latest,
            actor=actor,
            summary=f"{reason} at {reported_at:%Y-%m-%d %H:%M:%S} UTC, before the incident's "
            f"{name} ({latest:%Y-%m-%d %H:%M:%S} UTC); resolved at its {name}",
            payload={
                "reported_at": reported_at.isoformat(),
                "received_at": at.isoformat(),
                "resolved_at": latest.isoformat(),
                "conflicts_with": name,
            },
        )
        at = latest
    return transition(
        session, incident, to=IncidentState.RESOLVED, at=at, actor=actor, reason=reason
    )


def _record_resolved(
    session: Session, incident: Incident, *, at: datetime, actor: str, reason: str | None
) -> None:
    cost = _store_gpu_hours(session, incident, at=at)
    mttr = (
        incident.resolved_at - incident.fired_at
        if incident.fired_at and incident.resolved_at
        else None
    )
    summary = f"{incident.ref} resolved" + (
        f" after {format_duration(mttr)} (MTTR)" if mttr else ""
    )
    record(
        session,
        incident_id=_id(incident),
        kind=EventKind.INCIDENT_RESOLVED,
        at=at,
        actor=actor,
        summary=summary + (f": {reason}" if reason else ""),
        payload={
            "mttr_seconds": mttr.total_seconds() if mttr else None,
            "reason": reason,
            "gpu_hours": cost.to_dict(),
        },
    )


def _store_gpu_hours(session: Session, incident: Incident, *, at: datetime) -> GpuHours:
    """Compute the GPU-hours of a resolved incident and store them in `gpu_hours_lost`: the one
    figure `incident`, `mttr`, `/metrics` (its buckets follow the column), the postmortem and
    JSON all show. Called at resolution and whenever an input changes after it (`fired_at`)."""
    cost = read_gpu_hours(session, incident, now=at)
    incident.gpu_hours_lost = cost.total if incident.kind == "incident" else None
    session.add(incident)
    return cost


def mark_diagnosed(
    session: Session,
    incident: Incident,
    *,
    at: datetime,
    layer: str,
    confidence: float | None,
    culprits: Sequence[str],
    actor: str = "bot",
    run_id: str | None = None,
    step_id: str | None = None,
) -> Incident:
    """Record a verdict: the layer, confidence and culprits, and a pinned `verdict` event.

    `diagnosed_at` keeps the first diagnosis (time to diagnosis measures the first answer);
    a later verdict updates layer, confidence and culprits.
    """
    at = _aware(at, "at")
    if incident.diagnosed_at is None:
        _check(incident, diagnosed_at=at)
        incident.diagnosed_at = at
    incident.layer, incident.confidence, incident.culprits = layer, confidence, list(culprits)
    session.add(incident)
    shown = "" if confidence is None else f" (confidence {confidence:.0%})"
    record(
        session,
        incident_id=_id(incident),
        kind=EventKind.VERDICT,
        at=at,
        actor=actor,
        summary=f"Localized to {layer}{shown}; culprits: {', '.join(culprits) or 'none'}",
        payload={"layer": layer, "confidence": confidence, "culprits": list(culprits)},
        run_id=run_id,
        step_id=step_id,
    )
    return incident


def mark_acknowledged(session: Session, incident: Incident, *, at: datetime, actor: str) -> bool:
    """Stamp `acknowledged_at` at a human's first action. Returns whether it was stamped.

    Machines (the bot, Alertmanager) never acknowledge, the first human wins, and a resolved
    incident is no longer acknowledged.
    """
    at = _aware(at, "at")
    if (
        not is_human_actor(actor)
        or incident.acknowledged_at is not None
        or incident.state == IncidentState.RESOLVED
    ):
        return False
    _check(incident, acknowledged_at=at)
    incident.acknowledged_at, incident.acknowledged_by = at, actor
    session.add(incident)
    record(
        session,
        incident_id=_id(incident),
        kind=EventKind.INCIDENT_ACKNOWLEDGED,
        at=at,
        actor=actor,
        summary=f"Acknowledged by {actor}",
    )
    return True


def add_note(
    session: Session,
    incident: Incident,
    *,
    at: datetime,
    actor: str,
    text: str,
    pinned: bool = False,
) -> TimelineEvent:
    """A person's note on the timeline (a human note also acknowledges the incident)."""
    mark_acknowledged(session, incident, at=at, actor=actor)
    return store.append_event(  # the caller shows the new event: an ORM row with its id
        session,
        incident_id=_id(incident),
        at=_aware(at, "at"),
        kind=EventKind.NOTE.value,
        actor=actor,
        summary=text,
        pinned=pinned,
    )


def correct_fired_at(
    session: Session,
    incident: Incident,
    *,
    fired_at: datetime,
    actor: str,
    at: datetime,
    reason: str | None = None,
) -> Incident:
    """Set the start of impact by hand (impact often starts before the alert): `fired_at`
    becomes the person's, its source `human`, and the change goes on the timeline with the
    previous value, so it is audited and the MTTR figures follow. Nothing a machine does later
    (a redelivered or re-firing alert) overwrites it. A check that someone dates becomes an
    incident again (they say there was impact).

    Raises UserInputError naming the conflicting timestamp when the new time is after any later
    timestamp of the incident (impact cannot begin after the bot detected it), or in the future.
    """
    fired_at, at = _aware(fired_at, "fired_at"), _aware(at, "at")
    try:
        _check(incident, fired_at=fired_at)
    except TimestampOrderError as exc:
        bound = getattr(incident, exc.later)
        raise UserInputError(
            f"{incident.ref}: fired_at {fired_at:%Y-%m-%d %H:%M:%S} UTC is after {exc.later} "
            f"({bound:%Y-%m-%d %H:%M:%S} UTC); impact must begin at or before it"
        ) from exc
    if fired_at > at:
        raise UserInputError(
            f"{incident.ref}: fired_at {fired_at:%Y-%m-%d %H:%M:%S} UTC is in the future "
            f"(now {at:%H:%M:%S} UTC); give the time impact began, in UTC"
        )
    previous, source = incident.fired_at, incident.fired_at_source
    incident.fired_at, incident.fired_at_corrected_by = fired_at, actor
    incident.fired_at_source = "human"
    if incident.kind == "check":  # a failed incident stays failed: no run finished
        incident.kind = "incident"
    session.add(incident)
    mark_acknowledged(session, incident, at=at, actor=actor)
    if incident.resolved_at is not None:  # its GPU-hours start at fired_at: store them anew
        _store_gpu_hours(session, incident, at=incident.resolved_at)
    record(
        session,
        incident_id=_id(incident),
        kind=EventKind.FIRED_AT_CORRECTED,
        at=at,
        actor=actor,
        summary=f"fired_at set to {fired_at:%Y-%m-%d %H:%M:%S} UTC by {actor}"
        + (f": {reason}" if reason else ""),
        payload={
            "previous": previous.isoformat() if previous else None,
            "previous_source": source,
            "fired_at": fired_at.isoformat(),
            "reason": reason,
        },
    )
    return incident


SEVERITY_ORDER = ("info", "warning", "critical")
"""Severities from least to most severe (alert labels and runbook findings share them)."""


def adopt_finding_severity(session: Session, incident: Incident, *, severity: str) -> bool:
    """Raise a person-started incident's severity to a finding's (never lower it). An incident
    an alert opened keeps the alert's severity. Returns whether the severity changed."""
    if incident.fired_at_source == "alert" or severity not in SEVERITY_ORDER:
        return False
    current = SEVERITY_ORDER.index(incident.severity) if incident.severity in SEVERITY_ORDER else -1
    if SEVERITY_ORDER.index(severity) <= current:
        return False
    incident.severity = severity
    session.add(incident)
    return True


def mark_check(session: Session, incident: Incident, *, at: datetime, actor: str) -> bool:
    """Record a person's diagnosis that found nothing as a `check`, not an incident: no alert
    fired and nobody said impact began (`fired_at` is unset), so it has no MTTR figures and is
    left out of every MTTR aggregate. Returns whether it was marked."""
    if incident.fired_at is not None or incident.kind == "check":
        return False
    incident.kind = "check"
    session.add(incident)
    record(
        session,
        incident_id=_id(incident),
        kind=EventKind.NOTE,
        at=_aware(at, "at"),
        actor=actor,
        summary="No fault found: recorded as a check, not an incident (no MTTR figures)",
        payload={"kind": "check"},
    )
    return True
