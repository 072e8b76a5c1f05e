"""Engines for any SQLAlchemy URL (SQLite by default, PostgreSQL in production), on SQLAlchemy
alone: no ORM models, so a command that only reads (the CLI's `incidents`) can open the database
without declaring every table (storage/glance.py). `storage.db` re-exports these names.

SQLite files get WAL, a 5 s busy timeout and enforced foreign keys. Every SQLite transaction
starts with `BEGIN IMMEDIATE`, so a read-then-write transaction cannot fail half-way with
"database is locked" when another process committed in between; keep sessions short. Reads
through `read_only(engine)` begin `DEFERRED` instead and never take the write lock. A file's
write transactions in one process take turns on an in-process lock first (storage/write_turns.py),
so a writer is woken when the lock is free instead of polling it in SQLite's busy handler.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import event, exc
from sqlalchemy.engine import URL, Connection, Engine, create_engine, make_url
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

from storage.errors import (
    BackendNotInstalledError,
    DatabaseUnavailableError,
    InvalidDatabaseUrlError,
)
from storage.write_turns import TurnTakingConnection, turns_for

BUSY_TIMEOUT_MS = 5000


def parse_url(url: str) -> URL:
    try:
        return make_url(url)
    except exc.ArgumentError as err:
        raise InvalidDatabaseUrlError(
            "cannot parse the database URL (examples: sqlite:///path/oncall.db, "
            "postgresql+psycopg://user@host/db)"
        ) from err


def _is_sqlite(parsed: URL) -> bool:
    return parsed.get_backend_name() == "sqlite"


def _is_memory(parsed: URL) -> bool:
    database = parsed.database or ""
    return database in ("", ":memory:") or "mode=memory" in str(parsed.query)


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL; None for in-memory SQLite and other backends."""
    parsed = parse_url(url)
    if not _is_sqlite(parsed) or _is_memory(parsed):
        return None
    return Path(str(parsed.database))


def redact(url: str) -> str:
    """The URL with its password hidden, for messages and logs."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except exc.ArgumentError:
        return "<unparseable database URL>"


def make_engine(url: str, *, pool_size: int = 10, max_overflow: int = 10) -> Engine:
    """An Engine for `url`. SQLite: creates the file's directory and sets the pragmas. Other
    backends: a pool of `pool_size` (+ `max_overflow`) connections, each checked before use, so
    a restarted database server costs one failed request, not a stuck pool."""
    parsed = parse_url(url)
    try:
        if _is_sqlite(parsed):
            return _make_sqlite_engine(parsed)
        return create_engine(
            parsed, pool_pre_ping=True, pool_size=pool_size, max_overflow=max_overflow
        )
    except (exc.NoSuchModuleError, ModuleNotFoundError) as err:
        raise BackendNotInstalledError(
            f"database URL {redact(url)}", package=_driver_package(parsed)
        ) from err


def _driver_package(parsed: URL) -> str:
    driver = parsed.get_driver_name()
    return {"psycopg": "psycopg[binary]", "psycopg2": "psycopg2-binary"}.get(driver, driver)


def _make_sqlite_engine(parsed: URL) -> Engine:
    connect_args: dict[str, Any] = {"check_same_thread": False}
    if _is_memory(parsed):
        # One shared connection, or every thread would see its own empty database.
        engine = create_engine(parsed, connect_args=connect_args, poolclass=StaticPool)
    else:
        path = Path(str(parsed.database))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise DatabaseUnavailableError(
                f"cannot create the database directory {path.parent}: {err.strerror}"
            ) from err
        turns = turns_for(path)
        connect_args["factory"] = TurnTakingConnection  # writes take turns (write_turns.py)
        engine = create_engine(parsed, connect_args=connect_args)

        @event.listens_for(engine, "connect")
        def _with_turns(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
            dbapi_connection.turns = turns

    event.listen(engine, "connect", _on_sqlite_connect)
    event.listen(engine, "begin", _on_sqlite_begin)
    return engine


def _on_sqlite_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    # Let SQLAlchemy, not the sqlite3 module, decide when transactions begin (the documented
    # pysqlite recipe); needed for SAVEPOINT and BEGIN IMMEDIATE.
    conn: sqlite3.Connection = dbapi_connection
    conn.isolation_level = None
    cursor = conn.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


READ_ONLY = "gpu_oncall_read_only"
"""Execution option of a read-only engine (`read_only`): its SQLite transactions begin
DEFERRED, so a read never takes the write lock."""


def read_only(engine: Engine) -> Engine:
    """`engine` for reads only (`storage.db.read_scope`, a read on a connection of its own): on
    SQLite its transactions begin DEFERRED, so a read neither waits for the write lock nor holds
    up a writer; a plain `engine.connect()` would begin IMMEDIATE, as writes do."""
    return engine.execution_options(**{READ_ONLY: True})


def _on_sqlite_begin(connection: Connection) -> None:
    read_only = connection.get_execution_options().get(READ_ONLY, False)
    if read_only:
        connection.exec_driver_sql("BEGIN DEFERRED")
        return
    dbapi_connection = connection.connection.dbapi_connection
    taker = dbapi_connection if isinstance(dbapi_connection, TurnTakingConnection) else None
    if taker is not None:  # a file, not an in-memory database
        taker.take_turn()  # after this process's other writers of the file (write_turns.py)
    try:
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    except BaseException:
        if taker is not None:
            taker.give_back()
        raise
