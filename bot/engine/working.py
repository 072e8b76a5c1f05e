"""Durable work of the run engine: triage runs, decided approvals' resumptions and
verification timers are rows of storage/work.py, claimed by one worker under a lease.

`WorkQueue` records, claims and performs work rows, notes takeovers from dead workers on the
timeline, gives up on work whose workers keep dying, and ends an incident `failed` with the
reason. It drives runs through a `RunDriver` (the `RunEngine` of running.py, which holds the
queue); neither module imports the other. A claim is one conditional UPDATE in the database, so
two processes or replicas never both win it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.engine import Engine

from bot.engine.catalog import RunbookCatalog
from bot.engine.leases import LeaseKeeper
from bot.engine.loading import LoadedRunbook
from bot.engine.outcomes import FINISHED, RunOutcome, StepCallback
from bot.engine.state import Deps
from bot.errors import RunStateError
from bot.incidents import lifecycle
from bot.incidents.states import IncidentState
from bot.incidents.timeline import BOT, EventKind
from storage import actions as action_store
from storage import incidents as incident_store
from storage import runs as run_store
from storage import work as work_store
from storage.db import read_scope, session_scope
from storage.errors import StorageError
from storage.tables import RunbookRun, WorkItem

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecordedTriage:
    """A triage this process recorded with its alerts: its work row's payload, run and
    incident (what `WorkQueue.perform` expects to find when it claims the row)."""

    payload: Mapping[str, Any]
    run_id: str
    incident_id: int


class RunDriver(Protocol):
    """What performs a work row's run: starts it (triage) or drives it on (resume, timer)."""

    def start(
        self,
        loaded: LoadedRunbook,
        *,
        inputs: Mapping[str, Any],
        incident_id: int,
        requester: str,
        on_step: StepCallback | None = None,
        run_id: str | None = None,
        unrecorded: bool = False,
    ) -> RunOutcome: ...

    def continue_run(
        self, run_id: str, *, answer: Any = None, on_step: StepCallback | None = None
    ) -> RunOutcome: ...

    def checked_inputs(
        self, loaded: LoadedRunbook, inputs: Mapping[str, Any]
    ) -> dict[str, Any] | None: ...

    def record_run(
        self,
        session: Any,
        loaded: LoadedRunbook,
        resolved: Mapping[str, Any],
        incident_id: int,
        requester: str,
        run_id: str,
    ) -> None: ...

    def drive_recorded(
        self,
        loaded: LoadedRunbook,
        resolved: Mapping[str, Any],
        incident_id: int,
        requester: str,
        run_id: str,
        on_step: StepCallback | None = None,
    ) -> RunOutcome: ...

    def read_ahead(
        self,
        loaded: LoadedRunbook,
        resolved: Mapping[str, Any],
        incident_id: int,
        requester: str,
        run_id: str,
    ) -> bool: ...

    def drop_reads(self, run_id: str) -> None: ...


class WorkQueue:
    """Records, claims and performs work rows; `driver` runs what a row asks for."""

    def __init__(
        self,
        *,
        db: Engine,
        deps: Deps,
        catalog: RunbookCatalog,
        leases: LeaseKeeper,
        driver: RunDriver,
    ) -> None:
        self.db, self.deps, self.catalog, self.leases = db, deps, catalog, leases
        self.driver = driver
        self.on_due: Callable[[list[int]], None] | None = None
        """Told the ids of parked rows that finished work made due (the serve-time pool
        queues them); without it they wait for the next `due_work` sweep."""
        self._doing = threading.local()  # the row this thread performs (`finish_with_run`)

    def _claim(self, session: Any, work_id: int) -> WorkItem | None:
        """Claim a row for this worker under a fresh lease; None when another holds it."""
        return work_store.claim_work(
            session,
            work_id=work_id,
            owner=self.leases.owner,
            at=self.leases.now(),
            lease=self.leases.terms.lease,
            due_by=self.deps.clock.now(),
        )

    def record_work(
        self,
        session: Any,
        *,
        kind: str,
        key: str,
        incident_id: int,
        run_id: str,
        payload: Mapping[str, Any],
        due_at: Any = None,
        claim: bool = False,
    ) -> WorkItem:
        """Record work in the caller's transaction (with the fact that makes it necessary);
        with `claim`, this worker holds it from the start."""
        item, _ = work_store.add_work(
            session,
            key=key,
            kind=kind,
            incident_id=incident_id,
            run_id=run_id,
            at=self.deps.clock.now(),
            due_at=due_at,
            payload=payload,
        )
        if claim and item.id is not None:
            claimed = self._claim(session, item.id)
            item = claimed or item
        return item

    def due_work(self, *, limit: int = 100) -> list[int]:
        """Ids of work rows any worker may claim now: new, due, or left by a dead worker (a
        read: the claim decides)."""
        with read_scope(self.db) as session:
            rows = work_store.list_claimable(
                session, at=self.leases.now(), due_by=self.deps.clock.now(), limit=limit
            )
            return [row.id for row in rows if row.id is not None]

    def perform(
        self,
        work_id: int,
        *,
        on_step: StepCallback | None = None,
        expected: RecordedTriage | None = None,
    ) -> RunOutcome | None:
        """Claim one work row and do it; None when another worker holds it or it is done.

        `expected`: a triage this process just recorded. Its inputs are checked first (a
        cluster read, never under the database's write lock), so its run is recorded in the
        claim's transaction: one commit fewer on the way to the verdict (issue 21); and its
        first reads start before that transaction, to run while it commits
        (bot/engine/reads_ahead.py)."""
        checked = self._checked(expected)
        ahead = self._read_ahead(expected, checked)
        drive: Callable[[], RunOutcome] | None = None  # set when the run is recorded here
        try:
            with session_scope(self.db) as session:
                item = self._claim(session, work_id)
                triage = item is not None and item.kind == "triage"
                mine = _is_recorded(item, expected)
                first = item is not None and item.attempts == 1  # no claimer before this one
                # A run is recorded only by a claimer of its row: a row this process recorded
                # and claims first has none to read.
                read = triage and item is not None and not (mine and first)
                run = run_store.get_run(session, item.run_id) if read and item else None
                moved_on = item is not None and self._moved_on(session, item, run)
                fresh = triage and run is None and first
                if checked is not None and item is not None and fresh and mine:
                    drive = self._record_fresh(session, item, *checked, on_step)
        finally:
            if ahead is not None and drive is None:
                self.driver.drop_reads(ahead)  # its run is not started here: nobody waits
        if item is None:
            return None
        if moved_on:  # its run went past triage before the worker died: nothing left to do
            logger.info("triage work %s ends: its run has moved on", item.key)
            self._finish_work(item, error=None)
            return None
        if drive is None:  # a triage whose run is not recorded starts it without looking again
            unrecorded = triage and run is None
            drive = lambda: self._do(item, on_step, unrecorded=unrecorded)  # noqa: E731
        return self.perform_claimed(item, on_step, run=drive)

    def _checked(
        self, expected: RecordedTriage | None
    ) -> tuple[LoadedRunbook, dict[str, Any]] | None:
        """The runbook and resolved inputs of a triage this process recorded (`expected`);
        None when there is none or its inputs do not validate."""
        if expected is None:
            return None
        loaded = self.catalog.get(str(expected.payload["runbook"]))
        resolved = self.driver.checked_inputs(loaded, dict(expected.payload.get("inputs", {})))
        return None if resolved is None else (loaded, resolved)

    def _read_ahead(
        self,
        expected: RecordedTriage | None,
        checked: tuple[LoadedRunbook, dict[str, Any]] | None,
    ) -> str | None:
        """Start the first reads of `expected`'s run (`RunDriver.read_ahead`): its run id,
        None when none started."""
        if expected is None or checked is None:
            return None
        requester = _requester(expected.payload)
        run_id, incident_id = expected.run_id, expected.incident_id
        started = self.driver.read_ahead(*checked, incident_id, requester, run_id)
        return run_id if started else None

    def _record_fresh(
        self,
        session: Any,
        item: WorkItem,
        loaded: LoadedRunbook,
        resolved: Mapping[str, Any],
        on_step: StepCallback | None,
    ) -> Callable[[], RunOutcome]:
        """Record a fresh triage's run in its claim's transaction; what then drives it."""
        requester = _requester(item.payload)
        self.driver.record_run(session, loaded, resolved, item.incident_id, requester, item.run_id)
        return lambda: self.driver.drive_recorded(
            loaded, resolved, item.incident_id, requester, item.run_id, on_step
        )

    @staticmethod
    def _moved_on(session: Any, item: WorkItem, run: RunbookRun | None) -> bool:
        """Whether triage work's run (`run`, None when not recorded) went past its triage: it
        asked for approval, waits for a timer, was resumed or ended (its status is no longer
        `running`, or it has other work). The worker that triaged it died before marking the
        row done; driving the run again would race the resumption that now owns it (issue 24:
        a completed run re-run)."""
        if item.kind != "triage" or run is None:
            return False
        if run.status != "running":
            return True
        others = work_store.list_work(session, incident_id=item.incident_id)
        return any(w.run_id == item.run_id and w.id != item.id for w in others)

    def perform_claimed(
        self,
        item: WorkItem,
        on_step: StepCallback | None,
        *,
        run: Callable[[], RunOutcome] | None = None,
    ) -> RunOutcome:
        """Do claimed work (`run`, else what its row says) with its lease kept alive; the row
        ends done, or failed with the incident when the work raises."""
        with self.leases.holding():
            if item.attempts > 1:
                self._taken_over(item)
            self._doing.item, self._doing.released = item, None
            try:
                outcome = run() if run is not None else self._do(item, on_step)
            except Exception as exc:  # boundary: the row and the incident end failed
                error = f"{type(exc).__name__}: {exc}"
                self._finish_work(item, error=error)
                self._fail_quietly(item, error)
                raise
            finally:
                released, self._doing.item, self._doing.released = self._doing.released, None, None
            if released is None:  # not finished with the run's last records
                self._finish_work(item, error=None)
            else:
                self._released(released)
        return outcome

    def finish_with_run(self, session: Any, run_id: str) -> list[int] | None:
        """Mark the row this thread performs done in `session`, the transaction that records
        its run's finish or its approval request (bot/engine/running.py), when it is that run's
        row: one commit fewer per run, and no moment when the run is over and its row not
        (a crash there left the row to a takeover that found nothing to do, issue 24). Returns
        the parked rows it made due, to hand to `finished_with_run` once `session` committed;
        None when this thread performs no row of that run (then `perform_claimed` finishes the
        row after the run, as before)."""
        item: WorkItem | None = getattr(self._doing, "item", None)
        if item is None or item.id is None or item.run_id != run_id:
            return None
        finished = work_store.finish_work(
            session,
            work_id=item.id,
            owner=self.leases.owner,
            at=self.leases.now(),
            failed=False,
            error=None,
        )
        triage = finished and item.kind == "triage"
        return self._unpark(session, item.incident_id) if triage else []

    def finished_with_run(self, released: list[int] | None) -> None:
        """`finish_with_run`'s transaction committed: the row is done (`released`: what it
        returned; None changes nothing)."""
        if released is not None and getattr(self._doing, "item", None) is not None:
            self._doing.released = released

    def _do(
        self, item: WorkItem, on_step: StepCallback | None, *, unrecorded: bool = False
    ) -> RunOutcome:
        payload = item.payload
        if item.kind == "triage":
            loaded = self.catalog.get(str(payload["runbook"]))
            inputs = dict(payload.get("inputs", {}))
            requester = _requester(payload)
            return self.driver.start(
                loaded,
                inputs=inputs,
                incident_id=item.incident_id,
                requester=requester,
                on_step=on_step,
                run_id=item.run_id,
                unrecorded=unrecorded,
            )
        return self.driver.continue_run(item.run_id, answer=payload.get("answer"), on_step=on_step)

    def _taken_over(self, item: WorkItem) -> None:
        """Note the takeover on the timeline; a `running` action of the run belongs to the dead
        worker, so its lease ends now and the act step re-runs it under the same key."""
        now = self.deps.clock.now()
        with session_scope(self.db) as session:
            action_store.expire_leases(session, run_id=item.run_id, at=now)
            lifecycle.record(
                session,
                incident_id=item.incident_id,
                kind=EventKind.NOTE,
                at=now,
                actor=BOT,
                summary=(
                    f"Run {item.run_id[:8]} taken over by worker {self.leases.owner} "
                    f"(attempt {item.attempts} of {self.leases.terms.max_attempts}): "
                    f"its {item.kind} work was left unfinished by a stopped worker"
                ),
                payload={"work": item.key, "attempt": item.attempts, "worker": self.leases.owner},
                run_id=item.run_id,
            )

    def _fail_quietly(self, item: WorkItem, error: str) -> None:
        """The incident of work that raised ends `failed` (a no-op when the run already failed
        it); a database error here must not hide the original one."""
        try:
            self.fail_incident(
                item.incident_id,
                f"The {item.kind} of run {item.run_id[:8]} stopped: {error}",
                run_id=item.run_id,
            )
        except StorageError:
            logger.warning("incident %s not marked failed", item.incident_id, exc_info=True)

    def _finish_work(self, item: WorkItem, *, error: str | None) -> None:
        assert item.id is not None
        released: list[int] = []
        try:
            with session_scope(self.db) as session:
                finished = work_store.finish_work(
                    session,
                    work_id=item.id,
                    owner=self.leases.owner,
                    at=self.leases.now(),
                    failed=error is not None,
                    error=error,
                )
                if finished and item.kind == "triage":
                    released = self._unpark(session, item.incident_id)
        except StorageError:
            logger.warning("work %s not marked finished; its lease will expire", item.key)
        self._released(released)

    def _unpark(self, session: Any, incident_id: int) -> list[int]:
        """A storm's next run (bot/engine/storm_runs.py) becomes due when its triage ends."""
        return work_store.unpark(session, incident_id=incident_id, at=self.deps.clock.now())

    def _released(self, work_ids: list[int]) -> None:
        if work_ids and self.on_due is not None:
            self.on_due(work_ids)

    def give_up_exhausted(self) -> list[int]:
        """End the work whose workers kept dying (`max_attempts` claims): its run and incident
        end `failed`, the reason on the timeline. Returns the incident ids."""
        with read_scope(self.db) as session:  # each give-up below checks its row again
            rows = work_store.exhausted(
                session,
                at=self.leases.now(),
                due_by=self.deps.clock.now(),
                max_attempts=self.leases.terms.max_attempts,
            )
        failed: list[int] = []
        for row in rows:
            reason = (
                f"Gave up on run {row.run_id[:8]}: its {row.kind} work was started "
                f"{row.attempts} times and its worker stopped each time (last: {row.owner})"
            )
            with session_scope(self.db) as session:
                if row.id is None or not work_store.give_up(
                    session, work_id=row.id, at=self.leases.now(), error=reason
                ):
                    continue
                released = self._unpark(session, row.incident_id) if row.kind == "triage" else []
                run = run_store.get_run(session, row.run_id)
                if run is not None and run.status not in FINISHED:
                    run_store.update_run(
                        session,
                        row.run_id,
                        status="failed",
                        finished_at=self.deps.clock.now(),
                        error=reason,
                    )
            self._released(released)
            self.fail_incident(row.incident_id, reason, run_id=row.run_id)
            failed.append(row.incident_id)
        return failed

    def fail_incident(
        self,
        incident_id: int,
        reason: str,
        *,
        run_id: str | None = None,
        only_if_idle: bool = False,
    ) -> bool:
        """Record `reason` and move the incident to `failed`, unless it is closed already or
        another run carries it (`only_if_idle`: it has runs; `run_id`: a later run exists)."""
        now = self.deps.clock.now()
        with session_scope(self.db) as session:
            incident = incident_store.get_incident(session, incident_id)
            if incident is None or incident.state in incident_store.CLOSED:
                return False
            latest = run_store.latest_run_for_incident(session, incident_id)
            busy = (only_if_idle and latest is not None) or (
                run_id is not None and latest is not None and latest.id != run_id
            )
            lifecycle.record(
                session,
                incident_id=incident_id,
                kind=EventKind.STEP_FAILED,
                at=now,
                actor=BOT,
                summary=reason,
                run_id=run_id,
            )
            if busy:
                return False
            lifecycle.transition(
                session, incident, to=IncidentState.FAILED, at=now, actor=BOT, reason=reason
            )
        return True

    def interrupted_resumption(self, session: Any, run_id: str) -> WorkItem | None:
        """A decided approval whose resumption was cut short (its worker died): claim it if
        its lease expired; RunStateError naming the worker if one is still at it."""
        for item in work_store.open_work_for_run(session, run_id):
            if item.kind != "resume" or item.id is None:
                continue
            claimed = self._claim(session, item.id)
            if claimed is not None:
                return claimed
            until = f"{item.lease_expires_at:%H:%M:%S} UTC" if item.lease_expires_at else "?"
            raise RunStateError(
                f"run {run_id[:8]} is already being resumed by worker {item.owner} "
                f"(its lease runs until {until}; after that any worker takes it over)"
            )
        return None

    def schedule_timer(
        self, run_id: str, incident_id: int, due: datetime, *, plan: Any = None
    ) -> int:
        """The durable timer: a `timer` work row due at `due` that resumes the run; `plan`
        names the drains that wait for a checkpoint (bot/engine/deferred.py)."""
        payload: dict[str, Any] = {"answer": {"kind": "timer", "due_at": due.isoformat()}}
        if plan:
            payload["plan"] = plan
        with session_scope(self.db) as session:
            item = self.record_work(
                session,
                kind="timer",
                key=f"timer:{run_id}:{due.isoformat()}",
                incident_id=incident_id,
                run_id=run_id,
                payload=payload,
                due_at=due,
            )
            assert item.id is not None
            return item.id


def _is_recorded(item: WorkItem | None, expected: RecordedTriage | None) -> bool:
    """Whether a claimed row is the triage this process recorded (`expected`)."""
    if item is None or expected is None:
        return False
    return (item.payload, item.run_id) == (expected.payload, expected.run_id)


def _requester(payload: Mapping[str, Any]) -> str:
    """Who asked for a triage (its work row's payload): Alertmanager unless a person did."""
    return str(payload.get("requester", "alertmanager"))
