"""Who this process is to the work queue, and the heartbeat that keeps its leases alive.

Each process (a `serve` replica, a `gpu-oncall approve`) claims work under its own worker id.
While it holds any claim, one daemon thread extends all of this worker's leases every
`heartbeat` (one UPDATE); when the process dies the heartbeat stops, the leases expire, and
another worker takes the work over (storage/work.py). Lease times are wall-clock time even on
the simulated fleet: they measure whether a process is alive, not simulated time.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from sqlalchemy.engine import Engine

from bot.clock import Clock, SystemClock
from storage import work as work_store
from storage.db import session_scope
from storage.errors import StorageError

logger = logging.getLogger(__name__)


def default_worker_id() -> str:
    """host:pid:random, unique per process (a restarted process is a new worker)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class LeaseTerms:
    lease: timedelta = timedelta(seconds=60)
    heartbeat: timedelta = timedelta(seconds=10)
    max_attempts: int = 3


class WorkConfig(Protocol):
    """What the lease terms are read from (`bot.config.WorkSettings`)."""

    lease_seconds: float
    heartbeat_seconds: float
    max_attempts: int
    worker_id: str | None


class LeaseKeeper:
    """This worker's id and lease terms, and the heartbeat thread while it holds claims."""

    def __init__(
        self,
        db: Engine,
        *,
        owner: str | None = None,
        terms: LeaseTerms | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.db, self.owner = db, owner or default_worker_id()
        self.terms = terms or LeaseTerms()
        self.clock: Clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._held = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def configured(cls, db: Engine, work: WorkConfig) -> LeaseKeeper:
        terms = LeaseTerms(
            lease=timedelta(seconds=work.lease_seconds),
            heartbeat=timedelta(seconds=work.heartbeat_seconds),
            max_attempts=work.max_attempts,
        )
        return cls(db, owner=work.worker_id, terms=terms)

    def now(self) -> datetime:
        """Lease time (wall clock)."""
        return self.clock.now()

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Keep this worker's leases alive while the block runs. The heartbeat thread runs
        only while some block holds claims, so an idle process (or a closed runtime) keeps no
        thread behind."""
        with self._lock:
            self._held += 1
            if self._thread is None:
                self._stop = threading.Event()
                self._thread = threading.Thread(
                    target=self._beat, args=(self._stop,), name="lease-heartbeat", daemon=True
                )
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._held -= 1
                if self._held == 0:
                    self._stop.set()
                    self._thread = None

    def _beat(self, stop: threading.Event) -> None:
        while not stop.wait(self.terms.heartbeat.total_seconds()):
            try:
                with session_scope(self.db) as session:
                    work_store.heartbeat(
                        session, owner=self.owner, at=self.now(), lease=self.terms.lease
                    )
            except StorageError as exc:  # the next beat tries again; the lease has slack
                logger.warning("lease heartbeat failed: %s", exc)

    def stop(self) -> None:
        """Stop the heartbeat thread (tests; a process exit stops it anyway)."""
        with self._lock:
            self._stop.set()
            self._thread = None
