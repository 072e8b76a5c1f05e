"""Engine and session setup for any SQLAlchemy URL (SQLite by default, PostgreSQL in production).

SQLite files get WAL, a 5 s busy timeout and enforced foreign keys. Every SQLite transaction
starts with `BEGIN IMMEDIATE`, so a read-then-write transaction cannot fail half-way with
"database is locked" when another process committed in between; keep sessions short.
`session_scope` is the one place where SQLAlchemy errors become `storage.errors` errors.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import event, exc
from sqlalchemy.engine import URL, Connection, Engine, create_engine, make_url
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool
from sqlmodel import Session, SQLModel

from storage import revisions
from storage import tables as _tables  # noqa: F401  (registers the tables on SQLModel.metadata)
from storage.errors import (
    BackendNotInstalledError,
    ConflictError,
    DatabaseBusyError,
    DatabaseUnavailableError,
    InvalidDatabaseUrlError,
    StorageError,
)

BUSY_TIMEOUT_MS = 5000

RowT = TypeVar("RowT", bound=SQLModel)


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
        engine = create_engine(parsed, connect_args=connect_args)
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


def _on_sqlite_begin(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def create_schema(engine: Engine, *, migrate: bool = True) -> None:
    """Make the database ready for this release (idempotent). `migrate`: create a fresh
    database or upgrade an older one through the migrations (storage/migrating.py); otherwise
    refuse a database whose schema is not this release's (SchemaOutOfDateError)."""
    if revisions.schema_is_current(engine):
        return  # the common case, at every start: no Alembic import, one SELECT
    from storage import migrating  # alembic: only when the schema may need work

    try:
        if migrate:
            migrating.upgrade(engine)
        else:
            migrating.check_current(engine)
    except exc.SQLAlchemyError as err:
        raise translate(err, engine=engine) from err


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A session that commits when the block succeeds and rolls back when it raises.

    Objects stay readable after the block (no expiry on commit). SQLAlchemy errors leave as
    `StorageError`s; every other exception passes through unchanged after the rollback.
    """
    session = Session(engine, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except exc.SQLAlchemyError as err:
        session.rollback()
        raise translate(err, engine=engine) from err
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def translate(err: exc.SQLAlchemyError, *, engine: Engine | None = None) -> StorageError:
    """Map a SQLAlchemy error to the `storage.errors` tree with an on-call-friendly message."""
    where = f" ({redact(engine.url.render_as_string(hide_password=False))})" if engine else ""
    original = getattr(err, "orig", None)
    if isinstance(original, StorageError):
        return original
    detail = str(original) if original is not None else str(err)
    if isinstance(err, exc.IntegrityError):
        if "foreign key" in detail.lower():
            return ConflictError(
                f"database refused the write{where}: it refers to an incident, run or alert "
                "that does not exist"
            )
        if "unique" in detail.lower() or "duplicate key" in detail.lower():
            # SQLite: "UNIQUE constraint failed: t.a, t.b"; PostgreSQL: "duplicate key value
            # violates unique constraint "uq_..."" plus a DETAIL line: one line for both.
            first = detail.strip().splitlines()[0] if detail.strip() else detail
            return ConflictError(
                f"database refused the write{where}: a row with the same unique key already "
                f"exists ({first})"
            )
        return ConflictError(f"database refused the write{where}: {detail}")
    if isinstance(err, exc.OperationalError):
        if "locked" in detail or "busy" in detail:
            return DatabaseBusyError(
                f"database is busy{where}: another writer held the lock for more than "
                f"{BUSY_TIMEOUT_MS // 1000} s; retry"
            )
        return DatabaseUnavailableError(f"database unavailable{where}: {detail}")
    return StorageError(f"database error{where}: {detail}")


def insert_unique(
    session: Session, row: RowT, *, existing: Callable[[], RowT | None]
) -> tuple[RowT, bool]:
    """Insert `row` unless the database already holds a row with the same unique key.

    The insert runs in a savepoint. If the database refuses it and `existing()` finds the row
    that holds the key, that row is returned with False; any other integrity error (e.g. an
    unknown foreign key) propagates. The database decides, so this is safe across processes.
    """
    try:
        with session.begin_nested():
            session.add(row)
    except exc.IntegrityError:
        found = existing()
        if found is None:
            raise
        return found, False
    return row, True
