"""A run's reads on a connection of their own take no write lock on SQLite (issue 21).

Covers: the snapshot's anchor (`snapshot_anchor`) and a run's look back at its GPUs' history
(`read_history_uncommitted`) answer while another connection holds SQLite's write lock, and do
not hold it while they read. Before, both began `BEGIN IMMEDIATE` like a write: with four
triage workers they queued behind every writer (and, under a busy timeout of 50 ms, failed as
"database is busy"); `read_scope` pages stay covered by tests/serving/test_pages_no_write_lock.
A `read_scope`'s rows stay readable after it (its rollback used to expire them). The schema
check every command makes when it opens the database (`revisions.schema_is_current`) and
Alembic's read of the revision (`migrating.current`) read the same way: a command started
while `serve` held the lock used to wait for it and, past the busy timeout, find the schema
"not current" and take the Alembic path.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from bot.clock import FakeClock
from storage import engines, gpu_history, migrating, revisions, snapshots
from storage.db import create_schema, make_engine, read_scope, session_scope
from storage.errors import StorageError
from storage.tables import Incident
from tests.incidents.incident_helpers import open_ecc_storm
from tests.storage.conftest import T0

UUID = "GPU-5f3c0b8e-1d2a-4c6b-9e7f-0a1b2c3d4e5f"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "oncall.db"


@pytest.fixture
def engine(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    monkeypatch.setattr(engines, "BUSY_TIMEOUT_MS", 50)  # a wait for the lock fails in 50 ms
    engine = make_engine(f"sqlite:///{db_path}")
    create_schema(engine)
    with session_scope(engine) as session:
        incident = open_ecc_storm(session, FakeClock(T0), fired=T0 - timedelta(minutes=3))
        assert incident.id == 1
        gpu_history.record_facts(
            session,
            [{"gpu_key": UUID, "uuid": UUID, "node": "gpu-node-03", "gpu": "5",
              "kind": "finding", "what": "xid 48", "run_id": "r1", "at": T0}],
        )  # fmt: skip
    yield engine
    engine.dispose()


@pytest.fixture
def writer(db_path: Path) -> Iterator[sqlite3.Connection]:
    """Another connection, holding SQLite's write lock for the whole test."""
    other = sqlite3.connect(db_path, timeout=0, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    yield other
    other.execute("ROLLBACK")
    other.close()


def begins(engine: Engine) -> list[str]:
    """The BEGIN statements the engine's connections send, in order."""
    sent: list[str] = []

    def seen(_conn: Connection, _cursor: object, statement: str, *_rest: object) -> None:
        if statement.startswith("BEGIN"):
            sent.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    return sent


def test_the_snapshot_anchor_is_read_while_another_connection_writes(
    engine: Engine, writer: sqlite3.Connection
) -> None:
    sent = begins(engine)
    assert snapshots.snapshot_anchor(engine, incident_id=1) == T0 - timedelta(minutes=3)
    assert sent == ["BEGIN DEFERRED"]


def test_the_look_back_at_gpu_history_is_read_while_another_connection_writes(
    engine: Engine, writer: sqlite3.Connection
) -> None:
    sent = begins(engine)
    rows = gpu_history.read_history_uncommitted(
        engine, keys=[UUID], since=T0 - timedelta(days=1)
    )
    assert [(key, kind, what) for key, kind, what, _at, _inc in rows] == [
        (UUID, "finding", "xid 48")
    ]
    assert sent == ["BEGIN DEFERRED"]


def test_a_write_still_waits_for_the_lock(engine: Engine, writer: sqlite3.Connection) -> None:
    """The counter-check: the same engine's write transaction does wait (and, after the busy
    timeout of 50 ms, fails), so the reads above did not pass by luck."""
    with pytest.raises(StorageError, match="busy"), session_scope(engine) as session:
        gpu_history.record_facts(
            session,
            [{"gpu_key": UUID, "uuid": UUID, "node": "gpu-node-03", "gpu": "5",
              "kind": "finding", "what": "xid 79", "run_id": "r2", "at": T0}],
        )  # fmt: skip


def test_rows_read_in_a_read_scope_stay_readable_after_it(
    engine: Engine, writer: sqlite3.Connection
) -> None:
    """A reader's transaction ends in a rollback, which expires what it loaded: the takeover
    tick reads its exhausted rows in one and uses them after it (`give_up_exhausted`)."""
    with read_scope(engine) as session:
        incident = session.get(Incident, 1)
    assert incident is not None
    assert (incident.target, incident.fired_at) == ("gpu-node-03", T0 - timedelta(minutes=3))


def test_the_schema_check_at_start_reads_while_another_connection_writes(
    engine: Engine, writer: sqlite3.Connection
) -> None:
    sent = begins(engine)
    assert revisions.schema_is_current(engine)
    assert migrating.current(engine) == revisions.known_head()
    assert sent == ["BEGIN DEFERRED", "BEGIN DEFERRED"]
