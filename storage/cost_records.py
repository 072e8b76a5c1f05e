"""The rows behind an incident's GPU-hours, read as the few columns the arithmetic uses
(bot/incidents/costing.py): its actions (what, on which node, how it ended, when) and the
payloads of its timeline events of one kind (the approval requests). Column reads through the
session (it flushes first, as an entity read does), with no ORM objects built and no other
event's payload decoded. Keyword-only, one session passed in, no commits here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, select
from sqlmodel import Session, col

from storage.tables import ActionRow, TimelineEvent


class ActionFacts(NamedTuple):
    """What an action's row says of a removal (the fields of `ActionRow` of the same names)."""

    action: str
    target: str
    status: str
    result: dict[str, Any]
    finished_at: datetime | None


class EventFacts(NamedTuple):
    kind: str
    payload: dict[str, Any]


_ACTIONS = (
    select(
        col(ActionRow.action), col(ActionRow.target), col(ActionRow.status),
        col(ActionRow.result), col(ActionRow.finished_at),
    )
    .where(col(ActionRow.incident_id) == bindparam("incident_id"))
    .order_by(col(ActionRow.id))
)  # fmt: skip
_EVENTS = (
    select(col(TimelineEvent.kind), col(TimelineEvent.payload))
    .where(
        col(TimelineEvent.incident_id) == bindparam("incident_id"),
        col(TimelineEvent.kind) == bindparam("kind"),
    )
    .order_by(col(TimelineEvent.at), col(TimelineEvent.id))
)


def action_facts(session: Session, *, incident_id: int) -> list[ActionFacts]:
    """The incident's actions in claim order (as `actions.list_actions`), five columns each."""
    found = session.execute(_ACTIONS, {"incident_id": incident_id})
    return [ActionFacts(*row) for row in found]


def event_facts(session: Session, *, incident_id: int, kind: str) -> list[EventFacts]:
    """The incident's timeline events of `kind` in time order (as `incidents.list_events`)."""
    found = session.execute(_EVENTS, {"incident_id": incident_id, "kind": kind})
    return [EventFacts(*row) for row in found]
