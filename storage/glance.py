"""A glance at the incidents without the ORM: the newest incidents as SQLAlchemy Core rows.

`gpu-oncall incidents` answers while an incident runs, often in a hurry; declaring every
SQLModel table costs more than the query. This module names only the `incidents` columns the
listing shows (`bot.incidents.views.IncidentRow`), on SQLAlchemy Core and the shared column
types, and reads them from a database that is already at this release's schema. Anything else
(no database yet, an older schema) is the full path's job: `recent_incidents` returns None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Float, Integer, String, column, exc, select, table
from sqlalchemy.engine import Engine, Row

from storage import revisions
from storage.columns import UTCDateTime
from storage.refs import parse_incident_ref

_STAMPS = (
    "fired_at",
    "detected_at",
    "diagnosed_at",
    "acknowledged_at",
    "mitigated_at",
    "resolved_at",
    "created_at",
)
_TEXTS = (
    "runbook",
    "target",
    "target_kind",
    "severity",
    "title",
    "state",
    "layer",
    "acknowledged_by",
    "fired_at_corrected_by",
    "fired_at_source",
    "kind",
)

INCIDENTS = table(
    "incidents",
    column("id", Integer),
    column("confidence", Float),
    column("gpu_hours_lost", Float),
    column("culprits", JSON),
    *(column(name, String) for name in _TEXTS),
    *(column(name, UTCDateTime()) for name in _STAMPS),
)
"""The columns of `storage.tables.Incident` the listing reads (the drift test keeps the ORM
table and the migrations equal; tests/storage/test_glance.py keeps this list in step)."""

RESOLVED = "resolved"


def recent_incidents(
    engine: Engine, *, open_only: bool, limit: int
) -> Sequence[Row[Any]] | None:
    """The newest incidents first (not resolved ones only, with `open_only`), or None when the
    database is not at this release's schema (then the caller takes the full path)."""
    if not revisions.schema_is_current(engine):
        return None
    statement = select(INCIDENTS)
    if open_only:
        statement = statement.where(INCIDENTS.c.state != RESOLVED)
    statement = statement.order_by(INCIDENTS.c.id.desc()).limit(limit)
    try:
        with engine.connect() as connection:
            return connection.execute(statement).all()
    except exc.SQLAlchemyError:
        return None


EVENTS = table(
    "timeline_events",
    column("id", Integer),
    column("incident_id", Integer),
    column("at", UTCDateTime()),
    column("kind", String),
    column("actor", String),
    column("summary", String),
    column("payload", JSON),
    column("pinned", Boolean),
    column("pinned_by", String),
    column("run_id", String),
    column("step_id", String),
)
"""The columns of `storage.tables.TimelineEvent` a timeline shows (`views.EventRow`)."""

ACTIONS = table(
    "actions",
    column("id", Integer),
    column("incident_id", Integer),
    column("action", String),
    column("target", String),
    column("status", String),
    column("result", JSON),
    column("finished_at", UTCDateTime()),
)
"""The columns of `storage.tables.ActionRow` the GPU-hours read (bot/incidents/gpu_hours.py)."""


@dataclass(frozen=True)
class IncidentRecord:
    """One incident with what `gpu-oncall incident` shows of it: its timeline and actions."""

    incident: Row[Any]
    events: Sequence[Row[Any]]
    actions: Sequence[Row[Any]]


def incident_record(engine: Engine, ref: str | int) -> IncidentRecord | None:
    """The incident named `ref` with its timeline (time order, then insertion order) and its
    actions (claim order), in one transaction; None when the database is not at this release's
    schema, or holds no such incident (the full path then says which)."""
    incident_id = parse_incident_ref(ref)
    if incident_id is None or not revisions.schema_is_current(engine):
        return None
    try:
        with engine.connect() as connection:
            row = connection.execute(
                select(INCIDENTS).where(INCIDENTS.c.id == incident_id)
            ).first()
            if row is None:
                return None
            events = connection.execute(
                select(EVENTS)
                .where(EVENTS.c.incident_id == incident_id)
                .order_by(EVENTS.c.at, EVENTS.c.id)
            ).all()
            actions = connection.execute(
                select(ACTIONS).where(ACTIONS.c.incident_id == incident_id).order_by(ACTIONS.c.id)
            ).all()
    except exc.SQLAlchemyError:
        return None
    return IncidentRecord(row, events, actions)


def resolved_incidents(engine: Engine, *, since: datetime) -> Sequence[Row[Any]] | None:
    """As `storage.incidents.list_resolved`: incidents (not checks) resolved since `since`,
    oldest first; None when the database is not at this release's schema."""
    if not revisions.schema_is_current(engine):
        return None
    statement = (
        select(INCIDENTS)
        .where(INCIDENTS.c.resolved_at >= since, INCIDENTS.c.kind == "incident")
        .order_by(INCIDENTS.c.resolved_at, INCIDENTS.c.id)
    )
    try:
        with engine.connect() as connection:
            return connection.execute(statement).all()
    except exc.SQLAlchemyError:
        return None


RECEIVED = table(
    "received_alerts",
    column("id", Integer),
    column("fingerprint", String),
    column("status", String),
    column("starts_at", UTCDateTime()),
    column("ends_at", UTCDateTime()),
    column("alertname", String),
    column("labels", JSON),
    column("annotations", JSON),
    column("received_at", UTCDateTime()),
    column("incident_id", Integer),
    column("runbook", String),
)
"""The columns of `storage.tables.ReceivedAlert` the alert listing shows."""


def recent_alerts(engine: Engine, *, limit: int) -> Sequence[Row[Any]] | None:
    """As `storage.alerts.list_alerts`: the newest received alerts first; None when the
    database is not at this release's schema."""
    if not revisions.schema_is_current(engine):
        return None
    statement = (
        select(RECEIVED)
        .order_by(RECEIVED.c.received_at.desc(), RECEIVED.c.id.desc())
        .limit(limit)
    )
    try:
        with engine.connect() as connection:
            return connection.execute(statement).all()
    except exc.SQLAlchemyError:
        return None
