"""A run outlives a database that is busy for a while (issue 20): a transient storage error in
the middle of a run is retried from the run's last checkpoint within the lease, instead of
ending the run and its incident `failed` at attempt 1.

Covers: another connection really holds SQLite's write lock from the first step on, so the
run's next write waits out the busy timeout and fails "database is locked"; the run pauses (the
lock is let go during the pause), goes on from its checkpoint and reaches its approval, every
step is on the timeline once, the timeline notes the retry, and it was the first attempt (no
takeover). With no retries left the same lock fails the run (what happened before).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from bot.config import Settings
from bot.engine import running
from bot.wiring.runtime import Runtime, open_runtime
from storage import engines
from storage import incidents as incident_store
from storage import runs as run_store
from storage.db import session_scope, sqlite_path
from storage.errors import DatabaseBusyError
from storage.transient import RetryPolicy
from tests.engine.runbook_helpers import open_incident

NODE = "gpu-node-03"


class LockHolder:
    """A second connection to the database file that takes the write lock when told to and
    lets it go when the run pauses to retry."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.held = False
        self.pauses: list[float] = []

    def take(self) -> None:
        if not self.held and not self.pauses:
            self.conn.execute("BEGIN IMMEDIATE")
            self.held = True

    def pause(self, seconds: float) -> None:
        """The retry policy's sleep: the lock is released while the run waits."""
        self.pauses.append(seconds)
        if self.held:
            self.conn.execute("ROLLBACK")
            self.held = False


@contextmanager
def runtime(
    settings: Settings, scenario_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Runtime]:
    monkeypatch.setattr(engines, "BUSY_TIMEOUT_MS", 200)  # the lock wins in 0.2 s, not 5 s
    with open_runtime(
        settings, scenario_path=scenario_dir / "ecc-dbe-storm.yaml", fresh=True
    ) as rt:
        yield rt


def start_run(rt: Runtime, holder: LockHolder) -> tuple[int, Any]:
    incident_id = open_incident(rt, rt.catalog.get("ecc-storm"))

    def on_step(_step_id: str, _output: Mapping[str, Any]) -> None:
        holder.take()  # the step is committed; the run's next write meets the lock

    outcome = rt.engine.start(
        rt.catalog.get("ecc-storm"),
        inputs={"node": NODE},
        incident_id=incident_id,
        requester="alertmanager",
        on_step=on_step,
    )
    return incident_id, outcome


def test_a_run_retries_past_a_held_write_lock_from_its_checkpoint(
    settings: Settings, scenario_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with runtime(settings, scenario_dir, monkeypatch) as rt:
        path = sqlite_path(settings.storage.url)
        assert path is not None
        holder = LockHolder(path)
        rt.engine.storage_retry = RetryPolicy((0.5, 1.0, 2.0), sleep=holder.pause)
        incident_id, outcome = start_run(rt, holder)

        assert holder.pauses == [0.5], "one retry, after the first pause"
        assert outcome.status == "awaiting_approval"
        with session_scope(rt.db) as session:
            events = incident_store.list_events(session, incident_id)
            incident = incident_store.get_incident(session, incident_id)
            run = run_store.get_run(session, outcome.run_id)
        assert incident is not None and incident.state != "failed"
        assert run is not None and run.status != "failed"
        steps = [e.step_id for e in events if e.step_id and e.kind != "approval_requested"]
        assert sorted(set(steps)) == sorted(steps), "a step recorded twice"
        assert set(steps) == set(outcome.steps) - {"approval"}
        notes = [e.summary for e in events if "Storage was busy" in e.summary]
        assert len(notes) == 1 and "retry 1 of 3 from its last checkpoint" in notes[0]
        assert "database is busy" in notes[0]
        assert not any("taken over" in e.summary for e in events)


def test_without_retries_the_same_lock_fails_the_run(
    settings: Settings, scenario_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with runtime(settings, scenario_dir, monkeypatch) as rt:
        path = sqlite_path(settings.storage.url)
        assert path is not None
        holder = LockHolder(path)
        rt.engine.storage_retry = RetryPolicy((), sleep=holder.pause)
        # the verdict's evidence snapshot would meet the lock first, and its failure is only a
        # note (bot/engine/snapshotting.py): without it the run's next write is its approval's
        monkeypatch.setattr(running, "snapshot_verdicts", lambda **_kwargs: None)
        # the lock goes once the run has met it, so its failure can be recorded
        event.listen(rt.db, "handle_error", lambda _context: holder.pause(0))
        with pytest.raises(DatabaseBusyError):
            start_run(rt, holder)
        with session_scope(rt.db) as session:
            (incident,) = incident_store.list_incidents(session)
            run = run_store.latest_run_for_incident(session, int(incident.id or 0))
        assert run is not None and run.status == "failed"
        assert incident is not None and incident.state == "failed"
