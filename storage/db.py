"""Sessions and schema for any SQLAlchemy URL (SQLite by default, PostgreSQL in production);
the engines themselves are made in storage/engines.py (re-exported here).

`session_scope` is the one place where SQLAlchemy errors become `storage.errors` errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from sqlalchemy import exc
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel

from storage import revisions
from storage import tables as _tables  # noqa: F401  (registers the tables on SQLModel.metadata)
from storage.engines import BUSY_TIMEOUT_MS as BUSY_TIMEOUT_MS  # re-exported for callers
from storage.engines import make_engine as make_engine
from storage.engines import parse_url as parse_url
from storage.engines import read_only as read_only
from storage.engines import redact as redact
from storage.engines import sqlite_path as sqlite_path
from storage.errors import (
    ConflictError,
    DatabaseBusyError,
    DatabaseUnavailableError,
    StorageError,
)

RowT = TypeVar("RowT", bound=SQLModel)


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
    with _scope(engine, Session(engine, expire_on_commit=False), commit=True) as session:
        yield session


@contextmanager
def read_scope(engine: Engine) -> Iterator[Session]:
    """A session for reading only: on SQLite its transaction never takes the write lock (it
    begins DEFERRED), so a slow reader holds up no writer. Nothing is committed; the objects
    read stay readable after the block (detached, as loaded), as `session_scope`'s do."""
    reading = Session(read_only(engine), expire_on_commit=False)
    with _scope(engine, reading, commit=False) as session:
        yield session


@contextmanager
def _scope(engine: Engine, session: Session, *, commit: bool) -> Iterator[Session]:
    """End `session` when the block ends: commit (or, for a reader, roll back) on success, roll
    back on any error; SQLAlchemy errors leave as `StorageError`s."""
    try:
        yield session
        if commit:
            session.commit()
        else:
            session.expunge_all()  # a rollback would expire them
            session.rollback()
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
