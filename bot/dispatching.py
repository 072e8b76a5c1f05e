"""Triage in the background: a bounded pool of workers starts the runbook run of each newly
opened incident, and expires the bot's silences when an incident resolves.

A boundary: a run's own failures are recorded on the timeline by `engine/running.py`; what
fails before or around a run is recorded here, so nothing is lost silently. The webhook never
waits for a worker: `submit` only queues, and refuses (on the timeline) when the queue is full.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

from bot.engine.running import RunOutcome
from bot.errors import OncallError
from bot.incidents import lifecycle
from bot.incidents.timeline import BOT, EventKind
from bot.intake.receiving import Received
from bot.metrics import IntakeCounters
from bot.wiring import Runtime
from integrations.errors import IntegrationError
from storage import actions as action_store
from storage import runs as run_store
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
        self, rt: Runtime, *, workers: int, queue_limit: int, counters: IntakeCounters
    ) -> None:
        self.rt, self.counters, self.queue_limit = rt, counters, queue_limit
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="triage")
        self._lock = threading.Lock()
        self._waiting = 0
        self._futures: set[Future[None]] = set()

    def submit_run(self, received: Received) -> bool:
        """Queue the run of a newly opened incident; False (and a timeline note) when full."""
        if not self._queue(lambda: self._start(received)):
            assert received.incident_id is not None
            self._note(
                received.incident_id,
                f"Not triaged automatically: {self.queue_limit} runs were already waiting. "
                f"Start it by hand: gpu-oncall run {received.runbook} "
                f"{received.target_input}={received.target}",
            )
            self.counters.triage("dropped")
            return False
        self.counters.triage("queued")
        return True

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
        self._pool.shutdown(wait=True, cancel_futures=False)

    # -- internals ---------------------------------------------------------------------------
    def _queue(self, job: Callable[[], None]) -> bool:
        with self._lock:
            if self._waiting >= self.queue_limit:
                return False
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

    def _start(self, received: Received) -> None:
        assert received.incident_id is not None and received.runbook is not None
        incident_id = received.incident_id
        loaded = self.rt.catalog.get(received.runbook)
        inputs = received.run_inputs(loaded.runbook.inputs)
        if inputs is None:
            self._note(
                incident_id,
                f"Storm of {len(received.members)} targets grouped; runbook "
                f"'{loaded.name}' takes no `nodes` input, so no run was started. "
                "Diagnose the members with gpu-oncall run/diagnose.",
            )
            self.counters.triage("not_started")
            return
        watcher = self.hooks.incident_opened(incident_id) if self.hooks else None
        try:
            outcome = self.rt.engine.start(
                loaded,
                inputs=inputs,
                incident_id=incident_id,
                requester="alertmanager",
                on_step=watcher.on_step if watcher else None,
            )
        except (OncallError, IntegrationError, StorageError) as exc:
            self._note(incident_id, f"Triage run of '{loaded.name}' stopped: {exc}", failed=True)
            self.counters.triage("failed")
            return
        if watcher is not None:
            watcher.finish(outcome)
        self.counters.triage(outcome.status)

    def _expire_silences(self, incident_id: int) -> None:
        if self.hooks is not None:
            self.hooks.incident_resolved(incident_id)
        silences = self.rt.deps.silences
        if silences is None:
            return
        with session_scope(self.rt.db) as session:
            runs = run_store.list_runs_for_incident(session, incident_id)
            rows = [
                row
                for run in runs
                for row in action_store.list_actions(session, run_id=run.id)
                if row.action == "silence" and row.status == "succeeded"
            ]
        ids = [str(i) for row in rows for i in row.result.get("data", {}).get("silence_ids", [])]
        for silence_id in dict.fromkeys(ids):
            try:
                outcome = silences.expire(silence_id)
            except IntegrationError as exc:
                self._note(
                    incident_id, f"Could not expire silence {silence_id}: {exc}", failed=True
                )
                continue
            self._note(incident_id, f"Silence {silence_id} expired ({outcome.value}): resolved")

    def _note(self, incident_id: int, text: str, *, failed: bool = False) -> None:
        kind = EventKind.STEP_FAILED if failed else EventKind.NOTE
        with session_scope(self.rt.db) as session:
            lifecycle.record(
                session,
                incident_id=incident_id,
                kind=kind,
                at=self.rt.clock.now(),
                actor=BOT,
                summary=text,
            )
