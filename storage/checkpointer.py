"""The LangGraph checkpointer factory: the only place a checkpoint saver is built.

SQLite: a `SqliteSaver` on a file beside the database (`oncall.db` -> `oncall.checkpoints.db`),
so a run waiting for approval survives a restart. In-memory SQLite: an `InMemorySaver`.
PostgreSQL: `PostgresSaver` from `langgraph-checkpoint-postgres`, shared by every replica.
"""

from __future__ import annotations

import importlib
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from sqlalchemy.engine import make_url

from storage.checkpointer_savers import ConcurrentSqliteSaver, pooled_postgres_saver
from storage.db import parse_url, redact, sqlite_path
from storage.errors import (
    BackendNotInstalledError,
    DatabaseUnavailableError,
    InvalidDatabaseUrlError,
)


def checkpoint_path(db_path: Path) -> Path:
    """The checkpoint file beside a database file: `<stem>.checkpoints<suffix>`."""
    return db_path.with_name(f"{db_path.stem}.checkpoints{db_path.suffix}")


@contextmanager
def make_checkpointer(url: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """Yield a ready (set up) checkpoint saver for the database at `url`; close it on exit."""
    backend = parse_url(url).get_backend_name()
    if backend == "sqlite":
        path = sqlite_path(url)
        if path is None:
            yield InMemorySaver()
        else:
            with _sqlite_saver(checkpoint_path(path)) as saver:
                yield saver
    elif backend == "postgresql":
        with _postgres_saver(url) as saver:
            yield saver
    else:
        raise InvalidDatabaseUrlError(
            f"no LangGraph checkpointer for database URL {redact(url)} "
            "(supported: sqlite:///path/oncall.db, postgresql://...)"
        )


@contextmanager
def _sqlite_saver(path: Path) -> Iterator[SqliteSaver]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # The graph runs sync nodes on a thread pool and runs execute at once: one connection
        # per thread, no process-wide lock (storage/checkpointer_savers.py).
        saver = ConcurrentSqliteSaver(path)
        saver.setup()
    except (OSError, sqlite3.Error) as err:
        raise DatabaseUnavailableError(f"cannot open the checkpoint file {path}: {err}") from err
    try:
        yield saver
    finally:
        saver.close()


#: Arbitrary constant: the advisory-lock key that serialises checkpointer set-up across replicas.
_SETUP_LOCK_KEY = 0x6F6E63616C6C  # "oncall"


@contextmanager
def _postgres_saver(url: str, *, pool_size: int = 10) -> Iterator[BaseCheckpointSaver[Any]]:
    """A PostgresSaver over a psycopg connection pool (graph nodes run on a thread pool, and
    several runs execute at once). `setup()` runs under an advisory lock, so two replicas
    starting together do not both apply the saver's migrations."""
    try:
        module = importlib.import_module("langgraph.checkpoint.postgres")
        from psycopg import Connection, OperationalError
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool, PoolTimeout
    except ModuleNotFoundError as err:
        raise BackendNotInstalledError(
            "the PostgreSQL checkpointer", package="langgraph-checkpoint-postgres psycopg-pool"
        ) from err
    # psycopg wants a libpq URL: drop SQLAlchemy's "+driver" suffix.
    conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    options = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    try:
        with Connection.connect(conninfo, **options) as conn:  # type: ignore[arg-type]
            conn.execute("SELECT pg_advisory_lock(%s)", (_SETUP_LOCK_KEY,))
            module.PostgresSaver(conn).setup()
            conn.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK_KEY,))
        pool: ConnectionPool[Any] = ConnectionPool(
            conninfo, min_size=1, max_size=pool_size, kwargs=options, open=False,
            check=ConnectionPool.check_connection, name="gpu-oncall-checkpoints",
        )  # fmt: skip
        pool.open(wait=True, timeout=10)
    except (OperationalError, PoolTimeout) as err:
        raise DatabaseUnavailableError(
            f"cannot reach the checkpoint database {redact(url)}: {err}"
        ) from err
    saver = pooled_postgres_saver(pool)
    try:
        yield saver
    finally:
        try:
            saver.close()  # the task writes it still holds (storage/checkpointer_savers.py)
        finally:
            pool.close()
