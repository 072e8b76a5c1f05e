"""Which storage errors are transient, and a bounded retry for them.

A transient error is one that the same work, tried again a moment later, can get past: SQLite's
"database is locked/busy" (another writer held the lock longer than the busy timeout),
PostgreSQL's serialization failures and deadlocks (SQLSTATE class 40), a lost or reset
connection (class 08, `57P01`-`57P03` shutdowns, psycopg's `OperationalError`), and the
`storage.errors` they are translated into (`StorageError.retryable`). The checkpointer's
savers use sqlite3 and psycopg directly, so the whole cause chain is looked at, not the
outermost exception only. Nothing here knows what is retried: callers pass the work.
"""

from __future__ import annotations

import logging
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from storage.errors import StorageError

logger = logging.getLogger(__name__)

T = TypeVar("T")

TRANSIENT_SQLSTATES = ("40001", "40P01", "57P01", "57P02", "57P03")
"""PostgreSQL states a retry can get past: serialization failure, deadlock, the server shutting
down or starting (connection exceptions, class `08`, are matched by their class)."""


def transient_cause(exc: BaseException) -> BaseException | None:
    """The transient storage error in `exc`'s cause chain (itself included), or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if _is_transient(current):
            return current
        current = current.__cause__ or current.__context__
    return None


def is_transient(exc: BaseException) -> bool:
    """Whether a retry of the work that raised `exc` may succeed (see the module's list)."""
    return transient_cause(exc) is not None


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, StorageError):
        return exc.retryable
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        return "locked" in text or "busy" in text
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(sqlstate, str) and (sqlstate in TRANSIENT_SQLSTATES or sqlstate[:2] == "08"):
        return True
    psycopg = sys.modules.get("psycopg")  # loaded only where PostgreSQL is used
    return psycopg is not None and type(exc) is psycopg.OperationalError


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently transient storage errors are retried: one try, then a retry
    after each pause of `backoff` (so `len(backoff)` retries at most)."""

    backoff: Sequence[float]
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)

    @property
    def retries(self) -> int:
        return len(self.backoff)

    def pause(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (1-based)."""
        return self.backoff[retry - 1]


def retry_transient(
    call: Callable[[], T],
    policy: RetryPolicy,
    *,
    what: str,
    on_retry: Callable[[int, BaseException], None] | None = None,
) -> T:
    """`call()`, retried after a pause while it raises a transient storage error and retries
    are left; any other error, or the last transient one, propagates. `on_retry(n, error)` is
    told before retry `n` (after its pause)."""
    retry = 0
    while True:
        try:
            return call()
        except Exception as exc:
            if retry >= policy.retries or not is_transient(exc):
                raise
            retry += 1
            pause = policy.pause(retry)
            logger.warning(
                "%s: transient storage error (%s: %s); retry %d of %d in %.1f s",
                what,
                type(exc).__name__,
                str(exc).splitlines()[0] if str(exc) else "",
                retry,
                policy.retries,
                pause,
            )
            policy.sleep(pause)
            if on_retry is not None:
                on_retry(retry, exc)
