"""Checkpoint savers without a process-wide lock (issue 21).

LangGraph's `SqliteSaver` shares one connection and `PostgresSaver` one lock between every run
of the process: a super-step's writes from concurrent runs queue behind each other, in Python,
even on a PostgreSQL pool of ten connections. Here:
- `ConcurrentSqliteSaver` gives each thread its own connection to the checkpoint file (WAL:
  readers never wait; writers take SQLite's file lock for the length of one commit, waiting up
  to `BUSY_TIMEOUT_S`);
- `PooledPostgresSaver` takes a pooled connection per call and no lock (a pooled connection is
  used by one thread at a time by construction).
Only storage/checkpointer.py builds them.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

BUSY_TIMEOUT_S = 30.0
"""How long a checkpoint write waits for another thread's commit to the same file."""


class ConcurrentSqliteSaver(SqliteSaver):
    """A SqliteSaver with one connection per thread instead of one shared under a lock."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._opened_lock = threading.Lock()  # guards the list of connections, not the I/O
        super().__init__(self._connection())

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(str(self._path), timeout=BUSY_TIMEOUT_S, check_same_thread=False)
            self._local.conn = conn
            with self._opened_lock:
                self._opened.append(conn)
        return conn

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """This thread's connection; with `transaction`, commit on success, roll back on error."""
        self.setup()
        conn = self._connection()
        cur = conn.cursor()
        try:
            yield cur
            if transaction:
                conn.commit()
        except BaseException:
            if transaction:
                conn.rollback()
            raise
        finally:
            cur.close()

    def close(self) -> None:
        with self._opened_lock:
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()


def pooled_postgres_saver(pool: Any) -> Any:
    """A PostgresSaver over `pool` whose calls each take their own pooled connection, with no
    process-wide lock (the module is optional: imported only for a PostgreSQL URL)."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    class PooledPostgresSaver(PostgresSaver):
        @contextmanager
        def _cursor(self, *, pipeline: bool = False) -> Iterator[Any]:
            pool: Any = self.conn  # a ConnectionPool (storage/checkpointer.py)
            with pool.connection() as conn:
                if pipeline and self.supports_pipeline:
                    with conn.pipeline(), conn.cursor(binary=True, row_factory=dict_row) as cur:
                        yield cur
                elif pipeline:
                    with conn.transaction(), conn.cursor(binary=True, row_factory=dict_row) as cur:
                        yield cur
                else:
                    with conn.cursor(binary=True, row_factory=dict_row) as cur:
                        yield cur

    return PooledPostgresSaver(pool)
