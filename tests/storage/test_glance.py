"""The ORM-free incident listing (storage/glance.py), on SQLite and PostgreSQL.

Aspects: the Core columns are columns of the ORM's `incidents` table, of the same types (or
their subclasses), and cover everything `incident_view` reads; on a current database the
glance gives the same views as the ORM listing (newest first, open only, limit, aware UTC
times, culprits as a list); a database that is not at this release's schema gets None (the
caller takes the full path).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from bot.incidents.views import IncidentRow, incident_view
from storage import glance, incidents
from storage.db import make_engine, session_scope
from storage.tables import Incident


def test_the_glance_columns_are_the_orm_table_columns_the_views_read() -> None:
    orm = Incident.__table__.columns  # type: ignore[attr-defined]
    for name, column in glance.INCIDENTS.c.items():
        assert name in orm, name
        kind = type(column.type)
        assert isinstance(orm[name].type, kind) or isinstance(orm[name].type.impl, kind), name
    read = set(IncidentRow.__annotations__) | {"kind", "fired_at_source", "gpu_hours_lost"}
    assert read <= set(glance.INCIDENTS.c.keys())


def test_a_current_database_gives_the_same_views_as_the_orm_listing(
    engine: Engine, make_incident: Callable[..., int], clock: FakeClock
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
        rows = glance.recent_incidents(engine, open_only=open_only, limit=50)
        assert rows is not None
        assert [incident_view(r) for r in rows] == orm
    rows = glance.recent_incidents(engine, open_only=False, limit=1)
    assert rows is not None and [r.id for r in rows] == [ids[2]]
    (view,) = [incident_view(r) for r in rows]
    assert view.created_at.tzinfo is not None


def test_a_database_not_at_this_release_gets_none(tmp_path: Path, engine: Engine) -> None:
    empty = make_engine(f"sqlite:///{tmp_path / 'new' / 'oncall.db'}")
    try:
        assert glance.recent_incidents(empty, open_only=True, limit=5) is None
    finally:
        empty.dispose()
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0004'"))
    assert glance.recent_incidents(engine, open_only=True, limit=5) is None
