"""Triage in the background: a bounded pool of workers does the durable work of the bot (the
triage run of each newly opened incident, resumptions and timers left by dead workers), and
expires the bot's silences when an incident resolves.

Triage is recorded before the webhook is answered: `record_triage` adds a work row in the
transaction that stores the alerts (storage/work.py), and `submit_run` hands its id to a
worker, which claims it under a lease (`RunEngine.perform`). A full queue drops nothing: the
row waits in the database and `take_over` (at start-up and on the scheduler's tick) hands every
claimable row (new, due, or left by a dead worker or replica) to the pool.

A boundary: a run's own failures are recorded on the timeline by `engine/running.py`; what
fails before or around a run is recorded here, so nothing is lost silently. The webhook never
waits for a worker.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

from sqlalchemy import Engine

from bot.actions.silences import expire_incident_silences
from bot.clock import Clock
from bot.engine.catalog import RunbookCatalog
from bot.engine.running import RunEngine, RunOutcome
from bot.engine.storm_runs import join_storm_run
from bot.engine.working import RecordedTriage
from bot.errors import OncallError
from bot.incidents import lifecycle
from bot.incidents.timeline import BOT, EventKind
from bot.intake.counters import IntakeCounters
from bot.intake.receiving import Received
from integrations.alertmanager import Silences
from integrations.errors import IntegrationError
from storage import work as work_store
from storage.db import session_scope
from storage.errors import StorageError

logger = logging.getLogger(__name__)


class RunWatcher(Protocol):
    """Follows one triage run (e.g. a live Slack message): every step, then the outcome."""

    def on_step(self, step_id: str, output: Mapping[str, Any]) -> None: ...

    def finish(self, outcome: RunOutcome) -> None: ...


class TriageHooks(Protocol):
    """Told when intake opens an incident (may return a watcher for its run) or resolves one.
    Implemented by `bot.slack.app.SlackBot`; hooks must not raise for their own failures."""

    def incident_opened(self, incident_id: int) -> RunWatcher | None: ...

    def incident_resolved(self, incident_id: int) -> None: ...


class TriageWorkers:
    """Starts triage runs on at most `workers` threads with at most `queue_limit` waiting."""

    hooks: TriageHooks | None = None
    """Presentation hooks (Slack), set by `server.create_app` when Slack is configured."""

    def __init__(
        self,
        engine: RunEngine,
        *,
        db: Engine,
        catalog: RunbookCatalog,
        clock: Clock,
        silences: Silences | None,
        workers: int,
        queue_limit: int,
        counters: IntakeCounters,
    ) -> None:
        self.engine, self.db, self.catalog, self.clock = engine, db, catalog, clock
        self.silences = silences
        """The bot's silences to expire when an incident resolves (None: not configured)."""
        self.counters, self.queue_limit = counters, queue_limit
        engine.follow_timers = False  # in serve, verifications wait as durable timers
        engine.work.on_due = self._queue_due
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="triage")
        self._lock = threading.Lock()
        self._waiting = 0
        self._futures: set[Future[None]] = set()
        self._recorded: dict[int, int] = {}  # incident id -> its triage work row
        self._payloads: dict[int, RecordedTriage] = {}  # work row -> triage recorded here
        self._queued: set[int] = set()  # work rows queued here, not yet finished
        self._closed = False

    def record_triage(self, session: Any, received: Sequence[Received]) -> int:
        """Record the triage of each incident `received` opens, in the caller's transaction
        (the one that stores the alerts), all in one statement: once it commits, the triage
        happens even if this process dies before it starts. Returns how many were recorded."""
        recorded = 0
        works: list[dict[str, Any]] = []
        for r in received:
            if r.extends_run:
                recorded += self._join_storm(session, r)
                continue
            if not r.start_run or r.incident_id is None or r.runbook is None:
                continue
            loaded = self.catalog.get(r.runbook)
            inputs = r.run_inputs(loaded.runbook.inputs)
            if inputs is None:
                continue  # a storm its runbook cannot take: noted by submit_run
            run_id = uuid.uuid4().hex
            payload = {"runbook": loaded.name, "inputs": inputs, "requester": "alertmanager"}
            works.append({"key": f"triage:{run_id}", "kind": "triage", "run_id": run_id,
                          "incident_id": r.incident_id, "payload": payload})  # fmt: skip
        added = work_store.add_works(session, works, at=self.clock.now())
        with self._lock:
            for work in works:
                if work["key"] in added:
                    self._recorded[work["incident_id"]] = added[work["key"]]
                    self._payloads[added[work["key"]]] = RecordedTriage(
                        work["payload"], work["run_id"], work["incident_id"]
                    )
        return recorded + len(added)

    def _join_storm(self, session: Any, r: Received) -> int:
        """Members joining a storm go into its next run; 1 when that is a new row due now."""
        if r.incident_id is None or r.runbook is None:
            return 0
        loaded = self.catalog.get(r.runbook)
        item = join_storm_run(
            self.engine.work,
            session,
            incident_id=r.incident_id,
            runbook=loaded.name,
            runbook_inputs=list(loaded.runbook.inputs),
            members=r.members,
            at=self.clock.now(),
        )
        if item is None or item.id is None:
            return 0
        with self._lock:
            self._recorded[r.incident_id] = item.id
        return 1

    def submit_run(self, received: Received) -> bool:
        """Hand the recorded triage of a newly opened incident to a worker (recording it now
        if the caller did not). False when every worker is busy: it waits in the database."""
        assert received.incident_id is not None and received.runbook is not None
        incident_id = received.incident_id
        with self._lock:
            work_id = self._recorded.pop(incident_id, None)
        if work_id is None and received.extends_run:
            return False  # the members joined a run that is waiting already
        if work_id is None:
            with session_scope(self.db) as session:
                self.record_triage(session, [received])
            with self._lock:
                work_id = self._recorded.pop(incident_id, None)
        if work_id is None:
            loaded = self.catalog.get(received.runbook)
            self._note(
                incident_id,
                f"Storm of {len(received.members)} targets grouped; runbook "
                f"'{loaded.name}' takes no `nodes` input, so no run was started. "
                "Diagnose the members with gpu-oncall run/diagnose.",
            )
            self.counters.triage("not_started")
            return False
        if not self._queue_work(work_id, incident_id=incident_id):
            self._note(
                incident_id,
                f"Triage waits: {self.queue_limit} runs were already queued. It is recorded "
                "in the database; the next free worker (of any replica) takes it.",
            )
            self.counters.triage("deferred")
            return False
        self.counters.triage("queued")
        return True

    def take_over(self) -> int:
        """Give up on work whose workers kept dying, then queue every claimable work row not
        queued here already (new, due, or left by a dead worker). Returns how many."""
        self.engine.work.give_up_exhausted()
        queued = 0
        for work_id in self.engine.work.due_work(limit=self.queue_limit):
            if self._queue_work(work_id, incident_id=None):
                queued += 1
        return queued

    def submit_expiry(self, incident_id: int) -> bool:
        """Queue the expiry of the silences the bot created for a now resolved incident (the
        hooks hear of the resolution first)."""
        return self._queue(lambda: self._expire_silences(incident_id))

    def wait_idle(self, timeout: float) -> bool:
        """Block until every queued job has finished (tests, shutdown). False on timeout."""
        with self._lock:
            pending = list(self._futures)
        for future in pending:
            try:
                future.result(timeout=timeout)
            except TimeoutError:
                return False
        return True

    def shutdown(self) -> None:
        """Hand queued work back to the database (a queued row is not claimed until a worker
        starts it, so cancelling it leaves it pending for the next worker or replica), let
        the runs in progress finish, then release any lease this worker still holds."""
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        leases = self.engine.work.leases
        with session_scope(self.db) as session:
            work_store.release(session, owner=leases.owner)

    # -- internals ---------------------------------------------------------------------------
    def _queue_due(self, work_ids: list[int]) -> None:
        """Rows that finished work made due (a storm's next run): queue them now."""
        for work_id in work_ids:
            self._queue_work(work_id, incident_id=None)

    def _queue_work(self, work_id: int, *, incident_id: int | None) -> bool:
        with self._lock:
            expected = self._payloads.pop(work_id, None)
            if work_id in self._queued:
                return False
            self._queued.add(work_id)
        if self._queue(lambda: self._perform(work_id, incident_id, expected)):
            return True
        with self._lock:
            self._queued.discard(work_id)
        return False

    def _perform(
        self, work_id: int, incident_id: int | None, expected: RecordedTriage | None = None
    ) -> None:
        """Do one work row. `incident_id` is set for a fresh triage (its watcher is told);
        `expected` is a triage recorded by this process."""
        try:
            watcher = None
            if incident_id is not None and self.hooks is not None:
                watcher = self.hooks.incident_opened(incident_id)
            try:
                outcome = self.engine.work.perform(
                    work_id, on_step=watcher.on_step if watcher else None, expected=expected
                )
            except (OncallError, IntegrationError, StorageError):
                self.counters.triage("failed")  # the engine recorded it on the timeline
                return
            if outcome is None:
                return  # another worker holds it, or it is done
            if watcher is not None:
                watcher.finish(outcome)
            self.counters.triage(outcome.status)
        finally:
            with self._lock:
                self._queued.discard(work_id)

    def _queue(self, job: Callable[[], None]) -> bool:
        with self._lock:
            if self._closed or self._waiting >= self.queue_limit:
                return False  # the row stays in the database for the next worker
            self._waiting += 1
            self.counters.queue_depth = self._waiting
            future = self._pool.submit(self._guarded, job)
            self._futures.add(future)
        future.add_done_callback(self._done)
        return True

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._futures.discard(future)

    def _guarded(self, job: Callable[[], None]) -> None:
        with self._lock:
            self._waiting -= 1
            self.counters.queue_depth = self._waiting
        try:
            job()
        except Exception:  # boundary: a worker thread must survive any one job
            ref = uuid.uuid4().hex[:6]
            logger.exception("triage job failed (ref %s)", ref, extra={"ref": ref})
            self.counters.triage("failed")

    def _expire_silences(self, incident_id: int) -> None:
        if self.hooks is not None:
            self.hooks.incident_resolved(incident_id)
        silences = self.silences
        if silences is None:
            return
        for text, failed in expire_incident_silences(self.db, silences, incident_id):
            self._note(incident_id, text, failed=failed)

    def _note(self, incident_id: int, text: str, *, failed: bool = False) -> None:
        kind = EventKind.STEP_FAILED if failed else EventKind.NOTE
        with session_scope(self.db) as session:
            lifecycle.record(
                session,
                incident_id=incident_id,
                kind=kind,
                at=self.clock.now(),
                actor=BOT,
                summary=text,
            )
