"""One leader for the periodic jobs (approval expiry, lease takeover, due timers, sweeps).

PostgreSQL: a session-level advisory lock held on a dedicated connection. When the leader dies,
its connection closes and PostgreSQL releases the lock at once; the next replica to try takes
it. A leader that loses its connection (database restart, network) stops being the leader until
it reconnects and wins the lock again, so two replicas never both believe they lead.

SQLite: one process is the leader: an exclusive `flock` on a lock file beside the database,
which the kernel releases when the process exits, even by SIGKILL. In-memory SQLite: the
process is always the leader (nothing else can reach its database).

Leadership is only ever a scheduling optimisation on top of the database's own guarantees:
every job claims its work with leases, so a job run twice does no harm.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from pathlib import Path
from typing import IO, Any, Protocol

from sqlalchemy.engine import make_url

from storage.db import parse_url, redact, sqlite_path

logger = logging.getLogger(__name__)

#: The advisory-lock key of the periodic-jobs leader ("leader" in ASCII).
LEADER_LOCK_KEY = 0x6C6561646572


class Leadership(Protocol):
    """Whether this process leads right now. `check()` (re)tries to become or stay the leader
    and returns the answer; it never raises for a database outage (the answer is then False)."""

    def check(self) -> bool: ...

    def release(self) -> None: ...


def make_leadership(url: str) -> Leadership:
    """The leader election fitting the database at `url`."""
    parsed = parse_url(url)
    if parsed.get_backend_name() == "postgresql":
        return AdvisoryLockLeadership(url)
    path = sqlite_path(url)
    return AlwaysLeader() if path is None else FileLockLeadership(path.with_suffix(".leader"))


class AlwaysLeader:
    """In-memory SQLite: nothing else can reach the database, so this process leads."""

    def check(self) -> bool:
        return True

    def release(self) -> None:
        return None


class FileLockLeadership:
    """SQLite: an exclusive, non-blocking `flock` on `<db>.leader`, held while the process runs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None
        self._lock = threading.Lock()

    def check(self) -> bool:
        with self._lock:
            if self._file is not None:
                return True
            handle = self.path.open("a+")
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                return False
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            self._file = handle
            logger.info("leader for periodic jobs (lock file %s)", self.path)
            return True

    def release(self) -> None:
        with self._lock:
            if self._file is not None:
                fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
                self._file.close()
                self._file = None


class AdvisoryLockLeadership:
    """PostgreSQL: `pg_try_advisory_lock` on a dedicated connection, checked on every tick."""

    def __init__(self, url: str, *, key: int = LEADER_LOCK_KEY, timeout_seconds: float = 5.0):
        # psycopg wants a libpq URL: drop SQLAlchemy's "+driver" suffix.
        self._conninfo = make_url(url).set(drivername="postgresql").render_as_string(
            hide_password=False
        )
        self._where = redact(url)
        self._key, self._timeout = key, timeout_seconds
        self._conn: Any = None
        self._leading = False
        self._lock = threading.Lock()

    def check(self) -> bool:
        import psycopg

        with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._leading = False
                    self._conn = psycopg.connect(
                        self._conninfo, autocommit=True, connect_timeout=int(self._timeout)
                    )
                if self._leading:
                    self._conn.execute("SELECT 1")  # still connected: the lock is still ours
                    return True
                row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self._key,))
                self._leading = bool(row.fetchone()[0])
            except psycopg.Error as exc:
                if self._leading:
                    reason = " ".join(str(exc).split())  # libpq's messages span lines
                    logger.warning("lost leadership of periodic jobs: %s (%s)", reason, self._where)
                self._drop()
                return False
            if self._leading:
                logger.info("leader for periodic jobs (advisory lock on %s)", self._where)
            return self._leading

    def release(self) -> None:
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        self._leading = False
        if self._conn is not None:
            self._conn.close()  # closing the session releases the advisory lock
            self._conn = None
