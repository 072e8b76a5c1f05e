"""A glance at the incidents without the ORM: the newest incidents as SQLAlchemy Core rows.

`gpu-oncall incidents` answers while an incident runs, often in a hurry; declaring every
SQLModel table costs more than the query. This module names only the `incidents` columns the
listing shows (`bot.incidents.views.IncidentRow`), on SQLAlchemy Core and the shared column
types, and reads them from a database that is already at this release's schema. Anything else
(no database yet, an older schema) is the full path's job: `recent_incidents` returns None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import JSON, Float, Integer, String, column, exc, select, table
from sqlalchemy.engine import Engine, Row

from storage import revisions
from storage.columns import UTCDateTime

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
