"""Incident and timeline queries (keyword-only, one session passed in, no commits here).

The state machine and timestamp rules live in `bot.incidents.lifecycle`; this module only reads
and writes rows. At most one incident per group key is open at a time, enforced by a partial
unique index, so two replicas receiving the same alert cannot both open an incident.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import bindparam
from sqlalchemy import select as sa_select
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, col, func, select

from storage.db import insert_unique
from storage.errors import IncidentAlreadyOpenError
from storage.refs import parse_incident_ref as parse_incident_ref  # re-exported
from storage.tables import Incident, TimelineEvent

RESOLVED = "resolved"
CLOSED = ("resolved", "failed")
"""States that free an incident's group key (storage/tables.py OPEN_INCIDENT_PREDICATE)."""
_INCIDENTS: Any = Incident.__table__  # type: ignore[attr-defined]


def group_key(*, runbook: str, target: str) -> str:
    """The grouping key of an incident: one open incident per (runbook, target)."""
    return f"{runbook}:{target}"


def create_incident(
    session: Session,
    *,
    runbook: str,
    target: str,
    target_kind: str,
    severity: str,
    title: str,
    at: datetime,
    fired_at: datetime | None = None,
    detected_at: datetime | None = None,
) -> Incident:
    """Insert an open incident. Raises IncidentAlreadyOpenError if its group already has one."""
    key = group_key(runbook=runbook, target=target)
    row = Incident(
        runbook=runbook,
        target=target,
        target_kind=target_kind,
        severity=severity,
        title=title,
        state="open",
        group_key=key,
        fired_at=fired_at,
        fired_at_source=None if fired_at is None else "alert",
        detected_at=detected_at,
        created_at=at,
    )
    incident, created = insert_unique(
        session, row, existing=lambda: find_open_incident(session, group_key=key)
    )
    if not created:
        raise IncidentAlreadyOpenError(key, incident_id=incident.id)
    return incident


def get_incident(session: Session, ref: str | int) -> Incident | None:
    """The incident named by `ref` (INC-7, inc-7, 7), or None if there is no such incident."""
    incident_id = parse_incident_ref(ref)
    return None if incident_id is None else session.get(Incident, incident_id)


def find_open_incident(session: Session, group_key: str) -> Incident | None:
    """The open (neither resolved nor failed) incident for a group key, if any."""
    found: Incident | None = session.exec(_open_by_key(), params={"group_key": group_key}).first()
    return found


@cache
def _open_by_key() -> Any:
    """`find_open_incident`'s query (built once: intake asks it of every storm check)."""
    statement = select(Incident).where(
        Incident.group_key == bindparam("group_key"), col(Incident.state).not_in(CLOSED)
    )
    return statement.order_by(col(Incident.id).desc())


def list_incidents(session: Session, *, open_only: bool = False, limit: int = 50) -> list[Incident]:
    """The newest incidents first."""
    statement = select(Incident)
    if open_only:
        statement = statement.where(Incident.state != RESOLVED)
    return list(session.exec(statement.order_by(col(Incident.id).desc()).limit(limit)))


def filter_incidents(
    session: Session,
    *,
    states: Collection[str] = (),
    runbook: str | None = None,
    layer: str | None = None,
    limit: int = 50,
) -> list[Incident]:
    """The newest incidents first, narrowed to any of `states`, one runbook and one layer."""
    statement = select(Incident)
    if states:
        statement = statement.where(col(Incident.state).in_(list(states)))
    if runbook is not None:
        statement = statement.where(Incident.runbook == runbook)
    if layer is not None:
        statement = statement.where(Incident.layer == layer)
    return list(session.exec(statement.order_by(col(Incident.id).desc()).limit(limit)))


def count_by_state(session: Session) -> dict[str, int]:
    """How many incidents are in each state (states with none are absent)."""
    statement = select(Incident.state, func.count()).group_by(col(Incident.state))
    return {state: int(count) for state, count in session.exec(statement)}


def list_resolved(
    session: Session, *, since: datetime, until: datetime | None = None
) -> list[Incident]:
    """Incidents resolved in [since, until), oldest first (for MTTR summaries)."""
    statement = select(Incident).where(col(Incident.resolved_at) >= since)
    # checks (nothing found) and failed incidents (no run finished) have no MTTR figures
    statement = statement.where(Incident.kind == "incident")
    if until is not None:
        statement = statement.where(col(Incident.resolved_at) < until)
    return list(session.exec(statement.order_by(col(Incident.resolved_at), col(Incident.id))))


def append_event(
    session: Session,
    *,
    incident_id: int,
    at: datetime,
    kind: str,
    actor: str,
    summary: str,
    payload: Mapping[str, Any] | None = None,
    pinned: bool = False,
    run_id: str | None = None,
    step_id: str | None = None,
) -> TimelineEvent:
    """Append one event to an incident's timeline."""
    event = TimelineEvent(
        incident_id=incident_id,
        at=at,
        kind=str(kind),
        actor=actor,
        summary=summary,
        payload=dict(payload or {}),
        pinned=pinned,
        run_id=run_id,
        step_id=step_id,
    )
    session.add(event)
    session.flush()
    return event


def list_events(
    session: Session, incident_id: int, *, pinned_only: bool = False
) -> list[TimelineEvent]:
    """An incident's timeline in time order (insertion order among equal times)."""
    statement = select(TimelineEvent).where(TimelineEvent.incident_id == incident_id)
    if pinned_only:
        statement = statement.where(col(TimelineEvent.pinned).is_(True))
    return list(session.exec(statement.order_by(col(TimelineEvent.at), col(TimelineEvent.id))))


def get_event(session: Session, *, incident_id: int, event_id: int) -> TimelineEvent | None:
    """One event of one incident's timeline (None when the incident has no such event)."""
    event = session.get(TimelineEvent, event_id)
    return event if event is not None and event.incident_id == incident_id else None


def find_open_incidents(session: Session, group_keys: Collection[str]) -> dict[str, Incident]:
    """The open incident of each group key that has one, in one query."""
    if not group_keys:
        return {}
    statement = select(Incident).where(
        col(Incident.group_key).in_(list(group_keys)), col(Incident.state).not_in(CLOSED)
    )
    return {row.group_key: row for row in session.exec(statement)}


def find_open_incident_ids(session: Session, group_keys: Collection[str]) -> dict[str, int]:
    """The id of the open incident of each group key that has one, in one query (no rows
    loaded into the session: alert intake under load)."""
    if not group_keys:
        return {}
    rows = session.connection().execute(_open_ids(), {"keys": list(group_keys)})
    return {key: int(i) for key, i in rows}


@cache
def _open_ids() -> Any:
    """`find_open_incident_ids`' query (built once)."""
    c = _INCIDENTS.c
    keys: Any = bindparam("keys", expanding=True)
    return sa_select(c.group_key, c.id).where(c.group_key.in_(keys), c.state.not_in(CLOSED))


def insert_incidents(session: Session, rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Insert open incidents at once (columns as in `create_incident`); a group that already has
    an open incident (another replica won) is skipped by the database. Returns group key -> id
    of the rows inserted. SQLite and PostgreSQL: one statement; others: one row at a time."""
    if not rows:
        return {}
    dialect = session.get_bind().dialect.name
    if dialect not in ("sqlite", "postgresql"):
        return _insert_one_by_one(session, rows)
    values = [{"state": "open", "culprits": [], **row} for row in rows]
    result = session.connection().execute(_insert_open(dialect), values)
    return {key: int(i) for i, key in result}


@cache
def _insert_open(dialect: str) -> Any:
    """`insert_incidents`' statement (built once per dialect)."""
    insert = sqlite.insert if dialect == "sqlite" else postgresql.insert
    c = _INCIDENTS.c
    return insert(_INCIDENTS).on_conflict_do_nothing().returning(c.id, c.group_key)


def _insert_one_by_one(session: Session, rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    created: dict[str, int] = {}
    for row in rows:
        try:
            incident = create_incident(
                session,
                runbook=row["runbook"],
                target=row["target"],
                target_kind=row["target_kind"],
                severity=row["severity"],
                title=row["title"],
                at=row["created_at"],
                fired_at=row.get("fired_at"),
                detected_at=row.get("detected_at"),
            )
        except IncidentAlreadyOpenError:
            continue
        created[incident.group_key] = int(incident.id or 0)
    return created


def get_incidents(session: Session, ids: Collection[int]) -> dict[int, Incident]:
    """Incidents by id, in one query."""
    if not ids:
        return {}
    statement = select(Incident).where(col(Incident.id).in_(list(ids)))
    return {int(row.id or 0): row for row in session.exec(statement)}


def append_events(session: Session, events: Sequence[Mapping[str, Any]]) -> None:
    """Append many timeline events in one statement (keys as `append_event`'s arguments);
    they get ids in the given order, which orders events of equal time."""
    if not events:
        return
    values = [
        {"payload": {}, "pinned": False, "run_id": None, "step_id": None, **event}
        for event in events
    ]
    session.connection().execute(_INSERT_EVENTS, values)


_INSERT_EVENTS = TimelineEvent.__table__.insert()  # type: ignore[attr-defined]
"""`append_events`' statement (built once)."""
