"""Start, resume and record runbook runs.

A run is a LangGraph thread (thread_id = run id) checkpointed after every super-step, so the
approval's checkpoint is on disk before the run reports that it waits: a run that stops at its
approval survives a restart. This module is a boundary: it turns the step outputs of each
super-step into timeline events, findings, approvals and incident transitions (one transaction
per super-step), and it records a `step_failed` event for anything that escapes a node before
re-raising it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command
from sqlalchemy.engine import Engine

from bot.actions.policy import Risk, check_approver, check_blast_radius
from bot.engine.catalog import RunbookCatalog
from bot.engine.compiling import build_graph
from bot.engine.loading import LoadedRunbook
from bot.engine.recording import StepDone, recording
from bot.engine.state import Deps, RunState
from bot.engine.steps.common import parse_duration
from bot.errors import NotFound, RunStateError, UserInputError
from bot.incidents import lifecycle
from integrations.errors import InvalidName, NodeNotFound
from integrations.names import check_node_name, expand_nodes
from storage import approvals as approval_store
from storage import runs as run_store
from storage.db import session_scope
from storage.errors import ApprovalNotPendingError

logger = logging.getLogger(__name__)

StepCallback = Callable[[str, Mapping[str, Any]], None]

DURABILITY = "sync"
"""LangGraph writes a run's checkpoint after every super-step, before the next one starts
(STYLE §2.5.5): the approval's checkpoint is on disk before `stream()` returns. "exit" (one
write when the stream stops) would save ~10 ms per triage run at 1,024 nodes
(docs/performance.md); no code resumes a run mid-way today, but the checkpoints keep that
possible."""


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    incident: str
    runbook: str
    status: str  # completed | awaiting_approval | rejected | failed
    steps: dict[str, Any] = field(default_factory=dict)
    approval: dict[str, Any] | None = None

    @property
    def verdict(self) -> dict[str, Any]:
        for output in self.steps.values():
            if output.get("kind") == "localize":
                return dict(output)
        return {}


class RunEngine:
    """Runs runbooks against the injected Deps, persisting into the database and checkpointer."""

    def __init__(
        self,
        *,
        deps: Deps,
        db: Engine,
        checkpointer: BaseCheckpointSaver[Any],
        catalog: RunbookCatalog,
    ) -> None:
        self.deps, self.db, self.checkpointer, self.catalog = deps, db, checkpointer, catalog
        self._compiled: dict[str, Any] = {}

    def _app(self, loaded: LoadedRunbook) -> Any:
        if loaded.name not in self._compiled:
            self._compiled[loaded.name] = build_graph(loaded).compile(
                checkpointer=self.checkpointer
            )
        return self._compiled[loaded.name]

    # -- start -------------------------------------------------------------------------------
    def open_incident(
        self, loaded: LoadedRunbook, inputs: Mapping[str, Any], *, actor: str
    ) -> tuple[int, str]:
        """The incident a person's run is about, opened now or the open one for the same
        runbook and target: its id and the target (the target input's value, else the runbook)."""
        name = loaded.runbook.target_input
        target = str(inputs.get(name, "")) if name else loaded.name
        kind = loaded.runbook.inputs[name].type if name else "runbook"
        now = self.deps.clock.now()
        with session_scope(self.db) as session:
            incident, _ = lifecycle.open_or_attach(
                session,
                runbook=loaded.name,
                target=target,
                target_kind=kind,
                severity="warning",
                title=f"{loaded.runbook.metadata.title or loaded.name}: {target}",
                fired_at=now,
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
    ) -> RunOutcome:
        """Validate inputs, record the run and drive it until it ends or waits for approval."""
        resolved = resolve_inputs(loaded, inputs)
        target_name = loaded.runbook.target_input
        target = str(resolved.get(target_name, "")) if target_name else ""
        if target_name and loaded.runbook.inputs[target_name].type == "node":
            self._check_node_exists(target)
        run_id = uuid.uuid4().hex
        now = self.deps.clock.now()
        with recording(self.db, self.deps.clock) as recorder:
            run_store.create_run(
                recorder.session,
                run_id=run_id,
                incident_id=incident_id,
                runbook=loaded.name,
                inputs=resolved | {"requester": requester},
                at=now,
            )
            recorder.run_started(incident_id, run_id, loaded, target, requester)
        state: RunState = {
            "run_id": run_id,
            "runbook": loaded.name,
            "incident": f"INC-{incident_id}",
            "inputs": resolved | {"requester": requester},
            "target": target,
            "steps": {},
        }
        return self._drive(loaded, run_id, incident_id, state, on_step)

    def _check_node_exists(self, node: str) -> None:
        try:
            self.deps.cluster.nodes([node])
        except NodeNotFound as exc:
            raise NotFound(str(exc)) from exc

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
    ) -> RunOutcome:
        """Approve or reject the run's pending approval and drive the run to its end.

        `groups` are the approver groups `actor` belongs to (e.g. Slack user groups), resolved
        by the caller. An approval must pass the approver policy and the blast-radius limits.
        """
        if decision not in ("approve", "reject"):
            raise UserInputError(f"decision must be approve or reject, not '{decision}'")
        now = self.deps.clock.now()
        with session_scope(self.db) as session:
            run = run_store.get_run(session, run_id)
            if run is None:
                raise NotFound(f"unknown run '{run_id}'")
            pending = approval_store.pending_approval_for(session, run_id=run_id)
            if pending is None or pending.id is None:
                raise RunStateError(f"run {run_id[:8]} is {run.status}: it has no pending approval")
            loaded = self.catalog.get(run.runbook)
            incident_id = run.incident_id
            if decision == "approve" and now < pending.expires_at:
                risks = [Risk(p["risk"]) for p in pending.payload.get("proposals", [])]
                requester = str(pending.payload.get("requester", ""))
                check_approver(
                    self.deps.policy,
                    actor=actor,
                    requester=requester,
                    risks=risks,
                    groups=groups,
                    runbook=run.runbook,
                )
                self._check_limits(pending.payload.get("proposals", []))
            state = _decided_state(decision, expired=now >= pending.expires_at)
            try:
                approval_store.decide_approval(
                    session,
                    approval_id=pending.id,
                    state=state,
                    actor=actor,
                    reason=reason or None,
                    at=now,
                )
            except ApprovalNotPendingError as exc:
                raise RunStateError(str(exc)) from exc
        answer = {"decision": decision, "actor": actor, "at": now.isoformat(), "reason": reason}
        return self._drive(loaded, run_id, incident_id, Command(resume=answer), on_step)

    def _check_limits(self, proposals: Sequence[Mapping[str, Any]]) -> None:
        """Blast-radius limits over the whole cluster; a dry run changes nothing, so it passes."""
        if self.deps.policy.dry_run or not proposals:
            return
        nodes = self.deps.cluster.nodes()
        check_blast_radius(self.deps.policy.limits, proposals=proposals, nodes=nodes)

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
    ) -> RunOutcome:
        """Stream the graph, recording each super-step's steps in one transaction when it ends.

        "updates" chunks bring the steps as they complete; a "values" chunk follows each
        super-step. The approval is recorded only after the stream has stopped, when its
        checkpoint is written.
        """
        app = self._app(loaded)
        config = {"configurable": {"thread_id": run_id}}
        approval: dict[str, Any] | None = None
        pending: list[StepDone] = []  # completed in the current super-step, not yet recorded
        try:
            for mode, chunk in app.stream(
                graph_input,
                config,
                context=self.deps,
                stream_mode=["updates", "values"],
                durability=DURABILITY,
            ):
                if mode == "values":
                    done, pending = pending, []
                    self._record(done, on_step)
                    continue
                for node, value in chunk.items():
                    if node == "__interrupt__":
                        approval = dict(value[0].value)
                        continue
                    at = self.deps.clock.now()
                    pending.extend(
                        StepDone(incident_id, run_id, loaded, step_id, output, at)
                        for step_id, output in (value or {}).get("steps", {}).items()
                    )
            done, pending = pending, []
            requested = (incident_id, run_id, approval) if approval else None
            self._record(done, on_step, approval=requested)
        except Exception as exc:  # boundary: record, then re-raise
            ref = uuid.uuid4().hex[:6]
            logger.exception(
                "run failed", extra={"run_id": run_id, "incident_id": incident_id, "ref": ref}
            )
            with recording(self.db, self.deps.clock) as recorder:
                for step in pending:
                    recorder.step(step)
                recorder.run_failed(incident_id, run_id, exc, ref)
            raise
        steps = dict(app.get_state(config).values.get("steps", {}))
        status = "awaiting_approval" if approval else self._final_status(steps)
        if not approval:
            with recording(self.db, self.deps.clock) as recorder:
                recorder.run_finished(incident_id, run_id, loaded, steps, status)
        return RunOutcome(
            run_id=run_id,
            incident=f"INC-{incident_id}",
            runbook=loaded.name,
            status=status,
            steps=steps,
            approval=approval,
        )

    def _record(
        self,
        done: Sequence[StepDone],
        on_step: StepCallback | None,
        *,
        approval: tuple[int, str, Mapping[str, Any]] | None = None,
    ) -> None:
        """Record steps, and the (incident id, run id, payload) of an approval request, in one
        transaction; then report each step to `on_step` in the order it completed, so a listener
        that reads the database finds it there."""
        if not done and approval is None:
            return
        with recording(self.db, self.deps.clock) as recorder:
            for step in done:
                recorder.step(step)
            if approval is not None:
                recorder.approval_requested(*approval)
        if on_step is not None:
            for step in done:
                on_step(step.step_id, step.output)

    @staticmethod
    def _final_status(steps: Mapping[str, Any]) -> str:
        decisions = [o.get("decision") for o in steps.values() if o.get("kind") == "approve"]
        if any(d in ("rejected", "expired") for d in decisions):
            return "rejected"
        return "completed"


def _decided_state(decision: str, *, expired: bool) -> str:
    """An approval given after its expiry is recorded as expired (the rejected branch)."""
    if expired:
        return "expired"
    return "approved" if decision == "approve" else "rejected"


def resolve_inputs(loaded: LoadedRunbook, given: Mapping[str, Any]) -> dict[str, Any]:
    """Apply defaults, check required inputs and types. Errors name the runbook and input."""
    spec = loaded.runbook.inputs
    unknown = sorted(set(given) - set(spec) - {"requester"})
    if unknown:
        valid = ", ".join(spec) or "none"
        raise UserInputError(
            f"runbook '{loaded.name}': unknown input '{unknown[0]}' (inputs: {valid})"
        )
    resolved: dict[str, Any] = {}
    for name, item in spec.items():
        value = given.get(name, item.default)
        if value is None:
            if item.required:
                raise UserInputError(
                    f"runbook '{loaded.name}': input '{name}' is required "
                    f"({item.help or item.type})"
                )
            continue
        resolved[name] = _coerce(loaded.name, name, item.type, value)
    return resolved


def _coerce(runbook: str, name: str, kind: str, value: Any) -> Any:
    try:
        if kind == "node":
            return check_node_name(str(value))
        if kind == "nodes":
            names = expand_nodes(str(value))
            if not names:
                raise ValueError("no node names given (e.g. gpu-node-01,gpu-node-[04-07])")
            return ",".join(dict.fromkeys(names))
        if kind == "duration":
            parse_duration(str(value))
            return str(value)
        if kind == "number":
            return float(value)
    except (InvalidName, ValueError) as exc:
        raise UserInputError(f"runbook '{runbook}': input '{name}': {exc}") from exc
    return str(value)
