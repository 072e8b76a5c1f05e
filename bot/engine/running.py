"""Start, resume and record runbook runs.

A run is a LangGraph thread (thread_id = run id) checkpointed after every super-step, so the
approval's checkpoint is on disk before the run reports that it waits: a run that stops at its
approval survives a restart. This module is a boundary: it turns the step outputs of each
super-step into timeline events, findings, approvals and incident transitions (one transaction
per super-step; a super-step of reads and checks goes with the next one), and it records a
`step_failed` event for anything that escapes a node before re-raising it.

Durable work (bot/engine/working.py, storage/work.py): a triage run, a decided approval's
resumption and a verification timer are work rows claimed under a lease (`perform`). A run taken
over from a dead worker continues from its last checkpoint (`continue_run`); a run that fails,
cannot start, or whose workers keep dying ends `failed` with its incident, the reason on the
timeline. Longer than our usual module: driving, streaming and recording a run are one
transaction discipline and read best together; the work queue and the inputs live apart.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.runtime import Runtime as LangGraphRuntime
from langgraph.types import Command, Interrupt
from sqlalchemy.engine import Engine

from bot.actions.policy import Policy
from bot.clock import FakeClock
from bot.engine import deferred, executors
from bot.engine.approving import Approving
from bot.engine.catalog import RunbookCatalog
from bot.engine.collector import tune_collector
from bot.engine.compiling import build_graph
from bot.engine.decisions import Decide, decided_run
from bot.engine.idle_steps import may_wait, quiet_task
from bot.engine.inputs import resolve_inputs
from bot.engine.leases import LeaseKeeper
from bot.engine.loading import LoadedRunbook
from bot.engine.outcomes import FINISHED, StepCallback
from bot.engine.outcomes import RunOutcome as RunOutcome  # re-exported: callers import it here
from bot.engine.policies import policy_for
from bot.engine.recording import Recorder, StepDone, recording
from bot.engine.schema import StepKind
from bot.engine.snapshotting import snapshot_verdicts
from bot.engine.stages import (
    Shape,
    StageNode,
    checkpoint_shape,
    followed_by_decisions,
    held_nodes,
    steps_done_before,
)
from bot.engine.state import Deps, RunState
from bot.engine.targets import check_node_exists
from bot.engine.working import WorkQueue
from bot.errors import NotFound, RunStateError, StepError, UserInputError
from bot.incidents import lifecycle
from bot.incidents.timeline import BOT, EventKind
from bot.limits import STORAGE_RETRY_BACKOFF_SECONDS
from storage import approvals as approval_store
from storage import incidents as incident_store
from storage import runs as run_store
from storage.checkpointer_savers import QuietTask, flush_writes, hold_after, new_thread
from storage.db import session_scope
from storage.transient import RetryPolicy, retry_transient

logger = logging.getLogger(__name__)


DURABILITY = "sync"
"""LangGraph writes a run's checkpoint after every super-step, before the next one starts
(STYLE §2.5.5): the approval's checkpoint is on disk before `stream()` returns. "exit" (one
write when the stream stops) would save ~10 ms per triage run at 1,024 nodes
(docs/performance.md), but a run taken over after a crash (`continue_run`) would then start
again from its beginning instead of from its last finished super-step. The savers commit a
super-step's task writes with its checkpoint, not one by one (storage/checkpointer_savers.py),
and the engine commits an interrupt's writes itself when a stream stops (`flush_writes`);
what each crash point may lose is in docs/operations.md ("What a crash may lose")."""


SHAPES_KEPT = 10_000
"""Runs whose graph's shape (bot.engine.stages.Shape) is remembered, not read again."""


class RunEngine:
    """Runs runbooks against the injected Deps, persisting into the database and checkpointer."""

    def __init__(
        self,
        *,
        deps: Deps,
        db: Engine,
        checkpointer: BaseCheckpointSaver[Any],
        catalog: RunbookCatalog,
        leases: LeaseKeeper | None = None,
        inline_timers: bool | None = None,
    ) -> None:
        self.deps, self.db, self.checkpointer, self.catalog = deps, db, checkpointer, catalog
        self.work = WorkQueue(
            db=db, deps=deps, catalog=catalog, leases=leases or LeaseKeeper(db), driver=self
        )
        """The durable work rows this engine's runs are claimed and performed as."""
        self.inline_timers = (
            isinstance(deps.clock, FakeClock) if inline_timers is None else inline_timers
        )
        """Timers pass at once on simulated time (the demo and the CLI finish at once)."""
        self.follow_timers = True
        """On wall-clock time, whether the thread driving a run waits for its timers itself
        (a CLI command: the person watches the run; its work row's lease, kept alive while it
        waits, makes a kill safe) or leaves each as a durable `timer` work row that the
        scheduler resumes when due (`serve`: no thread ever waits for a verification)."""
        self.storage_retry = RetryPolicy(STORAGE_RETRY_BACKOFF_SECONDS)
        """How a run retries transient storage errors (bot/limits.py; tests shorten it)."""
        self._compiled: dict[tuple[str, Shape], Any] = {}
        self._held: dict[tuple[str, Shape], frozenset[str]] = {}  # as `_compiled`, by graph
        self._openers: dict[tuple[str, Shape], list[StageNode]] = {}  # as `_compiled`
        self._shapes: dict[str, Shape] = {}  # run id -> its graph (bounded: SHAPES_KEPT)
        self._shapes_lock = threading.Lock()
        executors.share()  # one thread pool for every run's steps, not one per stream
        tune_collector()  # a fleet-wide read's objects die young (bot/engine/collector.py)

    def _app(self, loaded: LoadedRunbook, run_id: str) -> Any:
        """The compiled graph `run_id` goes on: fused stages (bot/engine/stages.py), unless
        its checkpoint was written by an older shape of graph (a run that waited for its
        approval across the upgrade goes on as it began)."""
        return self._graph(loaded, self._shape(loaded, run_id))

    def _graph(self, loaded: LoadedRunbook, shape: Shape) -> Any:
        key = (loaded.name, shape)
        if key not in self._compiled:
            openers: list[StageNode] = []
            graph = build_graph(loaded, shape, openers=openers)
            self._openers[key] = openers
            self._compiled[key] = graph.compile(checkpointer=self.checkpointer)
        return self._compiled[key]

    def read_ahead(
        self,
        loaded: LoadedRunbook,
        resolved: Mapping[str, Any],
        incident_id: int,
        requester: str,
        run_id: str,
    ) -> bool:
        """Start the first stage's reads of a fresh run not yet recorded (`run_id`, of
        validated inputs) on the stage pool, for its stage to wait for when the graph runs it
        (bot/engine/reads_ahead.py); False when there are none to start: the telemetry answers
        with this process's CPU (`Deps.parallel_reads`), or the graph does not begin with a
        stage. `drop_reads` forgets them if the run is not started."""
        if not self.deps.parallel_reads:
            return False
        self._graph(loaded, Shape.FUSED)  # a fresh run's (`record_run`)
        openers = self._openers[(loaded.name, Shape.FUSED)]
        if not openers:
            return False
        state = _fresh_state(loaded, resolved, incident_id, requester, run_id)
        futures = openers[0].start_reads(state, LangGraphRuntime(context=self.deps))
        self.deps.reads_ahead.put(run_id, openers[0].name, state, futures)
        return True

    def drop_reads(self, run_id: str) -> None:
        """Forget the reads started ahead for `run_id` (`read_ahead`), if any."""
        self.deps.reads_ahead.drop(run_id)

    def _held_nodes(self, loaded: LoadedRunbook, run_id: str) -> frozenset[str]:
        """The nodes whose super-steps' checkpoints the saver may hold for the run
        (`stages.held_nodes`), on the graph the run goes on."""
        key = (loaded.name, self._shape(loaded, run_id))
        if key not in self._held:
            self._held[key] = held_nodes(loaded, key[1])
        return self._held[key]

    def _shape(self, loaded: LoadedRunbook, run_id: str) -> Shape:
        with self._shapes_lock:
            known = self._shapes.get(run_id)
        if known is None:
            found = self.checkpointer.get_tuple({"configurable": {"thread_id": run_id}})
            known = checkpoint_shape(loaded, found.checkpoint if found is not None else {})
            self._remember_shape(run_id, known)
        return known

    def _remember_shape(self, run_id: str, shape: Shape) -> None:
        with self._shapes_lock:
            self._shapes[run_id] = shape
            while len(self._shapes) > SHAPES_KEPT:
                self._shapes.pop(next(iter(self._shapes)))

    # -- start -------------------------------------------------------------------------------
    def open_incident(
        self, loaded: LoadedRunbook, inputs: Mapping[str, Any], *, actor: str
    ) -> tuple[int, str]:
        """The incident a person's run is about, opened now or the open one for the same
        runbook and target: its id and the target (the target input's value, else the runbook).
        A node target the cluster does not know is refused first (UnknownNodeError): no
        incident is opened for a typo."""
        name = loaded.runbook.target_input
        target = str(inputs.get(name, "")) if name else loaded.name
        kind = loaded.runbook.inputs[name].type if name else "runbook"
        if kind == "node":
            check_node_exists(self.deps.cluster, target)
        now = self.deps.clock.now()
        with session_scope(self.db) as session:
            incident, _ = lifecycle.open_or_attach(
                session,
                runbook=loaded.name,
                target=target,
                target_kind=kind,
                # No alert said when impact began (a person may say so: `/gpu fired`), and
                # nothing is known to be wrong yet: the findings set the severity.
                severity="info",
                title=f"{loaded.runbook.metadata.title or loaded.name}: {target}",
                fired_at=None,
                detected_at=now,
                actor=actor,
            )
            return int(incident.id or 0), target

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
    ) -> RunOutcome:
        """Validate inputs, record the run and drive it until it ends or waits for approval.

        A run started here (a person's command, no `run_id`) is `triage` work this worker
        claims, so if the process dies a `serve` worker takes it over. `run_id` (a triage work
        row's) makes a start after a crash continue the run it began. Inputs that do not
        validate, or a node the cluster does not know, end the incident `failed` (unless
        another run is already working on it) and raise. `unrecorded`: the caller holds the
        work row and read that no run `run_id` is recorded (nothing to continue)."""
        if run_id is not None and not unrecorded and self._run_exists(run_id):
            return self.continue_run(run_id, on_step=on_step)
        try:
            resolved = self._validated(loaded, inputs)
        except (UserInputError, NotFound) as exc:
            self.work.fail_incident(
                incident_id, f"Run of '{loaded.name}' could not start: {exc}", only_if_idle=True
            )
            raise
        if run_id is not None:  # a webhook's triage: its work row is claimed already
            with session_scope(self.db) as session:
                self.record_run(session, loaded, resolved, incident_id, requester, run_id)
            return self.drive_recorded(loaded, resolved, incident_id, requester, run_id, on_step)
        run_id = uuid.uuid4().hex
        with recording(self.db, self.deps.clock) as recorder:  # the work and the run, at once
            item = self.work.record_work(
                recorder.session,
                kind="triage",
                key=f"triage:{run_id}",
                incident_id=incident_id,
                run_id=run_id,
                payload={"runbook": loaded.name, "inputs": resolved, "requester": requester},
                claim=True,
            )
            self.record_run(recorder.session, loaded, resolved, incident_id, requester, run_id)
        state = _fresh_state(loaded, resolved, incident_id, requester, run_id)
        return self.work.perform_claimed(
            item, on_step, run=lambda: self._drive_new(loaded, run_id, incident_id, state, on_step)
        )

    def _drive_new(
        self,
        loaded: LoadedRunbook,
        run_id: str,
        incident_id: int,
        state: RunState,
        on_step: StepCallback | None,
    ) -> RunOutcome:
        """Drive a run recorded in a transaction committed just before, by this process, from
        its inputs: no process has driven it, so its graph starts without reading a
        checkpoint (the saver answers that it has none, once: `new_thread`)."""
        with new_thread(self.checkpointer, run_id):
            return self._drive(loaded, run_id, incident_id, state, on_step)

    def _validated(self, loaded: LoadedRunbook, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The resolved inputs; UserInputError, or NotFound for a node the cluster does not
        know."""
        resolved = resolve_inputs(loaded, inputs)
        target_name = loaded.runbook.target_input
        target = str(resolved.get(target_name, "")) if target_name else ""
        if target_name and loaded.runbook.inputs[target_name].type == "node":
            self._check_node_exists(target)
        return dict(resolved)

    def checked_inputs(
        self, loaded: LoadedRunbook, inputs: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """A triage's resolved inputs, read before its work row is claimed (so the run is
        recorded in the claim's transaction); None when they do not validate: `start` then
        says why and fails the incident."""
        try:
            return self._validated(loaded, inputs)
        except (UserInputError, NotFound):
            return None

    def record_run(
        self,
        session: Any,
        loaded: LoadedRunbook,
        resolved: Mapping[str, Any],
        incident_id: int,
        requester: str,
        run_id: str,
    ) -> None:
        """Record a new run of validated inputs in the caller's transaction."""
        recorder = Recorder(session, self.deps.clock)
        self._create_run(recorder, loaded, resolved, incident_id, requester, run_id)
        recorder.flush()
        self._remember_shape(run_id, Shape.FUSED)  # a new run: no checkpoint to read

    def drive_recorded(
        self,
        loaded: LoadedRunbook,
        resolved: Mapping[str, Any],
        incident_id: int,
        requester: str,
        run_id: str,
        on_step: StepCallback | None = None,
    ) -> RunOutcome:
        """Drive a run `record_run` recorded, from its inputs."""
        state = _fresh_state(loaded, resolved, incident_id, requester, run_id)
        return self._drive_new(loaded, run_id, incident_id, state, on_step)

    def _create_run(
        self,
        recorder: Recorder,
        loaded: LoadedRunbook,
        resolved: Mapping[str, Any],
        incident_id: int,
        requester: str,
        run_id: str,
    ) -> None:
        """Record a run of validated inputs (status `running`) and its start on the timeline."""
        name = loaded.runbook.target_input
        target = str(resolved.get(name, "")) if name else ""
        logger.info(
            "run %s of %s on INC-%s started by %s%s",
            run_id[:8],
            loaded.name,
            incident_id,
            requester,
            f" for {target}" if target else "",
            extra={"incident_id": incident_id, "run_id": run_id, "target": target},
        )
        run_store.create_run(
            recorder.session,
            run_id=run_id,
            incident_id=incident_id,
            runbook=loaded.name,
            inputs=dict(resolved) | {"requester": requester},
            at=self.deps.clock.now(),
        )
        recorder.run_started(incident_id, run_id, loaded, target, requester)

    def _run_exists(self, run_id: str) -> bool:
        with session_scope(self.db) as session:
            return run_store.get_run(session, run_id) is not None

    def policy_for(self, runbook: str) -> Policy:
        """The approval policy of `runbook`: its YAML `policy:` over the settings' defaults
        (the defaults alone for a runbook no longer in the catalog)."""
        try:
            loaded = self.catalog.get(runbook)
        except NotFound:
            loaded = None
        return policy_for(self.deps.policy, loaded)

    def _check_node_exists(self, node: str) -> None:
        check_node_exists(self.deps.cluster, node)

    # -- resume ------------------------------------------------------------------------------
    def resume(
        self,
        run_id: str,
        *,
        decision: str,
        actor: str,
        reason: str = "",
        on_step: StepCallback | None = None,
        groups: Collection[str] = (),
        only: Collection[str] = (),
    ) -> RunOutcome:
        """Approve or reject the run's pending approval and drive the run to its end: the
        approval use case (bot/engine/approving.py: one read of the approval, one policy
        resolution, one conditional decision) with its outcome as the run or an exception.

        `only` approves a subset: the named actions run now, the others stay pending as a new
        approval with its own expiry (bot/engine/steps/remediate.py); the approver policy is
        checked against the risks of the approved actions alone.

        `groups` are the approver groups `actor` belongs to (e.g. Slack user groups), resolved
        by the caller. An approval must pass the approver policy; the safety limits are checked
        when each action is claimed (bot/actions/guarding.py), not here.
        The decision and a `resume` work row commit together; this worker claims the row, so
        if it dies mid-way the next worker (a `serve` replica, or a second `approve` of the
        same run) takes the resumption over instead of refusing it.
        """
        member = frozenset(groups)
        request = Decide(
            ref=run_id,
            decision=decision,
            actor=actor,
            reason=reason,
            only=tuple(only),
            groups=lambda _approvers: member,
        )
        return decided_run(Approving.of(self).decide(request, on_step=on_step))

    # -- continue ----------------------------------------------------------------------------
    def continue_run(
        self, run_id: str, *, answer: Any = None, on_step: StepCallback | None = None
    ) -> RunOutcome:
        """Drive a run on from its last checkpoint: from the start if it never wrote one, with
        `answer` at a pending interrupt, else on to its end (recording what the timeline lacks).
        A run already finished is reported as it is."""
        with session_scope(self.db) as session:
            run = run_store.get_run(session, run_id)
            if run is None:
                raise NotFound(f"unknown run '{run_id}'")
            status, incident_id, inputs = run.status, run.incident_id, dict(run.inputs)
            loaded = self.catalog.get(run.runbook)
        app = self._app(loaded, run_id)
        config = {"configurable": {"thread_id": run_id}}
        snapshot = app.get_state(config)
        steps = dict((snapshot.values or {}).get("steps", {}))
        if status in FINISHED:
            return self._outcome(loaded, run_id, incident_id, status, steps)
        if not snapshot.values:
            state = _initial_state(loaded, run_id, incident_id, inputs)
            return self._drive(loaded, run_id, incident_id, state, on_step)
        recorded = self._catch_up(loaded, run_id, incident_id, steps)
        waiting = [i for task in snapshot.tasks for i in task.interrupts]
        asks = [i for i in waiting if not _is_timer(i.value)]
        if asks and answer is None:
            payload = dict(asks[0].value)
            self._ensure_approval(incident_id, run_id, payload)
            return self._outcome(loaded, run_id, incident_id, "awaiting_approval", steps, payload)
        if waiting and answer is None:  # timers only: due now or scheduled
            answer = self._timer_answer()
            due = min(datetime.fromisoformat(str(i.value["due_at"])) for i in waiting)
            values = [i.value for i in waiting]
            if not self._follows(values) and due > self.deps.clock.now():
                self._schedule(run_id, incident_id, due, values)
                return self._outcome(loaded, run_id, incident_id, "waiting", steps)
        if waiting:
            command = _resume_command(waiting, answer)
            return self._drive(loaded, run_id, incident_id, command, on_step, recorded)
        if snapshot.next:
            return self._drive(loaded, run_id, incident_id, None, on_step, recorded)
        return self._finished(loaded, run_id, incident_id, steps)

    def _catch_up(
        self, loaded: LoadedRunbook, run_id: str, incident_id: int, steps: Mapping[str, Any]
    ) -> set[str]:
        """Record the checkpointed steps the timeline lacks (the process died between a
        super-step's checkpoint and its records, or in a super-step whose finished steps'
        writes were saved); returns the checkpointed step ids, all recorded now, which the
        stream skips when it replays those writes."""
        with session_scope(self.db) as session:
            events = incident_store.list_events(session, incident_id)
            recorded = {  # a step's outcome; asking for an approval is not its outcome
                e.step_id
                for e in events
                if e.run_id == run_id and e.step_id and e.kind != EventKind.APPROVAL_REQUESTED
            }
        now = self.deps.clock.now()
        missing = [
            StepDone(incident_id, run_id, loaded, step_id, output, now)
            for step_id, output in steps.items()
            if step_id not in recorded
        ]
        self._record(missing, None)
        return set(steps)

    def _ensure_approval(self, incident_id: int, run_id: str, payload: Mapping[str, Any]) -> None:
        with session_scope(self.db) as session:
            step_id = str(payload.get("step_id"))
            found = approval_store.get_approval_for_step(session, run_id=run_id, step_id=step_id)
        if found is None:
            self._record([], None, approval=(incident_id, run_id, payload))

    def expire_due(self) -> list[RunOutcome]:
        """Take the rejected branch for every approval past its expiry (a scheduler job)."""
        now = self.deps.clock.now()
        with session_scope(self.db) as session:
            due = [
                row.run_id for row in approval_store.list_pending(session) if row.expires_at <= now
            ]
        outcomes = []
        for run_id in due:
            try:
                outcomes.append(self.resume(run_id, decision="reject", actor="bot"))
            except RunStateError:
                continue  # decided concurrently by a person: nothing to expire
        return outcomes

    # -- driving -----------------------------------------------------------------------------
    def _drive(
        self,
        loaded: LoadedRunbook,
        run_id: str,
        incident_id: int,
        graph_input: Any,
        on_step: StepCallback | None,
        recorded: set[str] | None = None,
    ) -> RunOutcome:
        """Stream the graph until it ends, waits for approval, or waits for a timer.

        On simulated time a timer passes at once (the clock's sleep advances it) and the run
        goes on; so it does on wall-clock time when `follow_timers` (the thread sleeps until
        it is due). Otherwise it becomes a `timer` work row due when the verification polls
        next, and the run stops here (status `waiting`) without holding a thread.
        """
        seen = set(recorded or ())  # steps on the timeline already: never recorded twice
        while True:
            interrupts, ended = self._stream(
                loaded, run_id, incident_id, graph_input, on_step, seen
            )
            if not interrupts:  # the stream recorded its finish with its last steps
                return self._ended(loaded, run_id, incident_id, ended or {})
            config = {"configurable": {"thread_id": run_id}}
            steps = dict(self._app(loaded, run_id).get_state(config).values.get("steps", {}))
            asks = [i for i in interrupts if not _is_timer(i.value)]
            if asks:
                approval = dict(asks[0].value)
                return self._outcome(
                    loaded, run_id, incident_id, "awaiting_approval", steps, approval
                )
            values = [i.value for i in interrupts]
            deferred.announce(self.db, self.deps, incident_id, run_id, values)
            due = min(datetime.fromisoformat(str(i.value["due_at"])) for i in interrupts)
            if not self._follows(values):
                self._schedule(run_id, incident_id, due, values)
                return self._outcome(loaded, run_id, incident_id, "waiting", steps)
            wait = (due - self.deps.clock.now()).total_seconds()
            if wait > 0:
                self.deps.clock.sleep(wait)
            graph_input = _resume_command(interrupts, self._timer_answer())

    def _follows(self, values: Sequence[Any]) -> bool:
        """Whether this thread waits for the timers itself: always on simulated time (a
        timer passes at once); on wall-clock time a verification's poll when `follow_timers`,
        a drain waiting for a checkpoint never (it may wait an hour: a durable row that
        `serve` resumes when due, whoever approved it)."""
        plans = deferred.plans_waiting(values)
        return self.inline_timers or (self.follow_timers and not plans)

    def _schedule(
        self, run_id: str, incident_id: int, due: datetime, values: Sequence[Any]
    ) -> None:
        """A durable `timer` row, carrying the drains that wait for a checkpoint."""
        plans = deferred.plans_waiting(values)
        self.work.schedule_timer(run_id, incident_id, due, plan=plans or None)

    def _timer_answer(self) -> dict[str, Any]:
        return {"kind": "timer", "at": self.deps.clock.now().isoformat()}

    def _stream(
        self,
        loaded: LoadedRunbook,
        run_id: str,
        incident_id: int,
        graph_input: Any,
        on_step: StepCallback | None,
        seen: set[str],
    ) -> tuple[list[Interrupt], dict[str, Any] | None]:
        """Stream the graph, recording each super-step's steps in one transaction when it ends;
        returns the interrupts it stopped at, and when there are none (the graph ended) the
        steps of its final state (its last "values" chunk: no checkpoint read).

        "updates" chunks bring the steps as they complete; a "values" chunk follows each
        super-step. The approval is recorded only after the stream has stopped, when its
        checkpoint is written.

        A transient storage error (the database busy or locked, a serialization failure, a
        reset connection: storage/transient.py) does not fail the run: the stream starts again
        from the run's last checkpoint after a pause, at most `STORAGE_RETRIES` times (bot/
        limits.py) while this worker's lease is kept alive, and the timeline says so. Any other
        error, or the last transient one, fails the run.
        """
        app = self._app(loaded, run_id)
        config = {"configurable": {"thread_id": run_id}}
        pending: list[StepDone] = []  # completed in the current super-step, not yet recorded
        first_input, started_at = graph_input, _checkpoint_id(app, config, graph_input)

        def resume_after(retry: int, exc: BaseException) -> None:
            """What the next try streams: the checkpointed steps the timeline lacks are
            recorded, then the graph goes on from its last checkpoint."""
            nonlocal graph_input
            pending.clear()  # re-run, or recorded below from the checkpoint
            snapshot = app.get_state(config)
            if snapshot.values:
                steps = dict(snapshot.values.get("steps", {}))
                seen.update(self._catch_up(loaded, run_id, incident_id, steps))
            moved = snapshot.values and (
                started_at is None or _checkpoint_id(app, config, first_input) != started_at
            )
            graph_input = None if moved else first_input
            self._note(
                incident_id,
                run_id,
                f"Storage was busy during run {run_id[:8]} ({_one_line(exc)}); retry {retry} "
                f"of {self.storage_retry.retries} from its last checkpoint",
            )

        def once() -> tuple[list[Interrupt], dict[str, Any] | None]:
            return self._stream_once(
                loaded, run_id, incident_id, graph_input, on_step, seen, pending
            )

        try:
            return retry_transient(
                once,
                self.storage_retry,
                what=f"run {run_id[:8]} of {loaded.name} on INC-{incident_id}",
                on_retry=lambda retry, exc: retry_transient(
                    lambda: resume_after(retry, exc), self.storage_retry, what=f"run {run_id[:8]}"
                ),
            )
        except Exception as exc:  # boundary: record, then re-raise
            ref = uuid.uuid4().hex[:6]
            logger.exception(
                "run failed", extra={"run_id": run_id, "incident_id": incident_id, "ref": ref}
            )
            at = self.deps.clock.now()
            done = [d for d in steps_done_before(exc).items() if d[0] not in seen]
            with recording(self.db, self.deps.clock) as recorder:
                for step in pending:
                    recorder.step(step)
                for step_id, output in done:  # a fused stage's levels that ran
                    recorder.step(StepDone(incident_id, run_id, loaded, step_id, output, at))
                recorder.run_failed(incident_id, run_id, exc, ref)
            why = (
                f": {exc}"
                if isinstance(exc, StepError)
                else f" ({type(exc).__name__}, ref {ref}); see the bot's log"
            )
            reason = f"Run of '{loaded.name}' failed{why}"
            self.work.fail_incident(incident_id, reason, run_id=run_id)
            raise

    def _note(self, incident_id: int, run_id: str, text: str) -> None:
        with session_scope(self.db) as session:
            lifecycle.record(
                session,
                incident_id=incident_id,
                kind=EventKind.NOTE,
                at=self.deps.clock.now(),
                actor=BOT,
                summary=text,
                run_id=run_id,
            )

    def _stream_once(
        self,
        loaded: LoadedRunbook,
        run_id: str,
        incident_id: int,
        graph_input: Any,
        on_step: StepCallback | None,
        seen: set[str],
        pending: list[StepDone],
    ) -> tuple[list[Interrupt], dict[str, Any] | None]:
        """One stream of the graph (see `_stream`); `pending` holds the steps of the current
        super-step not yet recorded, for the caller to record if this raises.

        A super-step of proposals only is recorded in one transaction with the next one (the
        approval), and so is one of reads or checks followed by checks and verdicts alone
        (`followed_by_decisions`), and one of a verdict of no fault or of remediation steps
        that did nothing (bot/engine/idle_steps.py: their checkpoints wait too). When the graph
        ends, the last steps and the run's finish are recorded in one transaction.
        A crash in between leaves those steps off the timeline until the run is taken over;
        they are in its checkpoint, or run again from the one before, and `_catch_up` records
        them then."""
        config = {"configurable": {"thread_id": run_id}}
        interrupts: list[Interrupt] = []
        steps: dict[str, Any] | None = None  # the state's steps after the last super-step
        with self._flushing(run_id, self._held_nodes(loaded, run_id), quiet_task(loaded)):
            for mode, chunk in self._app(loaded, run_id).stream(
                graph_input,
                config,
                context=self.deps,
                stream_mode=["updates", "values"],
                durability=DURABILITY,
            ):
                if mode == "values":
                    steps = chunk.get("steps", {})
                    if (
                        _proposals_only(loaded, pending)
                        or followed_by_decisions(loaded, [d.step_id for d in pending])
                        or may_wait(loaded, ((d.step_id, d.output) for d in pending))
                    ):
                        continue  # recorded with the next super-step's steps
                    done = list(pending)
                    pending.clear()
                    self._record(done, on_step)
                    snapshot_verdicts(deps=self.deps, db=self.db, done=done, steps=steps)
                    continue
                for node, value in chunk.items():
                    if node == "__interrupt__":
                        interrupts.extend(value)
                        continue
                    at = self.deps.clock.now()
                    for step_id, output in (value or {}).get("steps", {}).items():
                        if step_id not in seen:  # a resumed super-step replays saved writes
                            seen.add(step_id)
                            pending.append(
                                StepDone(incident_id, run_id, loaded, step_id, output, at)
                            )
        done = list(pending)
        pending.clear()
        asks = [i for i in interrupts if not _is_timer(i.value)]
        requested = (incident_id, run_id, dict(asks[0].value)) if asks else None
        finished = None
        if not interrupts:  # the graph ended: the run's finish goes with its last steps
            if steps is None:  # nothing ran (a retry after the last super-step)
                steps = dict(self._app(loaded, run_id).get_state(config).values.get("steps", {}))
            status = self._final_status(steps)
            finished = (incident_id, run_id, loaded, steps, status)
        self._record(done, on_step, approval=requested, finished=finished)
        snapshot_verdicts(deps=self.deps, db=self.db, done=done, steps=steps or {})
        return interrupts, (dict(steps or {}) if not interrupts else None)

    @contextmanager
    def _flushing(self, run_id: str, held: frozenset[str], quiet: QuietTask) -> Iterator[None]:
        """Let the saver hold the checkpoints of the run's super-steps of `held` nodes
        (`stages.held_nodes`) and of `quiet` tasks (`idle_steps.quiet_task`) while the stream
        runs, and commit what it holds for the run when the stream stops: an interrupt's writes
        are on disk before it is recorded. After an error, the finished tasks' writes are saved
        as before it; a storage error then must not hide the stream's own."""
        hold_after(self.checkpointer, run_id, held, quiet=quiet)
        try:
            yield
        except BaseException:
            hold_after(self.checkpointer, run_id, ())
            try:
                flush_writes(self.checkpointer, run_id)
            except Exception:  # boundary: the stream's own error is the one to report
                logger.warning("run %s: task writes not saved", run_id[:8], exc_info=True)
            raise
        hold_after(self.checkpointer, run_id, ())
        flush_writes(self.checkpointer, run_id)

    def _finished(
        self, loaded: LoadedRunbook, run_id: str, incident_id: int, steps: Mapping[str, Any]
    ) -> RunOutcome:
        """Record the finish of a run whose graph has ended, and report it."""
        status = self._final_status(steps)
        self._record([], None, finished=(incident_id, run_id, loaded, steps, status))
        return self._ended(loaded, run_id, incident_id, steps)

    def _ended(
        self, loaded: LoadedRunbook, run_id: str, incident_id: int, steps: Mapping[str, Any]
    ) -> RunOutcome:
        """Report a run whose finish is recorded."""
        status = self._final_status(steps)
        logger.info(
            "run %s of %s on INC-%s %s",
            run_id[:8],
            loaded.name,
            incident_id,
            status,
            extra={"incident_id": incident_id, "run_id": run_id},
        )
        return self._outcome(loaded, run_id, incident_id, status, steps)

    @staticmethod
    def _outcome(
        loaded: LoadedRunbook,
        run_id: str,
        incident_id: int,
        status: str,
        steps: Mapping[str, Any],
        approval: Mapping[str, Any] | None = None,
    ) -> RunOutcome:
        return RunOutcome(
            run_id=run_id,
            incident=f"INC-{incident_id}",
            runbook=loaded.name,
            status=status,
            steps=dict(steps),
            approval=dict(approval) if approval is not None else None,
        )

    def _record(
        self,
        done: Sequence[StepDone],
        on_step: StepCallback | None,
        *,
        approval: tuple[int, str, Mapping[str, Any]] | None = None,
        finished: tuple[int, str, LoadedRunbook, Mapping[str, Any], str] | None = None,
    ) -> None:
        """Record steps, and the (incident id, run id, payload) of an approval request or the
        (incident id, run id, runbook, steps, status) of the run's finish, in one transaction,
        with the work row that ran it done (`WorkQueue.finish_with_run`: the run waits for a
        person or is over); then report each step to `on_step` in the order it completed, so a
        listener that reads the database finds it there."""
        if not done and approval is None and finished is None:
            return
        released: list[int] | None = None
        with recording(self.db, self.deps.clock) as recorder:
            for step in done:
                recorder.step(step)
            if approval is not None:
                recorder.approval_requested(*approval)
                released = self.work.finish_with_run(recorder.session, approval[1])
            if finished is not None:
                recorder.run_finished(*finished)
                released = self.work.finish_with_run(recorder.session, finished[1])
        self.work.finished_with_run(released)  # committed: a retry after a rollback redoes it
        if on_step is not None:
            for step in done:
                on_step(step.step_id, step.output)

    @staticmethod
    def _final_status(steps: Mapping[str, Any]) -> str:
        decisions = [o.get("decision") for o in steps.values() if o.get("kind") == "approve"]
        if any(d in ("rejected", "expired") for d in decisions):
            return "rejected"
        return "completed"


def _is_timer(value: Any) -> bool:
    """A verification's wait for its next poll (steps/remediate.py), not a question to people."""
    return isinstance(value, Mapping) and value.get("kind") == "timer"


_HELD = frozenset({StepKind.PROPOSE})
"""Step kinds recorded with the next super-step: proposals, which the approval follows at once.
Reads and checks are recorded as their super-step ends, unless checks and verdicts alone follow
them (`stages.followed_by_decisions`: those end within milliseconds in-process, or one liveness
read through Prometheus, and all land in one transaction with the verdict); the live Slack
message and the terminal render the timeline from the database, and the person watching a slow
Prometheus sees each super-step of reads that others follow land (DESIGN: progress updated in
place as steps complete)."""


def _proposals_only(loaded: LoadedRunbook, done: Sequence[StepDone]) -> bool:
    """Whether a finished super-step held steps and all of them only proposed."""
    return bool(done) and all(loaded.kinds.get(d.step_id) in _HELD for d in done)


def _resume_command(waiting: Sequence[Interrupt], answer: Any) -> Command[Any]:
    """Resume the interrupts `answer` is for: the timers with a timer answer, else the approval
    (by interrupt id when several are pending, e.g. parallel verifications)."""
    if len(waiting) == 1:
        return Command(resume=answer)
    timer = _is_timer(answer)
    return Command(resume={i.id: answer for i in waiting if _is_timer(i.value) == timer})


def _fresh_state(
    loaded: LoadedRunbook,
    resolved: Mapping[str, Any],
    incident_id: int,
    requester: str,
    run_id: str,
) -> RunState:
    """A new run's graph input, from its resolved inputs and who asked: the state its first
    reads ahead start from is the state its graph starts from (`read_ahead`)."""
    return _initial_state(loaded, run_id, incident_id, dict(resolved) | {"requester": requester})


def _initial_state(
    loaded: LoadedRunbook, run_id: str, incident_id: int, inputs: Mapping[str, Any]
) -> RunState:
    """A run's graph input; `inputs` are the resolved inputs with the requester."""
    name = loaded.runbook.target_input
    return {
        "run_id": run_id,
        "runbook": loaded.name,
        "incident": f"INC-{incident_id}",
        "inputs": dict(inputs),
        "target": str(inputs.get(name, "")) if name else "",
        "steps": {},
    }


def _checkpoint_id(app: Any, config: Mapping[str, Any], graph_input: Any) -> str | None:
    """The run's latest checkpoint id when `graph_input` answers an interrupt (a retry must
    send the answer again unless the run moved past it); None otherwise (no read)."""
    if not isinstance(graph_input, Command):
        return None
    snapshot = app.get_state(config)
    return str((snapshot.config or {}).get("configurable", {}).get("checkpoint_id") or "")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
