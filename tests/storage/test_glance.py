"""The ORM-free incident listing (storage/glance.py), on SQLite and PostgreSQL.

Aspects: the glance's columns are columns of the ORM's `incidents` table, converted as their
types are, and cover everything `incident_view` reads; on a current database the
glance gives the same views as the ORM listing (newest first, open only, limit, aware UTC
times, culprits as a list); a database that is not at this release's schema gets None (the
caller takes the full path).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import JSON, Boolean, Float, Integer, String, text
from sqlalchemy.engine import Engine
from sqlalchemy.types import TypeDecorator

from bot.clock import FakeClock
from bot.incidents.views import IncidentRow, incident_view
from storage import glance, incidents
from storage.columns import UTCDateTime
from storage.db import make_engine, session_scope
from storage.tables import Incident


def kind_of(column: Any) -> str:
    """The glance's kind for an ORM column: how its driver value is converted."""
    kinds = ((UTCDateTime, "stamp"), (JSON, "json"), (Boolean, "bool"), (Integer, "int"),
             (Float, "float"), (String, "text"))  # fmt: skip
    declared = column.type
    if isinstance(declared, TypeDecorator) and not isinstance(declared, UTCDateTime):
        declared = declared.impl  # sqlmodel's AutoString is a String
    return next(kind for base, kind in kinds if isinstance(declared, base))


def test_the_glance_columns_are_the_orm_table_columns_the_views_read() -> None:
    orm = Incident.__table__.columns  # type: ignore[attr-defined]
    for name, kind in glance.INCIDENTS.items():
        assert name in orm, name
        assert kind_of(orm[name]) == kind, name
    read = set(IncidentRow.__annotations__) | {"kind", "fired_at_source", "gpu_hours_lost"}
    assert read <= set(glance.INCIDENTS)


def test_the_glance_tables_are_columns_of_the_orm_tables_the_views_read() -> None:
    from bot.incidents.views import EventRow
    from storage.tables import ActionRow, ReceivedAlert, TimelineEvent

    for read, orm in (
        (glance.EVENTS, TimelineEvent),
        (glance.ACTIONS, ActionRow),
        (glance.RECEIVED, ReceivedAlert),
    ):
        columns = orm.__table__.columns  # type: ignore[union-attr]
        for name, kind in read.items():
            assert name in columns, name
            assert kind_of(columns[name]) == kind, name
    assert set(EventRow.__annotations__) | {"id", "pinned_by"} <= set(glance.EVENTS)
    assert {"id", "incident_id", "runbook", "labels", "annotations"} <= set(glance.RECEIVED)


def test_a_current_database_gives_the_same_views_as_the_orm_listing(
    engine: Engine, db_url: str, make_incident: Callable[..., int], clock: FakeClock
) -> None:
    ids = [make_incident(f"gpu-node-0{i}") for i in range(3)]
    with session_scope(engine) as session:
        resolved = incidents.get_incident(session, ids[1])
        assert resolved is not None
        resolved.state, resolved.resolved_at = "resolved", clock.now()
        resolved.layer, resolved.culprits = "gpu_hardware", ["gpu-node-01/gpu3"]
    for open_only in (False, True):
        with session_scope(engine) as session:
            orm = [incident_view(r) for r in incidents.list_incidents(session, open_only=open_only)]
        rows = glance.recent_incidents(db_url, open_only=open_only, limit=50)
        assert rows is not None
        assert [incident_view(r) for r in rows] == orm
    rows = glance.recent_incidents(db_url, open_only=False, limit=1)
    assert rows is not None and [r.id for r in rows] == [ids[2]]
    (view,) = [incident_view(r) for r in rows]
    assert view.created_at.tzinfo is not None


def test_a_database_not_at_this_release_gets_none(
    tmp_path: Path, engine: Engine, db_url: str
) -> None:
    missing = tmp_path / "new" / "oncall.db"
    assert glance.recent_incidents(f"sqlite:///{missing}", open_only=True, limit=5) is None
    assert not missing.exists()  # a read never creates the database
    empty = make_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    try:
        with empty.begin() as connection:
            connection.execute(text("CREATE TABLE t (x INTEGER)"))
        assert glance.recent_incidents(f"sqlite:///{tmp_path / 'empty.db'}", open_only=True,
                                       limit=5) is None  # fmt: skip
    finally:
        empty.dispose()
    for url in ("sqlite://", "sqlite:///:memory:", "mysql://db/x", "sqlite:///a%20b.db"):
        assert glance.recent_incidents(url, open_only=True, limit=5) is None, url
    assert glance.recent_incidents(db_url, open_only=True, limit=5) == []
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0004'"))
    assert glance.recent_incidents(db_url, open_only=True, limit=5) is None


ZONES = st.sampled_from(
    [UTC, timezone(timedelta(hours=-7)), timezone(timedelta(hours=5, minutes=30))]
)
EARLIEST, LATEST = datetime(1970, 1, 1), datetime(9998, 12, 31)  # noqa: DTZ001 (naive bounds)


@given(
    st.datetimes(min_value=EARLIEST, max_value=LATEST, timezones=ZONES),
    st.datetimes(min_value=EARLIEST, max_value=LATEST, timezones=st.just(UTC)),
)
def test_sqlite_stamps_round_trip_and_sort_in_time_order(a: datetime, b: datetime) -> None:
    """A bound datetime is written as SQLAlchemy writes SQLite's DateTime, reads back as the same
    aware UTC instant, and the texts compare as the instants do (what `resolved_at >= :since`
    and `ORDER BY at` rely on)."""
    reader = glance._Reader(None, sqlite=True)
    text_a, text_b = reader._bind(a), reader._bind(b)
    assert glance._value(text_a, "stamp") == a and glance._value(text_a, "stamp").tzinfo == UTC
    assert (text_a < text_b) == (a < b) and (text_a == text_b) == (a == b)
