"""Action ledger queries: exactly-once execution through a unique idempotency key.

`claim_action` inserts a `running` row under the key; the database's UNIQUE constraint decides
who claimed it, so a resumed run, a retried node or another replica finds the existing row
(claimed=False) and reuses its result instead of acting twice. A claim may carry a lease: a
`running` row whose lease expired (its worker crashed) can be claimed again, once.

A claim may carry a safety `check` (bot/actions/guarding.py): it runs under the limits lock
(storage/safety.py), in the claim's transaction, whenever the claim would start the action
(a new key, or a takeover); when it returns a result, the key is recorded `blocked` with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, col, select

from storage.db import insert_unique
from storage.errors import ActionNotRunningError, InvalidValueError, RecordNotFoundError
from storage.runs import get_run
from storage.safety import lock_limits
from storage.tables import ActionRow, RunbookRun

RUNNING = "running"
BLOCKED = "blocked"
FINISHED_STATUSES = ("succeeded", "failed", "skipped", "dry_run")

Check = Callable[[Session], Mapping[str, Any] | None]
"""A safety check run inside the claim: a blocked result, or None when the action may run."""


def get_action(session: Session, key: str) -> ActionRow | None:
    """The action claimed under this idempotency key, or None."""
    statement = select(ActionRow).where(ActionRow.idempotency_key == key)
    return session.exec(statement).first()


def claim_action(
    session: Session,
    *,
    key: str,
    run_id: str,
    step_id: str,
    action: str,
    target: str,
    params: Mapping[str, Any],
    at: datetime,
    incident_id: int | None = None,
    lease: timedelta | None = None,
    check: Check | None = None,
) -> tuple[ActionRow, bool]:
    """Claim the right to run an action. Returns (row, claimed).

    claimed=False means someone already holds or finished this key, or `check` blocked it
    (status `blocked`): do not act, use the row's status and result. `incident_id` defaults
    to the run's incident.
    """
    if incident_id is None:
        run = get_run(session, run_id)
        if run is None:
            raise RecordNotFoundError(f"cannot claim action '{action}': no runbook run '{run_id}'")
        incident_id = run.incident_id
    row = ActionRow(
        run_id=run_id,
        incident_id=incident_id,
        step_id=step_id,
        action=action,
        target=target,
        params=dict(params),
        idempotency_key=key,
        status=RUNNING,
        started_at=at,
        lease_expires_at=at + lease if lease is not None else None,
    )
    if check is not None:
        lock_limits(session)
        existing = get_action(session, key)
        if existing is None or _lease_expired(existing, at):
            blocked = check(session)
            if blocked is not None:
                return _block(session, existing or row, blocked, at=at), False
    claimed_row, claimed = insert_unique(session, row, existing=lambda: get_action(session, key))
    if claimed or not _lease_expired(claimed_row, at):
        return claimed_row, claimed
    return claimed_row, _take_over(session, claimed_row, at=at, lease=lease)


def _block(
    session: Session, row: ActionRow, result: Mapping[str, Any], *, at: datetime
) -> ActionRow:
    """Record the key as blocked: a new row, or the expired claim of a dead worker."""
    row.status, row.outcome, row.result = BLOCKED, BLOCKED, dict(result)
    row.finished_at, row.lease_expires_at = at, None
    session.add(row)
    session.flush()
    return row


def _lease_expired(row: ActionRow, at: datetime) -> bool:
    return row.status == RUNNING and row.lease_expires_at is not None and row.lease_expires_at <= at


def _take_over(session: Session, row: ActionRow, *, at: datetime, lease: timedelta | None) -> bool:
    """Claim a running row whose lease expired. The old lease value fences concurrent takers."""
    statement = (
        update(ActionRow)
        .where(
            col(ActionRow.id) == row.id,
            col(ActionRow.status) == RUNNING,
            col(ActionRow.lease_expires_at) == row.lease_expires_at,
        )
        .values(started_at=at, lease_expires_at=at + lease if lease is not None else None)
    )
    changed = session.exec(statement).rowcount
    session.refresh(row)
    return changed == 1


def finish_action(
    session: Session,
    *,
    key: str,
    status: str,
    at: datetime,
    result: Mapping[str, Any] | None = None,
    outcome: str | None = None,
) -> ActionRow:
    """Record how a claimed action ended. Refuses an action that is not running."""
    if status not in FINISHED_STATUSES:
        raise InvalidValueError(
            f"cannot finish an action as '{status}' (statuses: {', '.join(FINISHED_STATUSES)})"
        )
    row = get_action(session, key)
    if row is None:
        raise RecordNotFoundError(f"no action was claimed under key {key}")
    statement = (
        update(ActionRow)
        .where(col(ActionRow.id) == row.id, col(ActionRow.status) == RUNNING)
        .values(
            status=status,
            outcome=outcome,
            result=dict(result or {}),
            finished_at=at,
            lease_expires_at=None,
        )
    )
    changed = session.exec(statement).rowcount
    session.refresh(row)
    if changed != 1:
        raise ActionNotRunningError(
            f"action '{row.action}' on {row.target} (step '{row.step_id}') already finished "
            f"as {row.status}; it cannot be finished again"
        )
    return row


def list_actions(
    session: Session, *, incident_id: int | None = None, run_id: str | None = None
) -> list[ActionRow]:
    """Actions of an incident and/or a run, in claim order."""
    statement = select(ActionRow)
    if incident_id is not None:
        statement = statement.where(ActionRow.incident_id == incident_id)
    if run_id is not None:
        statement = statement.where(ActionRow.run_id == run_id)
    return list(session.exec(statement.order_by(col(ActionRow.id))))


def succeeded_results(session: Session, *, incident_id: int, action: str) -> list[dict[str, Any]]:
    """The results of the incident's runs' succeeded `action` actions, runs oldest first and
    each run's in claim order: one read of one column (no ORM rows)."""
    statement = (
        select(ActionRow.result)
        .join(RunbookRun, col(RunbookRun.id) == col(ActionRow.run_id))
        .where(
            col(RunbookRun.incident_id) == incident_id,
            col(ActionRow.action) == action,
            col(ActionRow.status) == "succeeded",
        )
        .order_by(col(RunbookRun.started_at), col(RunbookRun.id), col(ActionRow.id))
    )
    return [dict(result or {}) for result in session.exec(statement)]


def expire_leases(session: Session, *, run_id: str, at: datetime) -> int:
    """End the leases of a run's `running` actions now: their worker died (its run was taken
    over), so the next claim under the same key re-runs them (idempotent actions report
    `already_done`). Returns how many."""
    statement = (
        update(ActionRow)
        .where(col(ActionRow.run_id) == run_id, col(ActionRow.status) == RUNNING)
        .values(lease_expires_at=at)
    )
    return int(session.exec(statement).rowcount)
