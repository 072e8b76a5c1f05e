"""Which storage errors a run retries (storage/transient.py), on errors the real databases
raise: SQLite's "database is locked", PostgreSQL's serialization failure and a connection the
server cut, whether they reach us raw (the checkpointer's drivers) or translated at the session
boundary; a broken rule (a unique key) is not transient.

Covers: each real error, raw and through `session_scope`, classified; `retry_transient` retries
a transient error after the policy's pauses and gives up after the last; it never retries a
permanent error.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from storage import engines
from storage.db import make_engine, session_scope
from storage.errors import ConflictError, DatabaseBusyError, StorageError
from storage.transient import RetryPolicy, is_transient, retry_transient


def raw_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def test_sqlite_locked_is_transient_raw_and_translated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engines, "BUSY_TIMEOUT_MS", 50)
    path = tmp_path / "oncall.db"
    engine = make_engine(f"sqlite:///{path}")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (a INTEGER)")
    holder.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(path, isolation_level=None, timeout=0.05)
    with pytest.raises(sqlite3.OperationalError) as raw:
        other.execute("BEGIN IMMEDIATE")
    assert is_transient(raw.value)
    with pytest.raises(DatabaseBusyError) as translated, session_scope(engine) as session:
        session.execute(text("INSERT INTO t VALUES (1)"))
    assert is_transient(translated.value)
    holder.execute("ROLLBACK")
    with pytest.raises(ConflictError) as broken, session_scope(engine) as session:
        session.execute(text("CREATE UNIQUE INDEX u ON t (a)"))
        session.execute(text("INSERT INTO t VALUES (2), (2)"))
    assert not is_transient(broken.value)
    engine.dispose()


def test_postgres_serialization_failure_and_cut_connection_are_transient(
    postgres_url: str,
) -> None:
    dsn = raw_dsn(postgres_url)
    with psycopg.connect(dsn, autocommit=True) as setup:
        setup.execute("CREATE TABLE t (a INTEGER)")
        setup.execute("INSERT INTO t VALUES (1)")
    one, two = psycopg.connect(dsn), psycopg.connect(dsn)
    for conn in (one, two):
        conn.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
        conn.execute("SELECT sum(a) FROM t").fetchall()
    one.execute("INSERT INTO t VALUES (2)")
    two.execute("INSERT INTO t VALUES (3)")
    one.commit()
    with pytest.raises(psycopg.errors.SerializationFailure) as conflict:
        two.commit()
    assert is_transient(conflict.value)

    engine = make_engine(postgres_url, pool_size=1, max_overflow=0)
    with session_scope(engine) as session:
        pid = session.execute(text("SELECT pg_backend_pid()")).scalar_one()
    with (
        psycopg.connect(dsn, autocommit=True) as admin,
        pytest.raises(StorageError) as cut,
        session_scope(engine) as session,
    ):
        session.execute(text("SELECT 1"))  # the pool's connection, checked
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        session.execute(text("SELECT 1"))
    assert is_transient(cut.value)
    engine.dispose()
    one.close()
    two.close()


def test_retry_transient_pauses_then_gives_up_and_never_retries_a_permanent_error() -> None:
    pauses: list[float] = []
    policy = RetryPolicy((0.5, 1.0), sleep=pauses.append)
    calls: list[int] = []

    def busy() -> None:
        calls.append(1)
        raise DatabaseBusyError("database is busy")

    with pytest.raises(DatabaseBusyError):
        retry_transient(busy, policy, what="test")
    assert (len(calls), pauses) == (3, [0.5, 1.0])

    outcomes = iter([DatabaseBusyError("busy"), None])

    def once_busy() -> str:
        error = next(outcomes)
        if error is not None:
            raise error
        return "done"

    retried: list[int] = []
    assert retry_transient(once_busy, policy, what="t", on_retry=lambda n, _e: retried.append(n))
    assert retried == [1]

    def broken() -> None:
        calls.append(1)
        raise ConflictError("a row with the same unique key already exists")

    calls.clear()
    with pytest.raises(ConflictError):
        retry_transient(broken, policy, what="test")
    assert calls == [1]
