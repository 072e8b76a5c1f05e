"""Chat message coordinates (keyword-only queries, one session passed in, no commits here).

The Slack presentation posts one live message per run and edits it in place. Its channel and
timestamp are stored here, keyed to the incident and run, so any replica or a restarted process
finds the same message again instead of posting a second one.
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session, col, select

from storage.db import insert_unique
from storage.tables import ChatMessage


def save_message(
    session: Session,
    *,
    incident_id: int,
    channel: str,
    ts: str,
    at: datetime,
    run_id: str | None = None,
    kind: str = "triage",
) -> ChatMessage:
    """Record a posted message; saving the same (channel, ts) again returns the stored row."""
    row = ChatMessage(
        incident_id=incident_id, run_id=run_id, channel=channel, ts=ts, kind=kind, posted_at=at
    )
    message, _created = insert_unique(
        session, row, existing=lambda: find_message(session, channel=channel, ts=ts)
    )
    return message


def bind_run(session: Session, *, channel: str, ts: str, run_id: str) -> ChatMessage | None:
    """Attach the run a message shows, once the run exists. None if the message is unknown."""
    message = find_message(session, channel=channel, ts=ts)
    if message is not None and message.run_id != run_id:
        message.run_id = run_id
        session.add(message)
        session.flush()
    return message


def find_message(session: Session, *, channel: str, ts: str) -> ChatMessage | None:
    """The message at (channel, ts), if stored."""
    statement = select(ChatMessage).where(ChatMessage.channel == channel, ChatMessage.ts == ts)
    return session.exec(statement).first()


def message_for_run(session: Session, run_id: str) -> ChatMessage | None:
    """The live message of a run (the first posted, if several)."""
    statement = select(ChatMessage).where(ChatMessage.run_id == run_id)
    return session.exec(statement.order_by(col(ChatMessage.id))).first()


def messages_for_incident(
    session: Session, incident_id: int, *, kind: str = "triage"
) -> list[ChatMessage]:
    """Every message of one kind posted for an incident, oldest first."""
    statement = select(ChatMessage).where(
        ChatMessage.incident_id == incident_id, ChatMessage.kind == kind
    )
    return list(session.exec(statement.order_by(col(ChatMessage.id))))
