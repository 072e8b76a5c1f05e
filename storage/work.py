"""The durable work queue: work that must happen, claimed by one worker at a time under a lease.

Work is recorded (`add_work`) in the same transaction as the fact that makes it necessary (the
stored alert that opened an incident, the decided approval, the checkpointed wait of a
verification), so a process that dies after answering never loses it.

A worker claims a row with one conditional UPDATE (`claim_work`): it wins only if the row is
still pending, due, and unowned or its owner's lease has expired. The database decides
(rowcount 1 wins, 0 loses), so this is safe across threads, processes and replicas on SQLite
and PostgreSQL alike; there is no in-memory lock. While it works, the owner extends its leases
(`heartbeat`); a row whose owner died stays claimed until its lease expires, then the next
claimer takes it over. Each claim counts an attempt: a row claimed `max_attempts` times without
finishing is given up (`give_up_exhausted`) so nothing stays running forever.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import bindparam, or_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, col, select

from storage.db import insert_unique
from storage.errors import InvalidValueError
from storage.tables import WorkItem

PENDING, DONE, FAILED = "pending", "done", "failed"
KINDS = frozenset({"triage", "resume", "timer"})
PARKED = datetime(9999, 1, 1, tzinfo=UTC)
"""`due_at` of work that waits for another row of its incident to finish (a storm's next run
waits for the run in flight): never claimable until `unpark` makes it due."""


def add_work(
    session: Session,
    *,
    key: str,
    kind: str,
    incident_id: int,
    run_id: str,
    at: datetime,
    due_at: datetime | None = None,
    payload: Mapping[str, Any] | None = None,
) -> tuple[WorkItem, bool]:
    """Record work under a unique key (in the caller's transaction). Returns (row, added):
    added=False when the same key was recorded before (the earlier row is returned)."""
    if kind not in KINDS:
        raise InvalidValueError(f"unknown work kind '{kind}' (kinds: {', '.join(sorted(KINDS))})")
    row = WorkItem(
        key=key,
        kind=kind,
        incident_id=incident_id,
        run_id=run_id,
        payload=dict(payload or {}),
        due_at=due_at or at,
        created_at=at,
    )
    return insert_unique(session, row, existing=lambda: get_work(session, key))


def add_works(
    session: Session, works: Sequence[Mapping[str, Any]], *, at: datetime
) -> dict[str, int]:
    """`add_work` for many rows in one statement (alert intake: a webhook's triage runs). Each
    mapping holds `key`, `kind`, `incident_id`, `run_id`, `payload` (and `due_at`, default
    `at`). A key recorded before is skipped by the database. Returns key -> id of the rows
    this call added. SQLite and PostgreSQL: one statement; others: `add_work` row by row."""
    if not works:
        return {}
    for work in works:
        if work["kind"] not in KINDS:
            raise InvalidValueError(
                f"unknown work kind '{work['kind']}' (kinds: {', '.join(sorted(KINDS))})"
            )
    dialect = session.get_bind().dialect.name
    if dialect not in ("sqlite", "postgresql"):
        added = [add_work(session, at=at, **work) for work in works]
        return {row.key: int(row.id or 0) for row, new in added if new}
    table: Any = WorkItem.__table__  # type: ignore[attr-defined]
    values = [
        {
            "state": PENDING,
            "attempts": 0,
            "owner": None,
            "lease_expires_at": None,
            "last_error": None,
            "finished_at": None,
            "created_at": at,
            **work,
            "due_at": work.get("due_at") or at,
            "payload": dict(work.get("payload") or {}),
        }
        for work in works
    ]
    insert = sqlite.insert if dialect == "sqlite" else postgresql.insert
    statement = insert(table).on_conflict_do_nothing().returning(table.c.id, table.c.key)
    return {key: int(i) for i, key in session.connection().execute(statement, values)}


def get_work(session: Session, key: str) -> WorkItem | None:
    """The work recorded under `key`, or None."""
    return session.exec(select(WorkItem).where(WorkItem.key == key)).first()


def _claimable(at: datetime, due_by: datetime | None = None) -> Any:
    """Pending, due by `due_by` (work time), and unowned or leased until before `at` (wall
    time; the two differ only on the simulated fleet, whose clock runs ahead)."""
    return _claimable_by(at, due_by if due_by is not None else at)


def _claimable_by(at: Any, due_by: Any) -> Any:
    """`_claimable`'s conditions for values or bound parameters."""
    return (
        col(WorkItem.state) == PENDING,
        col(WorkItem.due_at) <= due_by,
        or_(col(WorkItem.owner).is_(None), col(WorkItem.lease_expires_at) <= at),
    )


def claim_work(
    session: Session,
    *,
    work_id: int,
    owner: str,
    at: datetime,
    lease: timedelta,
    due_by: datetime | None = None,
) -> WorkItem | None:
    """Claim one row for `owner` until `at + lease`; None if another claimer holds it, it is
    not due, or it has finished. Only one concurrent claimer can win (a conditional UPDATE)."""
    values = {
        "work_id": work_id,
        "claimer": owner,
        "until": at + lease,
        "at": at,
        "due_by": due_by or at,
    }
    if session.connection().execute(_claim(), values).rowcount != 1:  # Core: no ORM sync
        return None
    return session.get(WorkItem, work_id, populate_existing=True)  # one read, as updated


@cache
def _claim() -> Any:
    """`claim_work`'s conditional UPDATE, built once (a triage claims on its critical path):
    the `_claimable` conditions with the times bound per call."""
    return (
        update(WorkItem)
        .where(
            col(WorkItem.id) == bindparam("work_id"),
            *_claimable_by(bindparam("at"), bindparam("due_by")),
        )
        .values(
            owner=bindparam("claimer"),
            lease_expires_at=bindparam("until"),
            attempts=col(WorkItem.attempts) + 1,
        )
    )


def list_claimable(
    session: Session,
    *,
    at: datetime,
    due_by: datetime | None = None,
    limit: int = 100,
    kinds: Sequence[str] = (),
) -> list[WorkItem]:
    """Due rows that nobody holds (or whose holder's lease expired), oldest due first."""
    statement = select(WorkItem).where(*_claimable(at, due_by))
    if kinds:
        statement = statement.where(col(WorkItem.kind).in_(list(kinds)))
    ordered = statement.order_by(col(WorkItem.due_at), col(WorkItem.id))
    return list(session.exec(ordered.limit(limit)))


def heartbeat(session: Session, *, owner: str, at: datetime, lease: timedelta) -> int:
    """Extend every pending lease `owner` holds to `at + lease`. Returns how many."""
    statement = (
        update(WorkItem)
        .where(col(WorkItem.owner) == owner, col(WorkItem.state) == PENDING)
        .values(lease_expires_at=at + lease)
    )
    return int(session.exec(statement).rowcount)


def release(session: Session, *, owner: str, work_ids: Sequence[int] | None = None) -> int:
    """Hand claimed, unfinished rows back (graceful shutdown): the next claimer may take them at
    once, and the attempt does not count. `work_ids` None: every row `owner` holds."""
    statement = update(WorkItem).where(col(WorkItem.owner) == owner, col(WorkItem.state) == PENDING)
    if work_ids is not None:
        statement = statement.where(col(WorkItem.id).in_(list(work_ids)))
    values = {"owner": None, "lease_expires_at": None, "attempts": col(WorkItem.attempts) - 1}
    return int(session.exec(statement.values(**values)).rowcount)


def finish_work(
    session: Session,
    *,
    work_id: int,
    owner: str,
    at: datetime,
    failed: bool = False,
    error: str | None = None,
) -> bool:
    """Mark a claimed row done (or failed). False if `owner` no longer holds it (its lease
    expired and another worker took it over): that worker's result stands."""
    values = {
        "work_id": work_id,
        "holder": owner,
        "ending": FAILED if failed else DONE,
        "at": at,
        "error": error,
    }
    return int(session.connection().execute(_finish(), values).rowcount) == 1  # no ORM sync


@cache
def _finish() -> Any:
    """`finish_work`'s conditional UPDATE, built once (every run ends with it)."""
    return (
        update(WorkItem)
        .where(col(WorkItem.id) == bindparam("work_id"), col(WorkItem.owner) == bindparam("holder"))
        .where(col(WorkItem.state) == PENDING)
        .values(
            state=bindparam("ending"),
            finished_at=bindparam("at"),
            lease_expires_at=None,
            last_error=bindparam("error"),
        )
    )



def exhausted(
    session: Session, *, at: datetime, max_attempts: int, due_by: datetime | None = None
) -> list[WorkItem]:
    """Claimable rows that were already claimed `max_attempts` times: their workers kept dying
    (or the work kept failing); taking them over again would loop forever."""
    statement = select(WorkItem).where(
        *_claimable(at, due_by), col(WorkItem.attempts) >= max_attempts
    )
    return list(session.exec(statement.order_by(col(WorkItem.id))))


def give_up(session: Session, *, work_id: int, at: datetime, error: str) -> bool:
    """Mark an unclaimed (or expired) row failed without running it."""
    statement = (
        update(WorkItem)
        .where(
            col(WorkItem.id) == work_id,
            col(WorkItem.state) == PENDING,
            or_(col(WorkItem.owner).is_(None), col(WorkItem.lease_expires_at) <= at),
        )
        .values(state=FAILED, finished_at=at, owner=None, lease_expires_at=None, last_error=error)
    )
    return int(session.exec(statement).rowcount) == 1


def open_work_for_run(session: Session, run_id: str) -> list[WorkItem]:
    """A run's pending work rows, oldest first."""
    statement = select(WorkItem).where(WorkItem.run_id == run_id, WorkItem.state == PENDING)
    return list(session.exec(statement.order_by(col(WorkItem.id))))


def list_work(session: Session, *, incident_id: int | None = None) -> list[WorkItem]:
    """Every work row (of one incident), oldest first."""
    statement = select(WorkItem)
    if incident_id is not None:
        statement = statement.where(WorkItem.incident_id == incident_id)
    return list(session.exec(statement.order_by(col(WorkItem.id))))


def open_resumption(session: Session, *, incident_id: int) -> WorkItem | None:
    """An incident's unfinished `resume` work (a decided approval whose run was not driven to
    its end), oldest first; None if it has none."""
    statement = select(WorkItem).where(
        WorkItem.incident_id == incident_id, WorkItem.state == PENDING, WorkItem.kind == "resume"
    )
    return session.exec(statement.order_by(col(WorkItem.id))).first()


def open_triage(session: Session, *, incident_id: int) -> list[WorkItem]:
    """An incident's pending triage rows (claimed or not, parked or due), oldest first."""
    statement = select(WorkItem).where(
        WorkItem.incident_id == incident_id, WorkItem.state == PENDING, WorkItem.kind == "triage"
    )
    return list(session.exec(statement.order_by(col(WorkItem.id))))


def last_triage(session: Session, *, incident_id: int) -> WorkItem | None:
    """The incident's most recently recorded triage row, in any state."""
    statement = select(WorkItem).where(
        WorkItem.incident_id == incident_id, WorkItem.kind == "triage"
    )
    return session.exec(statement.order_by(col(WorkItem.id).desc()).limit(1)).first()


def replace_unclaimed_payload(
    session: Session, *, work_id: int, payload: Mapping[str, Any]
) -> bool:
    """Give a pending row nobody has claimed yet a new payload (its worker reads the payload
    when it claims the row). False when it was claimed or finished meanwhile."""
    statement = (
        update(WorkItem)
        .where(
            col(WorkItem.id) == work_id,
            col(WorkItem.state) == PENDING,
            col(WorkItem.owner).is_(None),
        )
        .values(payload=dict(payload))
    )
    return int(session.exec(statement).rowcount) == 1


def unpark(session: Session, *, incident_id: int, at: datetime) -> list[int]:
    """Make an incident's parked rows due at `at`; returns their ids."""
    found = session.connection().execute(_parked(), {"incident_id": incident_id})
    ids = [work_id for (work_id,) in found if work_id is not None]
    if ids:
        session.connection().execute(
            update(WorkItem).where(col(WorkItem.id).in_(ids)).values(due_at=at)
        )
    return ids


@cache
def _parked() -> Any:
    """`unpark`'s read of an incident's parked rows, built once (every triage ends with it)."""
    return select(col(WorkItem.id)).where(
        col(WorkItem.incident_id) == bindparam("incident_id"),
        col(WorkItem.state) == PENDING,
        col(WorkItem.due_at) == PARKED,
    )
