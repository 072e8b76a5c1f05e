"""The redelivery lookup of `record_alerts` (storage.alerts.existing_alerts) is index-backed.

Covers: on SQLite, the statement a redelivered webhook runs searches the unique (fingerprint,
status, starts_at) index once per identity and never scans the table (EXPLAIN QUERY PLAN of the
statement actually sent); more identities than one lookup chunk are all found; on PostgreSQL a
redelivery is reported with each row's incident, across time zones, and the planner can answer
the same lookup from the unique index; the storm check's query (alerts of one name received
since a time) searches the storm-window index on both backends and finds exactly the alerts of
the window.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Engine

from storage import alerts
from storage.db import create_schema, make_engine, session_scope

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def batch(count: int, *, offset: int = 0) -> list[alerts.NewAlert]:
    return [
        alerts.NewAlert(f"fp-{i}", "firing", T0 - timedelta(minutes=i % 7), None, "GPUEccStorm")
        for i in range(offset, offset + count)
    ]


@contextmanager
def statements(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """Every SQL statement (and its parameters) the engine sends while the block runs."""
    sent: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, sql: str, params: Any, *_: Any) -> None:
        sent.append((sql, params))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)


def plan_of(engine: Engine, sql: str, params: Any) -> str:
    """The query plan of a statement exactly as the driver was sent it. PostgreSQL's planner
    picks a sequential scan over a tiny table, so it is told not to: the plan then shows
    whether an index can answer the query at all."""
    with engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            rows = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params)
            return "\n".join(str(row[-1]) for row in rows)
        connection.execute(text("SET enable_seqscan = off"))
        raw = connection.connection.driver_connection
        assert raw is not None
        with raw.cursor() as cursor:
            cursor.execute(f"EXPLAIN {sql}", params)
            return "\n".join(str(row[0]) for row in cursor.fetchall())


@pytest.mark.sqlite_only("SQLite's EXPLAIN QUERY PLAN; the PostgreSQL plan is checked below")
def test_redelivery_lookup_searches_the_unique_index_and_never_scans(engine: Engine) -> None:
    with session_scope(engine) as session:
        alerts.record_alerts(session, batch(50), received_at=T0)
    with statements(engine) as sent, session_scope(engine) as session:
        again = alerts.record_alerts(session, batch(3, offset=10), received_at=T0)
    assert [r.is_new for r in again] == [False, False, False]
    (lookup, params) = next((s, p) for s, p in sent if s.lstrip().upper().startswith("WITH"))
    with engine.connect() as connection:
        rows = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {lookup}", params)
        plan = [row[-1] for row in rows]
    searches = [p for p in plan if "received_alerts" in p]
    assert searches, plan
    assert all(p.startswith("SEARCH") for p in searches), plan
    assert all("(fingerprint=? AND status=? AND starts_at=?)" in p for p in searches), plan


def test_more_identities_than_one_lookup_chunk_are_all_found(engine: Engine) -> None:
    count = alerts.LOOKUP_CHUNK * 2 + 17
    with session_scope(engine) as session:
        first = alerts.record_alerts(session, batch(count), received_at=T0)
    with session_scope(engine) as session:
        found = alerts.existing_alerts(session, [a.identity for a in batch(count)])
    assert len(found) == count
    assert sorted(row_id for row_id, _ in found.values()) == sorted(r.id for r in first)


def test_postgres_redelivery_is_found_through_the_unique_index(postgres_url: str) -> None:
    engine = make_engine(postgres_url)
    create_schema(engine)
    try:
        with session_scope(engine) as session:
            first = alerts.record_alerts(session, batch(20), received_at=T0)
        plus_two = timezone(timedelta(hours=2))
        shifted = [
            alerts.NewAlert(a.fingerprint, a.status, a.starts_at.astimezone(plus_two), None, "X")
            for a in batch(3, offset=5)
        ]
        with session_scope(engine) as session:
            again = alerts.record_alerts(session, shifted, received_at=T0)
        assert [(r.id, r.is_new) for r in again] == [(first[i].id, False) for i in (5, 6, 7)]
        with statements(engine) as sent, session_scope(engine) as session:
            alerts.existing_alerts(session, [a.identity for a in batch(2)])
        (lookup, params) = next((s, p) for s, p in sent if s.lstrip().upper().startswith("WITH"))
        with engine.connect() as connection:
            connection.execute(text("SET enable_seqscan = off"))
            raw = connection.connection.driver_connection
            assert raw is not None
            with raw.cursor() as cursor:
                cursor.execute(f"EXPLAIN {lookup}", params)
                plan = " ".join(row[0] for row in cursor.fetchall())
        assert "uq_received_alerts_identity" in plan, plan
    finally:
        engine.dispose()


def test_storm_window_query_searches_its_index(engine: Engine) -> None:
    with session_scope(engine) as session:
        alerts.record_alerts(session, batch(10), received_at=T0 - timedelta(hours=1))
        alerts.record_alerts(session, batch(4, offset=10), received_at=T0)
    with statements(engine) as sent, session_scope(engine) as session:
        recent = alerts.recent_firing(session, alertname="GPUEccStorm", since=T0)
    assert sorted(r.fingerprint for r in recent) == [f"fp-{i}" for i in range(10, 14)]
    (query, params) = sent[-1]
    plan = plan_of(engine, query, params).splitlines()
    if engine.dialect.name == "sqlite":
        searches = [p for p in plan if p.startswith("SEARCH")]
    else:
        searches = [p for p in plan if "Index" in p and "Scan" in p]
    assert any("ix_received_alerts_storm_window" in p for p in searches), plan
