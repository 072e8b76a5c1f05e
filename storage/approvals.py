"""Approval queries (keyword-only, one session passed in, no commits here).

One approval per (run, step), enforced by a unique constraint, so a re-run approval node or a
second replica finds the existing request. A decision is a conditional update from `pending`
(`record_decision`), so two people clicking at once cannot both decide; an approval past its
expiry can be rejected or expired but never approved. A person's decision reads the rows once
(`list_approvals`) and decides on what it read (bot/engine/approving.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session, col, select

from storage.db import insert_unique
from storage.errors import (
    ApprovalExpiredError,
    ApprovalNotPendingError,
    InvalidValueError,
    RecordNotFoundError,
)
from storage.tables import ApprovalRow

PENDING = "pending"
DECISIONS = ("approved", "rejected", "expired")


def request_approval(
    session: Session,
    *,
    run_id: str,
    incident_id: int,
    step_id: str,
    payload: Mapping[str, Any],
    at: datetime,
    expires_at: datetime,
) -> ApprovalRow:
    """Record a pending approval for a run step; if one exists already, return it unchanged."""
    row = ApprovalRow(
        run_id=run_id,
        incident_id=incident_id,
        step_id=step_id,
        state=PENDING,
        requested_at=at,
        expires_at=expires_at,
        payload=dict(payload),
    )
    approval, _created = insert_unique(
        session,
        row,
        existing=lambda: get_approval_for_step(session, run_id=run_id, step_id=step_id),
    )
    return approval


def get_approval(session: Session, approval_id: int) -> ApprovalRow | None:
    """The approval with this id, or None."""
    return session.get(ApprovalRow, approval_id)


def get_approval_for_step(session: Session, *, run_id: str, step_id: str) -> ApprovalRow | None:
    """The approval requested by one step of one run, whatever its state."""
    statement = select(ApprovalRow).where(
        ApprovalRow.run_id == run_id, ApprovalRow.step_id == step_id
    )
    return session.exec(statement).first()


def pending_approval_for(
    session: Session, *, run_id: str | None = None, incident_id: int | None = None
) -> ApprovalRow | None:
    """The oldest pending approval of a run, or of an incident. Give exactly one of the two."""
    if (run_id is None) == (incident_id is None):
        raise TypeError("pending_approval_for() needs exactly one of run_id= or incident_id=")
    statement = select(ApprovalRow).where(ApprovalRow.state == PENDING)
    if run_id is not None:
        statement = statement.where(ApprovalRow.run_id == run_id)
    else:
        statement = statement.where(ApprovalRow.incident_id == incident_id)
    statement = statement.order_by(col(ApprovalRow.requested_at), col(ApprovalRow.id))
    return session.exec(statement).first()


def list_pending(session: Session) -> list[ApprovalRow]:
    """Every approval still waiting for a decision, oldest first."""
    statement = select(ApprovalRow).where(ApprovalRow.state == PENDING)
    return sorted(session.exec(statement), key=lambda row: row.requested_at)


def list_approvals(
    session: Session, *, incident_id: int | None = None, run_id: str | None = None
) -> list[ApprovalRow]:
    """Every approval of an incident, or of a run, oldest first (one SELECT). Give exactly one
    of the two."""
    if (run_id is None) == (incident_id is None):
        raise TypeError("list_approvals() needs exactly one of run_id= or incident_id=")
    statement = select(ApprovalRow)
    if run_id is not None:
        statement = statement.where(ApprovalRow.run_id == run_id)
    else:
        statement = statement.where(ApprovalRow.incident_id == incident_id)
    statement = statement.order_by(col(ApprovalRow.requested_at), col(ApprovalRow.id))
    return list(session.exec(statement))


def decide_approval(
    session: Session,
    *,
    approval_id: int,
    state: str,
    actor: str,
    reason: str | None = None,
    at: datetime,
) -> ApprovalRow:
    """Approve, reject or expire a pending approval, read here by its id.

    Raises ApprovalNotPendingError if it was already decided (by anyone, including a
    concurrent request), and ApprovalExpiredError when approving at or after its expiry.
    """
    row = get_approval(session, approval_id)
    if row is None:
        raise RecordNotFoundError(f"no approval #{approval_id}")
    if not record_decision(session, approval=row, state=state, actor=actor, reason=reason, at=at):
        session.refresh(row)  # lost: read who decided it, to say so
        raise _not_pending(row)
    for name, value in (("state", state), ("actor", actor), ("reason", reason), ("decided_at", at)):
        set_committed_value(row, name, value)  # what the UPDATE wrote; no read back
    return row


def record_decision(
    session: Session,
    *,
    approval: ApprovalRow,
    state: str,
    actor: str,
    reason: str | None = None,
    at: datetime,
) -> bool:
    """Decide `approval` (a row the caller read) by one conditional UPDATE from `pending`, and
    read nothing: True when this call decided it, False when someone decided it first (here or
    on another replica; the caller reads who, if it must say so).

    Raises ApprovalNotPendingError when the row read was no longer pending, and
    ApprovalExpiredError when approving at or after its expiry.
    """
    if state not in DECISIONS:
        raise InvalidValueError(
            f"cannot set an approval to '{state}' (decisions: {', '.join(DECISIONS)})"
        )
    if approval.state != PENDING:
        raise _not_pending(approval)
    if state == "approved" and at >= approval.expires_at:
        raise ApprovalExpiredError(
            f"{_describe(approval)} expired at {approval.expires_at:%Y-%m-%d %H:%M:%S} UTC and "
            "can no longer be approved; start a new run to get a fresh approval request"
        )
    statement = (
        update(ApprovalRow)
        .where(col(ApprovalRow.id) == approval.id, col(ApprovalRow.state) == PENDING)
        .values(state=state, actor=actor, reason=reason, decided_at=at)
        .execution_options(synchronize_session=False)
    )
    return bool(session.exec(statement).rowcount == 1)


def expire_approvals(session: Session, *, at: datetime) -> list[ApprovalRow]:
    """Mark every pending approval whose expiry is at or before `at` as expired."""
    statement = select(ApprovalRow).where(
        ApprovalRow.state == PENDING, col(ApprovalRow.expires_at) <= at
    )
    expired: list[ApprovalRow] = []
    for row in list(session.exec(statement)):
        if row.id is None:
            continue
        try:
            expired.append(
                decide_approval(session, approval_id=row.id, state="expired", actor="bot", at=at)
            )
        except ApprovalNotPendingError:
            continue  # decided concurrently: nothing to expire
    return expired


def _describe(row: ApprovalRow) -> str:
    return f"approval #{row.id} (run {row.run_id[:8]}, step '{row.step_id}')"


def _not_pending(row: ApprovalRow) -> ApprovalNotPendingError:
    who = f" by {row.actor}" if row.actor else ""
    when = f" at {row.decided_at:%Y-%m-%d %H:%M:%S} UTC" if row.decided_at else ""
    return ApprovalNotPendingError(f"{_describe(row)} was already {row.state}{who}{when}")
