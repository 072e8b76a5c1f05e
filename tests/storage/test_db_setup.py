"""Engine and session setup.

Covers: the SQLite file's directory is created; WAL, busy_timeout and foreign keys are on for
every connection; `sqlite_path` for file, in-memory and non-SQLite URLs; unparseable URLs and
missing database drivers become StorageErrors that say what to do; `session_scope` commits on
success and rolls back on error; foreign-key and naive-datetime violations are translated;
create_schema is idempotent; an in-memory database is shared across threads.
"""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from storage import incidents, runs
from storage.db import create_schema, make_engine, session_scope, sqlite_path
from storage.errors import (
    BackendNotInstalledError,
    ConflictError,
    InvalidDatabaseUrlError,
    NaiveDatetimeError,
    StorageError,
)
from storage.tables import Incident


def test_make_engine_creates_the_directory_of_the_database_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a' / 'b' / 'oncall.db'}"
    engine = make_engine(url)
    create_schema(engine)
    assert (tmp_path / "a" / "b" / "oncall.db").is_file()
    engine.dispose()


@pytest.mark.sqlite_only("SQLite's pragmas; PostgreSQL has no WAL mode or busy timeout to set")
def test_every_connection_has_wal_busy_timeout_and_foreign_keys(engine: Engine) -> None:
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 5000
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1


def test_sqlite_path_names_the_file_and_nothing_else(tmp_path: Path) -> None:
    assert sqlite_path(f"sqlite:///{tmp_path}/x.db") == tmp_path / "x.db"
    assert sqlite_path("sqlite:///.gpu-oncall/oncall.db") == Path(".gpu-oncall/oncall.db")
    assert sqlite_path("sqlite://") is None
    assert sqlite_path("sqlite:///:memory:") is None
    assert sqlite_path("postgresql+psycopg://u:p@db/oncall") is None


def test_an_unparseable_url_is_a_storage_error_with_examples() -> None:
    with pytest.raises(InvalidDatabaseUrlError, match="sqlite:///"):
        make_engine("not a url")


def test_a_missing_postgres_driver_says_which_package_to_install() -> None:
    # psycopg 3 is a dependency; psycopg2 (another driver SQLAlchemy knows) is not installed.
    with pytest.raises(BackendNotInstalledError, match="pip install psycopg2") as info:
        make_engine("postgresql+psycopg2://oncall:secret@db.example/oncall")
    assert "secret" not in str(info.value)


def test_a_postgres_url_builds_a_pooled_engine_without_connecting() -> None:
    engine = make_engine("postgresql+psycopg://oncall:secret@db.example/oncall")
    assert engine.dialect.driver == "psycopg"
    assert engine.pool.size() >= 5
    engine.dispose()


def test_session_scope_commits_on_success(engine: Engine, incident_id: int) -> None:
    with session_scope(engine) as session:
        assert incidents.get_incident(session, incident_id) is not None


def test_session_scope_rolls_back_when_the_block_raises(engine: Engine, clock: FakeClock) -> None:
    with pytest.raises(RuntimeError), session_scope(engine) as session:
        incidents.create_incident(
            session,
            runbook="r",
            target="t",
            target_kind="node",
            severity="warning",
            title="x",
            at=clock.now(),
        )
        raise RuntimeError("boom")
    with session_scope(engine) as session:
        assert incidents.list_incidents(session) == []


def test_an_unknown_incident_reference_is_a_conflict_error(
    engine: Engine, clock: FakeClock
) -> None:
    with pytest.raises(ConflictError, match="does not exist"), session_scope(engine) as session:
        runs.create_run(
            session, run_id="abc", incident_id=404, runbook="r", inputs={}, at=clock.now()
        )


def test_a_naive_datetime_is_refused_before_it_reaches_the_database(engine: Engine) -> None:
    with pytest.raises(NaiveDatetimeError, match="timezone-aware"), session_scope(engine) as s:
        s.add(
            Incident(
                runbook="r",
                target="t",
                target_kind="node",
                severity="warning",
                title="x",
                group_key="r:t",
                created_at=datetime(2026, 1, 1),  # noqa: DTZ001 (naive on purpose)
            )
        )
    assert issubclass(NaiveDatetimeError, StorageError)


def test_create_schema_twice_is_harmless(engine: Engine) -> None:
    create_schema(engine)


def test_in_memory_database_is_shared_across_threads(clock: FakeClock) -> None:
    engine = make_engine("sqlite://")
    create_schema(engine)

    def write() -> None:
        with session_scope(engine) as session:
            incidents.create_incident(
                session,
                runbook="r",
                target="t",
                target_kind="node",
                severity="warning",
                title="x",
                at=clock.now(),
            )

    thread = threading.Thread(target=write)
    thread.start()
    thread.join()
    with session_scope(engine) as session:
        assert len(incidents.list_incidents(session)) == 1
