"""Safety-limit state: the lock that serializes the execution-time limit check, the circuit
breaker, pause requests, storm cooldowns, and the counts of recent actions the limits read.

Keyword-only query functions over `storage/tables.py`. Every count is read inside the
transaction that claims the action, after `lock_limits`: on PostgreSQL a transaction-scoped
advisory lock, on SQLite the write lock every transaction takes with `BEGIN IMMEDIATE`
(storage/db.py). So two replicas never both pass a check that only one of them may pass.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import func, or_, text
from sqlmodel import Session, col, select

from storage.tables import ActionRow, PauseRequest, SafetyBreaker, SafetyStorm

LIMITS_LOCK_KEY = 0x67707573616665  # "gpusafe"
"""The PostgreSQL advisory lock every limit check holds until its transaction ends."""
BREAKER = "removals"
RUNNING = "running"
ACTED = ("running", "succeeded", "failed")
"""Statuses of actions that were let through (failed ones may have changed something)."""


def lock_limits(session: Session) -> None:
    """Serialize limit checks across processes until this transaction ends."""
    if session.get_bind().dialect.name == "postgresql":
        session.connection().execute(
            text("SELECT pg_advisory_xact_lock(:key)"), {"key": LIMITS_LOCK_KEY}
        )
    else:  # SQLite: the first statement begins the IMMEDIATE transaction and takes the lock
        session.connection().exec_driver_sql("SELECT 1")


# -- counts of recent actions ---------------------------------------------------------------------


def count_actions_since(
    session: Session, *, since: datetime, exempt: Collection[str], exclude_key: str
) -> int:
    """Actions let through since `since`, except the `exempt` kinds and the one under
    `exclude_key` (the action being checked, when it is taken over)."""
    statement = (
        select(func.count())
        .select_from(ActionRow)
        .where(
            col(ActionRow.started_at) >= since,
            col(ActionRow.status).in_(ACTED),
            col(ActionRow.action).not_in(list(exempt)),
            col(ActionRow.idempotency_key) != exclude_key,
        )
    )
    return int(session.exec(statement).one())


def removed_targets_since(
    session: Session, *, since: datetime, actions: Collection[str], exclude_key: str
) -> set[str]:
    """Nodes that `actions` (capacity removals) took out, or are taking out, since `since`: the
    circuit breaker's count. An `already_done` removal took nothing out and is not counted."""
    statement = select(ActionRow.target).where(
        col(ActionRow.started_at) >= since,
        col(ActionRow.action).in_(list(actions)),
        col(ActionRow.idempotency_key) != exclude_key,
        or_(
            col(ActionRow.status) == RUNNING,
            (col(ActionRow.status).in_(("succeeded", "failed")))
            & (col(ActionRow.outcome) != "already_done"),
        ),
    )
    return set(session.exec(statement))


def in_flight_targets(
    session: Session,
    *,
    actions: Collection[str],
    at: datetime,
    finished_since: datetime,
    exclude_key: str,
) -> set[str]:
    """Nodes a capacity removal is taking out right now (claimed, its worker's lease alive) or
    finished taking out since `finished_since` (the cluster read the check uses may predate it).
    The check counts them as out even when the cluster does not show them so yet."""
    statement = select(ActionRow.target).where(
        col(ActionRow.action).in_(list(actions)),
        col(ActionRow.idempotency_key) != exclude_key,
        or_(
            (col(ActionRow.status) == RUNNING)
            & or_(
                col(ActionRow.lease_expires_at).is_(None),
                col(ActionRow.lease_expires_at) > at,
            ),
            (col(ActionRow.status) == "succeeded")
            & (col(ActionRow.finished_at) >= finished_since),
        ),
    )
    return set(session.exec(statement))


# -- the circuit breaker --------------------------------------------------------------------------


def read_breaker(session: Session) -> SafetyBreaker:
    """The breaker's row (a closed breaker that never tripped when there is none)."""
    row = session.get(SafetyBreaker, BREAKER)
    return row if row is not None else SafetyBreaker(name=BREAKER)


def trip_breaker(session: Session, *, at: datetime, detail: str) -> SafetyBreaker:
    """Open the breaker (an open breaker keeps its first trip)."""
    row = session.get(SafetyBreaker, BREAKER)
    if row is None:
        row = SafetyBreaker(name=BREAKER)
    if row.state != "open":
        row.state, row.tripped_at, row.trip_detail = "open", at, detail
    session.add(row)
    session.flush()
    return row


def reset_breaker(session: Session, *, at: datetime, actor: str, reason: str) -> SafetyBreaker:
    """Close the breaker; removals before `at` stop counting towards it."""
    row = session.get(SafetyBreaker, BREAKER)
    if row is None:
        row = SafetyBreaker(name=BREAKER)
    row.state, row.reset_at, row.reset_by, row.reset_reason = "closed", at, actor, reason
    session.add(row)
    session.flush()
    return row


# -- pause requests -------------------------------------------------------------------------------


def active_pauses(session: Session) -> list[PauseRequest]:
    """Pause requests in force, oldest first."""
    statement = select(PauseRequest).where(col(PauseRequest.resumed_at).is_(None))
    return list(session.exec(statement.order_by(col(PauseRequest.id))))


def add_pause(session: Session, *, reason: str, actor: str, at: datetime) -> PauseRequest:
    row = PauseRequest(reason=reason, requested_by=actor, requested_at=at)
    session.add(row)
    session.flush()
    return row


def end_pauses(session: Session, *, actor: str, at: datetime) -> list[PauseRequest]:
    """End every pause request in force; returns them."""
    ended = active_pauses(session)
    for row in ended:
        row.resumed_at, row.resumed_by = at, actor
        session.add(row)
    session.flush()
    return ended


# -- storm cooldowns ------------------------------------------------------------------------------


def storms_in(session: Session, scopes: Collection[str]) -> list[SafetyStorm]:
    if not scopes:
        return []
    statement = select(SafetyStorm).where(col(SafetyStorm.scope).in_(list(scopes)))
    return list(session.exec(statement.order_by(col(SafetyStorm.scope))))


def record_storm(session: Session, *, scope: str, at: datetime, detail: str) -> SafetyStorm:
    """Note that a capacity limit blocked a removal in `scope` at `at`."""
    row = session.get(SafetyStorm, scope)
    if row is None:
        row = SafetyStorm(scope=scope, started_at=at, last_blocked_at=at, detail=detail)
    else:
        row.last_blocked_at, row.detail = max(row.last_blocked_at, at), detail
    session.add(row)
    session.flush()
    return row
