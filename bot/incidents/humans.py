"""What people put on an incident's record: acknowledge, date the start of impact, note, pin or
unpin a timeline event, resolve. Shared by `/gpu` (bot/slack/humans.py) and the CLI
(bot/cli/incident_verbs.py), so both refuse the same things with the same sentences.

Each function takes a session and an incident reference, writes through `lifecycle` (which owns
the timestamp rules) and returns what the caller reports. The caller commits. Machines never
call these: a redelivered or re-firing alert goes through intake, which attaches to the open
incident and never touches what a person entered.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlmodel import Session

from bot.errors import NotFound, UserInputError
from bot.incidents import lifecycle
from bot.incidents.reporting import read_incident
from bot.incidents.states import IncidentState
from bot.limits import FIRED_MAX_BEFORE_DETECTION
from storage import incidents as store
from storage.tables import Incident, TimelineEvent

MAX_NOTE_CHARS = 3000
"""Longest note (a Slack section block holds 3000 characters)."""


@dataclass(frozen=True)
class Acknowledged:
    """The outcome of an ack: whether this person's was the first, and the first's who/when."""

    ref: str
    stamped: bool
    by: str | None
    at: datetime | None


def acknowledge(session: Session, ref: str | int, *, actor: str, at: datetime) -> Acknowledged:
    """Stamp `acknowledged_at`/`acknowledged_by` unless someone already did (the first wins).
    A resolved incident cannot be acknowledged."""
    incident = read_incident(session, ref)
    if incident.state == IncidentState.RESOLVED:
        raise UserInputError(f"{incident.ref} is resolved; there is nothing to acknowledge")
    stamped = lifecycle.mark_acknowledged(session, incident, at=at, actor=actor)
    return Acknowledged(incident.ref, stamped, incident.acknowledged_by, incident.acknowledged_at)


def correct_fired_at(
    session: Session,
    ref: str | int,
    *,
    fired_at: datetime,
    actor: str,
    at: datetime,
    reason: str | None = None,
) -> Incident:
    """Date the start of impact (see `lifecycle.correct_fired_at` for what is refused); at
    most FIRED_MAX_BEFORE_DETECTION before the incident was detected."""
    incident = read_incident(session, ref)
    detected = incident.detected_at or incident.created_at
    earliest = _earliest_fired(detected)
    if earliest is not None and fired_at < earliest:
        days = FIRED_MAX_BEFORE_DETECTION.days
        raise UserInputError(
            f"{incident.ref}: fired_at {fired_at:%Y-%m-%d %H:%M} UTC is more than {days} days "
            f"before the incident was detected ({detected:%Y-%m-%d %H:%M} UTC); give the time "
            "impact began, in UTC"
        )
    return lifecycle.correct_fired_at(
        session, incident, fired_at=fired_at, actor=actor, at=at, reason=reason or None
    )


def _earliest_fired(detected: datetime | None) -> datetime | None:
    if detected is None:
        return None
    aware = detected if detected.tzinfo else detected.replace(tzinfo=UTC)
    return aware - FIRED_MAX_BEFORE_DETECTION


def add_note(
    session: Session, ref: str | int, *, text: str, actor: str, at: datetime, pinned: bool = False
) -> TimelineEvent:
    """A person's note on the timeline (it also acknowledges the incident)."""
    text = text.strip()
    if not text:
        raise UserInputError("a note needs text: note INC-42 <what you saw or did>")
    if len(text) > MAX_NOTE_CHARS:
        raise UserInputError(f"the note has {len(text)} characters; at most {MAX_NOTE_CHARS}")
    incident = read_incident(session, ref)
    return lifecycle.add_note(session, incident, at=at, actor=actor, text=text, pinned=pinned)


def set_pinned(
    session: Session,
    ref: str | int,
    *,
    event_id: int,
    pinned: bool,
    actor: str,
    at: datetime,
) -> TimelineEvent:
    """Pin an event into the curated story (the pinned postmortem) or take it out; who did it
    and when are kept on the event (`pinned_by`, `pinned_at`). Pinning twice changes nothing."""
    incident = read_incident(session, ref)
    event = store.get_event(session, incident_id=incident.id or 0, event_id=event_id)
    if event is None:
        raise NotFound(
            f"{incident.ref} has no timeline event #{event_id} "
            f"(`incident {incident.ref}` lists its events with their numbers)"
        )
    if event.pinned != pinned:
        event.pinned, event.pinned_by, event.pinned_at = pinned, actor, at
        session.add(event)
    return event


def resolve(session: Session, ref: str | int, *, actor: str, at: datetime, reason: str) -> Incident:
    """Resolve by hand, with the reason on the timeline; resolving twice is refused."""
    if not reason.strip():
        raise UserInputError("resolving needs a reason: resolve INC-42 --reason 'node replaced'")
    incident = read_incident(session, ref)
    if incident.state == IncidentState.RESOLVED:
        raise UserInputError(f"{incident.ref} is already resolved")
    return lifecycle.transition(
        session, incident, to=IncidentState.RESOLVED, at=at, actor=actor, reason=reason.strip()
    )
