"""Write transactions on one SQLite file take turns in this process (storage/write_turns.py).

Covers: a second writer of the file waits for the turn, not in SQLite's busy handler (its
BEGIN reaches SQLite only after the first commits), through two engines on two spellings of
the path; reads take no turn; the turn is given back on commit, on rollback, and when a BEGIN
fails (another process holds the lock past the busy timeout); a thread that holds the turn
does not wait for itself on a second connection; a turn not had in time lets the writer go on
to SQLite's own busy handling; a webhook's write (`first_in_line`) goes before the writers
already waiting; the checkpointer's commits take the turn of their file; and
PostgreSQL's engine takes none.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from storage import engines, write_turns
from storage.checkpointer import make_checkpointer
from storage.db import make_engine, read_scope, session_scope
from storage.errors import StorageError
from storage.write_turns import (
    TurnTakingConnection,
    WriteTurns,
    connect,
    first_in_line,
    turns_for,
)
from tests.storage.test_reads_take_no_write_lock import begins

WAIT = 30.0  # an upper bound for a thread's join, never a measured time


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "oncall.db"


@pytest.fixture
def engine(db_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{db_path}")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (v INTEGER)")
    yield engine
    engine.dispose()


def test_a_second_writer_waits_for_the_turn_then_begins(
    engine: Engine, db_path: Path, tmp_path: Path
) -> None:
    (tmp_path / "link").symlink_to(tmp_path)
    other = make_engine(f"sqlite:///{tmp_path / 'link' / 'oncall.db'}")  # the same file
    sent = begins(other)
    holding, began = threading.Event(), threading.Event()
    release = threading.Event()

    def first() -> None:
        with session_scope(engine) as session:
            session.execute(text("INSERT INTO t VALUES (1)"))
            holding.set()
            assert release.wait(WAIT)

    def second() -> None:
        assert holding.wait(WAIT)
        with session_scope(other) as session:
            session.execute(text("INSERT INTO t VALUES (2)"))
            began.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    assert holding.wait(WAIT)
    assert _until(lambda: _waits_for_turn(turns_for(db_path)))  # the second writer is in `take`
    assert sent == [] and not began.is_set()  # its BEGIN is not polling SQLite's lock
    release.set()
    for thread in threads:
        thread.join(WAIT)
    assert sent == ["BEGIN IMMEDIATE"] and began.is_set()
    with engine.connect() as conn:
        assert sorted(conn.exec_driver_sql("SELECT v FROM t").scalars()) == [1, 2]
    assert turns_for(db_path).take(wait=0)  # given back by both
    turns_for(db_path).give_back()
    other.dispose()


def _until(condition: Callable[[], bool]) -> bool:
    """Whether `condition` becomes true (checked every millisecond, for at most `WAIT`)."""
    for _ in range(int(WAIT * 1000)):
        if condition():
            return True
        time.sleep(0.001)
    return False


def _waits_for_turn(turns: WriteTurns) -> bool:
    """Whether another thread is blocked on `turns` (read from the waiting thread's own
    stack: the lock is held, and a thread is inside `take`)."""
    for frame in sys._current_frames().values():
        while frame is not None:
            if frame.f_code is WriteTurns.take.__code__ and frame.f_locals.get("self") is turns:
                return True
            frame = frame.f_back  # type: ignore[assignment]
    return False


def test_reads_take_no_turn(engine: Engine, db_path: Path) -> None:
    turns = turns_for(db_path)
    assert turns.take(wait=0)  # another writer of this process holds it
    try:
        with read_scope(engine) as session:
            assert session.execute(text("SELECT count(*) FROM t")).scalar_one() == 0
    finally:
        turns.give_back()


def test_the_turn_is_given_back_on_commit_and_on_rollback(engine: Engine, db_path: Path) -> None:
    with session_scope(engine) as session:
        session.execute(text("INSERT INTO t VALUES (1)"))
    assert turns_for(db_path).take(wait=0)
    turns_for(db_path).give_back()
    with pytest.raises(RuntimeError, match="undone"), session_scope(engine) as session:
        session.execute(text("INSERT INTO t VALUES (2)"))
        raise RuntimeError("undone")
    assert turns_for(db_path).take(wait=0)
    turns_for(db_path).give_back()
    with engine.connect() as conn:
        assert list(conn.exec_driver_sql("SELECT v FROM t").scalars()) == [1]


def test_a_begin_that_fails_gives_the_turn_back(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, engine: Engine
) -> None:
    monkeypatch.setattr(engines, "BUSY_TIMEOUT_MS", 20)  # a wait for SQLite's lock fails soon
    busy = make_engine(f"sqlite:///{db_path}")
    outside = sqlite3.connect(db_path, isolation_level=None)  # another process's writer
    outside.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StorageError, match="busy"), session_scope(busy) as session:
            session.execute(text("INSERT INTO t VALUES (1)"))
        assert turns_for(db_path).take(wait=0)  # not left held by the failed BEGIN
        turns_for(db_path).give_back()
    finally:
        outside.rollback()
        outside.close()
        busy.dispose()
    with session_scope(engine) as session:
        session.execute(text("INSERT INTO t VALUES (2)"))


def test_a_thread_holding_the_turn_does_not_wait_for_itself(db_path: Path) -> None:
    turns = turns_for(db_path)
    assert turns.take(wait=0)
    try:
        assert turns.take() is False  # at once: SQLite decides, as before turns
    finally:
        turns.give_back()


def test_a_turn_not_had_in_time_lets_the_writer_go_on(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(write_turns, "WAIT_SECONDS", 0.0)  # not had at once: not had in time
    turns = turns_for(db_path)
    taken = threading.Event()
    done = threading.Event()

    def hold() -> None:
        assert turns.take()
        taken.set()
        assert done.wait(WAIT)
        turns.give_back()

    holder = threading.Thread(target=hold)
    holder.start()
    assert taken.wait(WAIT)
    try:
        conn = connect(db_path, isolation_level=None)
        conn.take_turn()  # not had: goes on without it
        assert conn._holding is False
        conn.execute("CREATE TABLE u (v INTEGER)")
        conn.close()
    finally:
        done.set()
        holder.join(WAIT)


def test_the_checkpointer_commits_on_the_turn_of_its_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'oncall.db'}"
    with make_checkpointer(url) as saver:
        conn = saver._connection()
        assert isinstance(conn, TurnTakingConnection)
        assert conn.turns is turns_for(tmp_path / "oncall.checkpoints.db")
        assert conn.turns is not turns_for(tmp_path / "oncall.db")  # a file of its own


def test_postgresql_takes_no_turns(postgres_url: str) -> None:
    engine = make_engine(postgres_url)
    try:
        with engine.connect() as conn:
            assert not isinstance(conn.connection.dbapi_connection, TurnTakingConnection)
    finally:
        engine.dispose()


def test_a_webhooks_write_goes_before_the_writers_waiting(db_path: Path) -> None:
    turns = turns_for(db_path)
    order: list[str] = []

    def writer(name: str, first: bool) -> None:
        with first_in_line() if first else contextlib.nullcontext():
            assert turns.take()
        order.append(name)
        turns.give_back()

    assert turns.take(wait=0)  # the transaction writing now
    triage = threading.Thread(target=writer, args=("triage", False))
    triage.start()
    assert _until(lambda: _waits_for_turn(turns))
    webhook = threading.Thread(target=writer, args=("webhook", True))
    webhook.start()
    assert _until(lambda: turns._first_waiting == 1)
    turns.give_back()
    for thread in (triage, webhook):
        thread.join(WAIT)
    assert order == ["webhook", "triage"]
