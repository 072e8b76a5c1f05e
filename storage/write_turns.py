"""Write transactions on one SQLite file take turns inside this process (issue 21).

SQLite has one write lock per file. A thread that finds it taken waits in SQLite's busy
handler, which sleeps between tries (1, 2, 5, 10 ... up to 100 ms) instead of being woken when
the lock is free. With a replica's triage workers, its webhooks and its checkpoints all
writing, that is where most of a worker's time went: half of a triage thread's samples under a
one-incident-per-node storm were in `BEGIN IMMEDIATE`, asleep while the lock was free.

So every write transaction of this process on a file (the engine's `BEGIN IMMEDIATE`,
storage/engines.py, and the checkpointer's commits, storage/checkpointer_savers.py) first
takes the file's turn, an in-process lock whose waiters are woken the moment it is given back,
and gives it back when the transaction commits or rolls back. Reads never take it. Other
processes on the same file still meet SQLite's own lock and busy timeout, and so does a thread
that cannot have the turn within `wait`: turns order this process's writers, they never refuse
one (bot/serving/app.py's `WriterTurns`, for webhooks, does the same). A thread that already
holds the turn through another connection does not wait for itself; SQLite decides, as it did
before turns.

Other backends take no turns (PostgreSQL locks rows, not the database).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

WAIT_SECONDS = 5.0
"""How long a writer waits for its turn before it goes on to SQLite's own busy handling (the
engine's busy timeout)."""


class WriteTurns:
    """The turn to write one SQLite file, for the threads of this process. Writers inside
    `first_in_line` (the webhooks storing alerts, which Alertmanager waits on) go before the
    others waiting (triage records, checkpoints, ticks)."""

    def __init__(self) -> None:
        self._changed = threading.Condition(threading.Lock())
        self._owner: int | None = None
        self._first_waiting = 0

    def take(self, wait: float | None = None) -> bool:
        """Wait up to `wait` seconds (default `WAIT_SECONDS`) for the turn; True if this call
        took it (give it back with `give_back`), False if not had in time or this thread holds
        it already."""
        wait = WAIT_SECONDS if wait is None else wait
        me = threading.get_ident()
        first = getattr(_first, "in_line", False)
        with self._changed:
            if self._owner == me:
                return False
            if first:
                self._first_waiting += 1
            try:
                free = self._changed.wait_for(
                    lambda: self._owner is None and (first or not self._first_waiting), wait
                )
            finally:
                if first:
                    self._first_waiting -= 1
            if free:
                self._owner = me
            elif first:
                self._changed.notify_all()  # the others no longer wait for this one
            return free

    def give_back(self) -> None:
        with self._changed:
            self._owner = None
            self._changed.notify_all()


_first = threading.local()


@contextmanager
def first_in_line() -> Iterator[None]:
    """This thread's write transactions inside it take their turn before the other waiting
    writers of the file (not before the one writing)."""
    before = getattr(_first, "in_line", False)
    _first.in_line = True
    try:
        yield
    finally:
        _first.in_line = before


_turns: dict[str, WriteTurns] = {}
_turns_lock = threading.Lock()


def turns_for(path: Path | str) -> WriteTurns:
    """The turns of the SQLite file at `path` (one object per file in this process, whatever
    the spelling of its path)."""
    key = os.path.realpath(path)
    with _turns_lock:
        found = _turns.get(key)
        if found is None:
            found = _turns[key] = WriteTurns()
        return found


class TurnTakingConnection(sqlite3.Connection):
    """A sqlite3 connection (the `factory` of `sqlite3.connect`) that gives back its file's
    turn when its transaction ends: `take_turn` takes it, `commit`, `rollback` and `close`
    give it back."""

    turns: WriteTurns | None = None
    _holding = False

    def take_turn(self) -> None:
        """Take the turn before this connection begins a write transaction; `commit`,
        `rollback`, `close` or `give_back` (a BEGIN that failed) gives it back."""
        if self.turns is not None and not self._holding:
            self._holding = self.turns.take()

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self.give_back()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self.give_back()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.give_back()

    def give_back(self) -> None:
        if self._holding and self.turns is not None:
            self._holding = False
            self.turns.give_back()


def connect(path: Path | str, **kwargs: Any) -> TurnTakingConnection:
    """`sqlite3.connect(path, **kwargs)` as a `TurnTakingConnection` with the file's turns."""
    conn = sqlite3.connect(str(path), factory=TurnTakingConnection, **kwargs)
    assert isinstance(conn, TurnTakingConnection)
    conn.turns = turns_for(path)
    return conn
