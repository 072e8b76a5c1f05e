"""Received-alert queries: deduplication of Alertmanager deliveries by the database.

An alert is identified by (fingerprint, status, startsAt), a unique constraint. A redelivery
finds the stored row and changes nothing, so it never overwrites what a human entered.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache, lru_cache
from typing import Any

from sqlalchemy import (
    Integer,
    String,
    Text,
    TextualSelect,
    bindparam,
    cast,
    column,
    func,
    text,
    update,
)
from sqlalchemy import select as sa_select
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, col, select

from storage.columns import UTCDateTime
from storage.db import insert_unique
from storage.errors import RecordNotFoundError
from storage.tables import Incident, ReceivedAlert


def get_alert(
    session: Session, *, fingerprint: str, status: str, starts_at: datetime
) -> ReceivedAlert | None:
    """The stored alert with this identity, or None."""
    statement = select(ReceivedAlert).where(
        ReceivedAlert.fingerprint == fingerprint,
        ReceivedAlert.status == status,
        ReceivedAlert.starts_at == starts_at,
    )
    return session.exec(statement).first()


def record_alert(
    session: Session,
    *,
    fingerprint: str,
    status: str,
    starts_at: datetime,
    ends_at: datetime | None,
    alertname: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    received_at: datetime,
) -> tuple[ReceivedAlert, bool]:
    """Store an alert unless it was received before. Returns (row, is_new)."""
    row = ReceivedAlert(
        fingerprint=fingerprint,
        status=status,
        starts_at=starts_at,
        ends_at=ends_at,
        alertname=alertname,
        labels=dict(labels),
        annotations=dict(annotations),
        received_at=received_at,
    )
    return insert_unique(
        session,
        row,
        existing=lambda: get_alert(
            session, fingerprint=fingerprint, status=status, starts_at=starts_at
        ),
    )


def attach_alert(
    session: Session, *, alert_id: int, incident_id: int, runbook: str | None
) -> ReceivedAlert:
    """Link a stored alert to the incident (and runbook) it was routed to."""
    row = session.get(ReceivedAlert, alert_id)
    if row is None:
        raise RecordNotFoundError(f"no received alert #{alert_id}")
    row.incident_id = incident_id
    row.runbook = runbook
    session.add(row)
    session.flush()
    return row


def list_alerts_for_incident(session: Session, incident_id: int) -> list[ReceivedAlert]:
    """The alerts routed to an incident, in order of receipt."""
    statement = (
        select(ReceivedAlert)
        .where(ReceivedAlert.incident_id == incident_id)
        .order_by(col(ReceivedAlert.received_at), col(ReceivedAlert.id))
    )
    return list(session.exec(statement))


def has_firing_alerts(session: Session, incident_id: int) -> bool:
    """Whether any alert of the incident is still firing: its latest status per fingerprint,
    ordered by the alert's own times (a firing one at its start, a resolved one at its end),
    the receive time only breaking ties. Replicas' clocks then cannot reorder a resolution
    and a late redelivery of the firing alert it ended. Reads the five columns that decide it
    (no labels, no ORM rows: a resolved webhook asks this of every incident it ends)."""
    latest: dict[str, str] = {}
    rows = session.connection().execute(_FIRING_STATE, {"incident": incident_id})
    for row in sorted(rows, key=_own_order):
        latest[row.fingerprint] = row.status
    return any(status == "firing" for status in latest.values())


_ALERTS: Any = ReceivedAlert.__table__  # type: ignore[attr-defined]
_FIRING_STATE = sa_select(
    _ALERTS.c.id,
    _ALERTS.c.fingerprint,
    _ALERTS.c.status,
    _ALERTS.c.starts_at,
    _ALERTS.c.ends_at,
    _ALERTS.c.received_at,
).where(_ALERTS.c.incident_id == bindparam("incident"))
"""The columns `has_firing_alerts` orders an incident's alerts by (built once)."""


def _own_order(row: Any) -> tuple[datetime, datetime, int]:
    own = row.ends_at if row.status == "resolved" and row.ends_at is not None else row.starts_at
    return _utc(own), _utc(row.received_at), row.id or 0


def _utc(at: datetime) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def incident_of_fingerprint(session: Session, fingerprint: str) -> int | None:
    """The incident the latest routed delivery of this alert was attached to, if any."""
    statement = (
        select(ReceivedAlert.incident_id)
        .where(
            ReceivedAlert.fingerprint == fingerprint, col(ReceivedAlert.incident_id).is_not(None)
        )
        .order_by(col(ReceivedAlert.received_at).desc(), col(ReceivedAlert.id).desc())
    )
    return session.exec(statement).first()


def incident_of_alert(session: Session, fingerprint: str) -> Incident | None:
    """The incident `incident_of_fingerprint` names, loaded in the same query (a resolved
    webhook's one read of the incident it ends)."""
    statement = _incident_of_alert()
    found: Incident | None = session.exec(statement, params={"fingerprint": fingerprint}).first()
    return found


@cache
def _incident_of_alert() -> Any:
    latest = (
        sa_select(_ALERTS.c.incident_id)
        .where(_ALERTS.c.fingerprint == bindparam("fingerprint"))
        .where(_ALERTS.c.incident_id.is_not(None))
        .order_by(_ALERTS.c.received_at.desc(), _ALERTS.c.id.desc())
        .limit(1)
        .scalar_subquery()
    )
    return select(Incident).where(Incident.id == latest)


def recent_firing(session: Session, *, alertname: str, since: datetime) -> list[ReceivedAlert]:
    """Firing alerts of one alert name received at or after `since` (storm detection)."""
    statement = select(ReceivedAlert).where(
        ReceivedAlert.alertname == alertname,
        ReceivedAlert.status == "firing",
        col(ReceivedAlert.received_at) >= since,
    )
    return list(session.exec(statement))


def recent_firing_labels(
    session: Session, *, alertname: str, since: datetime
) -> list[tuple[dict[str, str], datetime]]:
    """The distinct label sets of the alerts `recent_firing` returns, each with the earliest
    startsAt it fired with: one row per alert however often it fired in the window, and no
    ORM rows (a storm check that finds no storm needs no more)."""
    rows = session.connection().execute(_recent_labels(), {"name": alertname, "since": since})
    return [(json.loads(labels), earliest) for labels, earliest in rows]


@cache
def _recent_labels() -> Any:
    labels = cast(_ALERTS.c.labels, Text)
    return (
        sa_select(labels, func.min(_ALERTS.c.starts_at))
        .where(_ALERTS.c.alertname == bindparam("name"), _ALERTS.c.status == "firing")
        .where(_ALERTS.c.received_at >= bindparam("since"))
        .group_by(labels)
    )


def list_alerts(
    session: Session, *, unattached_only: bool = False, limit: int = 100
) -> list[ReceivedAlert]:
    """The newest received alerts first; `unattached_only`: those routed to no incident."""
    statement = select(ReceivedAlert)
    if unattached_only:
        statement = statement.where(col(ReceivedAlert.incident_id).is_(None))
    order = (col(ReceivedAlert.received_at).desc(), col(ReceivedAlert.id).desc())
    return list(session.exec(statement.order_by(*order).limit(limit)))


@dataclass(frozen=True)
class NewAlert:
    """One alert of a webhook, as `record_alerts` stores it."""

    fingerprint: str
    status: str
    starts_at: datetime
    ends_at: datetime | None
    alertname: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def identity(self) -> tuple[str, str, datetime]:
        return self.fingerprint, self.status, self.starts_at.astimezone(UTC)


@dataclass(frozen=True)
class StoredAlert:
    """Where one alert of `record_alerts` ended up: its row, whether this delivery created it,
    and the incident it is attached to (for a redelivery)."""

    id: int
    is_new: bool
    incident_id: int | None


Identity = tuple[str, str, datetime]
"""(fingerprint, status, startsAt in UTC): what makes an alert the same alert."""
Found = dict[Identity, tuple[int, int | None]]
"""Stored alerts by identity: (row id, incident id)."""


def record_alerts(
    session: Session,
    alerts: Sequence[NewAlert],
    *,
    received_at: datetime,
    looked_up: Found | None = None,
) -> list[StoredAlert]:
    """Store a webhook's alerts at once; the unique identity makes the database skip every
    redelivered one (`INSERT ... ON CONFLICT DO NOTHING`), so this is safe across replicas.
    Results follow `alerts`; an identity repeated within `alerts` is new only the first time.

    The stored ones are looked up first (one index search each), so a redelivered webhook,
    Alertmanager's most common one during a storm, is a single read; only the others are
    inserted, and any of those another replica stored meanwhile is looked up again.
    `looked_up`: what `existing_alerts` found for all of `alerts` moments ago (a webhook's
    read before its write): that lookup is not repeated."""
    if not alerts:
        return []
    dialect = session.get_bind().dialect.name
    if dialect not in ("sqlite", "postgresql"):
        return [_record_one(session, alert, received_at=received_at) for alert in alerts]
    identities = [alert.identity for alert in alerts]
    unique: dict[tuple[str, str, datetime], NewAlert] = {}
    for key, alert in zip(identities, alerts, strict=True):
        unique.setdefault(key, alert)
    known = dict(looked_up) if looked_up is not None else existing_alerts(session, list(unique))
    fresh = [alert for key, alert in unique.items() if key not in known]
    created = _insert_new(session, fresh, received_at=received_at, dialect=dialect)
    raced = [key for key, _ in unique.items() if key not in known and key not in created]
    if raced:  # stored by another replica since the lookup: the database skipped them
        known.update(existing_alerts(session, raced))
    results: list[StoredAlert] = []
    seen: set[tuple[str, str, datetime]] = set()
    for key in identities:
        if key in created:
            results.append(StoredAlert(created[key], key not in seen, None))
        else:
            row_id, incident_id = known[key]
            results.append(StoredAlert(row_id, False, incident_id))
        seen.add(key)
    return results


def _insert_new(
    session: Session, alerts: Sequence[NewAlert], *, received_at: datetime, dialect: str
) -> dict[tuple[str, str, datetime], int]:
    """Insert alerts in one statement; the identities the database took -> their row ids."""
    if not alerts:
        return {}
    rows = [
        {
            "fingerprint": a.fingerprint,
            "status": a.status,
            "starts_at": a.starts_at,
            "ends_at": a.ends_at,
            "alertname": a.alertname,
            "labels": dict(a.labels),
            "annotations": dict(a.annotations),
            "received_at": received_at,
        }
        for a in alerts
    ]
    result = session.connection().execute(_insert_statement(dialect), rows)
    return {(fp, st, at): int(i) for i, fp, st, at in result}


@cache
def _insert_statement(dialect: str) -> Any:
    """`INSERT ... ON CONFLICT DO NOTHING RETURNING` the identity (built once per dialect)."""
    insert = sqlite.insert if dialect == "sqlite" else postgresql.insert
    c = _ALERTS.c
    return (
        insert(_ALERTS)
        .on_conflict_do_nothing()
        .returning(c.id, c.fingerprint, c.status, c.starts_at)
    )


LOOKUP_CHUNK = 1000
"""Identities per redelivery lookup: 3 bound parameters each, far below SQLite's 32,766."""


def existing_alerts(session: Session, identities: Sequence[Identity]) -> Found:
    """The stored (row id, incident id) of each identity that is already in the table.

    The identities are a `VALUES` list joined to the table on the unique (fingerprint, status,
    starts_at), so each is one search of the unique index and the cost does not grow with the
    table. (A row-value `IN (VALUES ...)` made SQLite scan the whole index instead.)
    """
    found: Found = {}
    for start in range(0, len(identities), LOOKUP_CHUNK):
        found.update(_existing_chunk(session, identities[start : start + LOOKUP_CHUNK]))
    return found


def _existing_chunk(
    session: Session, identities: Sequence[tuple[str, str, datetime]]
) -> dict[tuple[str, str, datetime], tuple[int, int | None]]:
    if not identities:
        return {}
    params = {
        f"{name}{i}": value
        for i, identity in enumerate(identities)
        for name, value in zip(("f", "s", "t"), identity, strict=True)
    }
    rows = session.connection().execute(_lookup_statement(len(identities)), params)
    return {(fp, st, at): (int(row_id), incident_id) for row_id, incident_id, fp, st, at in rows}


@lru_cache(maxsize=64)
def _lookup_statement(count: int) -> TextualSelect:
    """`WITH wanted(...) AS (VALUES ...) SELECT ... JOIN received_alerts ON` the unique identity,
    for `count` identities. Plain text with typed parameters: compiled once per count (an ORM
    `values()` construct is compiled again on every call, which cost more than the search)."""
    rows = ", ".join(f"(:f{i}, :s{i}, :t{i})" for i in range(count))
    statement = text(
        f"WITH wanted (fingerprint, status, starts_at) AS (VALUES {rows}) "
        "SELECT a.id, a.incident_id, a.fingerprint, a.status, a.starts_at "
        "FROM wanted JOIN received_alerts AS a ON a.fingerprint = wanted.fingerprint "
        "AND a.status = wanted.status AND a.starts_at = wanted.starts_at"
    )
    stamps = [bindparam(f"t{i}", type_=UTCDateTime()) for i in range(count)]
    return statement.bindparams(*stamps).columns(
        column("id", Integer()),
        column("incident_id", Integer()),
        column("fingerprint", String()),
        column("status", String()),
        column("starts_at", UTCDateTime()),
    )


def _record_one(session: Session, alert: NewAlert, *, received_at: datetime) -> StoredAlert:
    row, is_new = record_alert(
        session,
        fingerprint=alert.fingerprint,
        status=alert.status,
        starts_at=alert.starts_at,
        ends_at=alert.ends_at,
        alertname=alert.alertname,
        labels=alert.labels,
        annotations=alert.annotations,
        received_at=received_at,
    )
    assert row.id is not None
    return StoredAlert(row.id, is_new, row.incident_id)


def attach_alerts(
    session: Session, *, alert_ids: Sequence[int], incident_id: int, runbook: str | None
) -> None:
    """Link many stored alerts to the incident (and runbook) they were routed to."""
    link_alerts(session, [(alert_id, incident_id, runbook) for alert_id in alert_ids])


def link_alerts(session: Session, links: Sequence[tuple[int, int, str | None]]) -> None:
    """Link stored alerts to incidents in one statement: (alert id, incident id, runbook)."""
    if not links:
        return
    rows = [{"alert_id": a, "incident": i, "book": r} for a, i, r in links]
    session.connection().execute(_LINK, rows)


_LINK = (
    update(_ALERTS)
    .where(_ALERTS.c.id == bindparam("alert_id"))
    .values(incident_id=bindparam("incident"), runbook=bindparam("book"))
)
"""`link_alerts`' statement (built once)."""
