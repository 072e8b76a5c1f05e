"""What people add to a postmortem, recorded once for the CLI and Slack alike: an action item
with an owner and a due date, and the text of a prose section (which replaces the draft and is
never overwritten by one). Each goes on the timeline too. The caller commits.
"""

from __future__ import annotations

from datetime import date, datetime

from sqlmodel import Session

from bot.errors import UserInputError
from bot.incidents import lifecycle
from bot.incidents.drafting import PROSE_SECTIONS
from bot.incidents.timeline import EventKind
from storage import postmortem_notes as notes_store
from storage.tables import Incident

MAX_TEXT = 4000
"""Most characters of an action item or a section (a postmortem is read, not scrolled)."""


def parse_due(value: str | None) -> date | None:
    """A due date `YYYY-MM-DD`; None for none given."""
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise UserInputError(f"due date '{value}' is not YYYY-MM-DD (e.g. 2026-12-01)") from exc


def add_action_item(
    session: Session,
    incident: Incident,
    *,
    owner: str,
    text: str,
    due: date | None,
    actor: str,
    at: datetime,
) -> None:
    """Record an action item: `owner` (`@alice`, a Slack id) must do `text` by `due`."""
    text, owner = _checked(text, "action item"), owner.strip()
    if not owner:
        raise UserInputError("an action item needs an owner (e.g. @alice)")
    notes_store.add_action_item(
        session, incident_id=incident.id or 0, text=text, owner=owner, due=due, actor=actor, at=at
    )
    by = f", due {due.isoformat()}" if due else ""
    lifecycle.record(
        session,
        incident_id=incident.id or 0,
        kind=EventKind.NOTE,
        at=at,
        actor=actor,
        summary=f"Action item for {owner}{by}: {text}",
        payload={"action_item": {"owner": owner, "text": text, "due": due and due.isoformat()}},
    )


def write_section(
    session: Session, incident: Incident, *, section: str, text: str, actor: str, at: datetime
) -> None:
    """Store a person's text for a prose section (it replaces the draft from now on)."""
    if section not in PROSE_SECTIONS:
        raise UserInputError(
            f"unknown postmortem section '{section}' (sections: {', '.join(PROSE_SECTIONS)})"
        )
    text = _checked(text, f"section {section}")
    notes_store.write_section(
        session, incident_id=incident.id or 0, section=section, text=text, actor=actor, at=at
    )
    lifecycle.record(
        session,
        incident_id=incident.id or 0,
        kind=EventKind.NOTE,
        at=at,
        actor=actor,
        summary=f"Postmortem section {section} written by {actor}",
        payload={"section": section},
    )


def _checked(text: str, what: str) -> str:
    text = " ".join(text.split())
    if not text:
        raise UserInputError(f"{what}: no text given")
    if len(text) > MAX_TEXT:
        raise UserInputError(f"{what}: {len(text)} characters; at most {MAX_TEXT}")
    return text
