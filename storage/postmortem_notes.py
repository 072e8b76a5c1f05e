"""What people add to a postmortem: action items (owner, due date) and the prose sections they
write. Keyword-only queries, one session passed in, no commits here.

A written section is stored whole and replaced only by another person's writing: drafts are
computed at render time (bot/incidents/drafting.py) and never stored, so they cannot overwrite it.
"""

from __future__ import annotations

from datetime import date, datetime

from sqlmodel import Session, col, select

from storage.tables import ActionItemRow, ProseSectionRow


def add_action_item(
    session: Session,
    *,
    incident_id: int,
    text: str,
    owner: str,
    due: date | None,
    actor: str,
    at: datetime,
) -> ActionItemRow:
    row = ActionItemRow(
        incident_id=incident_id, text=text, owner=owner, due=due, created_by=actor, created_at=at
    )
    session.add(row)
    session.flush()
    return row


def list_action_items(session: Session, *, incident_id: int) -> list[ActionItemRow]:
    statement = select(ActionItemRow).where(ActionItemRow.incident_id == incident_id)
    return list(session.exec(statement.order_by(col(ActionItemRow.id))))


def write_section(
    session: Session, *, incident_id: int, section: str, text: str, actor: str, at: datetime
) -> ProseSectionRow:
    """Store (or replace) a person's text for one section."""
    statement = select(ProseSectionRow).where(
        ProseSectionRow.incident_id == incident_id, ProseSectionRow.section == section
    )
    row = session.exec(statement).first() or ProseSectionRow(
        incident_id=incident_id, section=section, text=text, written_by=actor, written_at=at
    )
    row.text, row.written_by, row.written_at = text, actor, at
    session.add(row)
    session.flush()
    return row


def written_sections(session: Session, *, incident_id: int) -> dict[str, ProseSectionRow]:
    statement = select(ProseSectionRow).where(ProseSectionRow.incident_id == incident_id)
    return {row.section: row for row in session.exec(statement)}
