"""Turns run progress into durable records: timeline events, findings, approvals, verdicts and
incident transitions. Called by `running.py` through `recording()`, one transaction per batch of
progress (a super-step's steps); never by node code.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from bot.actions import outcomes
from bot.clock import Clock
from bot.engine import gpu_records as history
from bot.engine.loading import LoadedRunbook
from bot.engine.summaries import describe_step
from bot.errors import StepError
from bot.incidents import lifecycle
from bot.incidents.opening import record_many
from bot.incidents.states import IncidentState
from bot.incidents.timeline import EventKind
from storage import alerts as alert_store
from storage import approvals as approval_store
from storage import gpu_history as gpu_store
from storage import incidents as incident_store
from storage import runs as run_store
from storage.db import session_scope
from storage.tables import Incident

BOT = "bot"

_APPROVAL_EVENTS = {
    "approved": EventKind.APPROVAL_GRANTED,
    "rejected": EventKind.APPROVAL_REJECTED,
    "expired": EventKind.APPROVAL_EXPIRED,
}
_ACTION_EVENTS = {
    "changed": EventKind.ACTION_SUCCEEDED,
    "already_done": EventKind.ACTION_SUCCEEDED,
    "dry_run": EventKind.ACTION_SKIPPED,
    "skipped": EventKind.ACTION_SKIPPED,
    "refused": EventKind.ACTION_SKIPPED,  # another party holds the node (coexistence)
    "cancelled": EventKind.ACTION_SKIPPED,  # a human undid the bot's cordon
    "not_approved": EventKind.ACTION_SKIPPED,  # the rest of a partial approval was refused
    "failed": EventKind.ACTION_FAILED,
    "blocked": EventKind.ACTION_BLOCKED,  # a safety limit stopped it (bot/actions/guarding.py)
}
ACTION_EVENTS = _ACTION_EVENTS
"""Action outcome -> timeline kind (bot/engine/deferred.py records a plan's first results)."""


@contextmanager
def recording(db: Engine, clock: Clock) -> Iterator[Recorder]:
    """A Recorder in a transaction of its own: the buffered events are written, then it commits
    (nothing is written if the block raises)."""
    with session_scope(db) as session:
        recorder = Recorder(session, clock)
        yield recorder
        recorder.flush()


class Recorder:
    """Writes a run's progress through one session.

    Timeline events and findings are buffered and written by `flush` in one INSERT each, not one
    ORM flush per row.
    A lifecycle change (a transition, the verdict, an acknowledgement) writes its own events, so
    the buffer is flushed before it: event ids keep the order in which things were recorded.
    """

    def __init__(self, session: Session, clock: Clock) -> None:
        self.session, self.clock = session, clock
        self._events: list[dict[str, Any]] = []
        self._findings: list[dict[str, Any]] = []
        self._incidents: dict[int, Incident] = {}  # the session's identity map holds rows weakly

    def flush(self) -> None:
        """Write the buffered timeline events and findings, one statement each."""
        if self._events:
            record_many(self.session, events=self._events)
            self._events = []
        if self._findings:
            run_store.insert_findings(self.session, self._findings)
            self._findings = []

    def _incident(self, incident_id: int) -> Incident:
        """The incident, read once per transaction: a batch's steps ask for it again and again."""
        incident = self._incidents.get(incident_id)
        if incident is None:
            incident = incident_store.get_incident(self.session, incident_id)
            if incident is None:
                raise LookupError(f"incident {incident_id} vanished")
            self._incidents[incident_id] = incident
        return incident

    def _event(
        self,
        incident_id: int,
        kind: EventKind,
        summary: str,
        *,
        run_id: str,
        step_id: str | None = None,
        actor: str = BOT,
        payload: Mapping[str, Any] | None = None,
        at: datetime | None = None,
    ) -> None:
        self._events.append(
            {
                "incident_id": incident_id,
                "kind": kind,
                "at": at or self.clock.now(),
                "actor": actor,
                "summary": summary,
                "payload": payload,
                "run_id": run_id,
                "step_id": step_id,
            }
        )

    def _move(
        self,
        incident_id: int,
        to: IncidentState,
        *,
        actor: str = BOT,
        reason: str | None = None,
        at: datetime | None = None,
        mitigated: bool = True,
    ) -> None:
        incident = self._incident(incident_id)
        if incident.state == to.value or incident.state == IncidentState.RESOLVED.value:
            return
        self.flush()
        lifecycle.transition(
            self.session,
            incident,
            to=to,
            at=at or self.clock.now(),
            actor=actor,
            reason=reason,
            mitigated=mitigated,
        )

    # -- run lifecycle -----------------------------------------------------------------------
    def run_started(
        self, incident_id: int, run_id: str, loaded: LoadedRunbook, target: str, requester: str
    ) -> None:
        nodes = target.split(",")
        where, payload = target, dict[str, Any](runbook=loaded.name, target=target)
        if len(nodes) > 1:  # a storm's run: how many members it triages, not all their names
            where = f"{len(nodes)} nodes ({nodes[0]} … {nodes[-1]})"
            payload = {"runbook": loaded.name, "nodes": len(nodes)}
        self._event(
            incident_id,
            EventKind.RUN_STARTED,
            f"Runbook {loaded.name} started on {where}",
            run_id=run_id,
            actor=requester,
            payload=payload,
        )
        self._move(incident_id, IncidentState.TRIAGING)

    def run_failed(self, incident_id: int, run_id: str, exc: BaseException, ref: str) -> None:
        run_store.update_run(
            self.session,
            run_id,
            status="failed",
            finished_at=self.clock.now(),
            error=f"ref {ref}: {type(exc).__name__}",
        )
        payload: dict[str, Any] = {"ref": ref, "error": type(exc).__name__}
        summary, step_id = f"Run failed unexpectedly (ref {ref}); see the bot's log", None
        if isinstance(exc, StepError):  # a broken runbook step: say file, step and field
            summary, step_id = f"Step failed: {exc}", exc.step
            payload |= {"file": exc.file, "step": exc.step, "field": exc.field}
        self._event(
            incident_id,
            EventKind.STEP_FAILED,
            summary,
            run_id=run_id,
            step_id=step_id,
            payload=payload,
        )

    def run_finished(
        self,
        incident_id: int,
        run_id: str,
        loaded: LoadedRunbook,
        steps: Mapping[str, Any],
        status: str,
    ) -> None:
        queries = sum(int(o.get("queries", 0)) for o in steps.values())
        run_store.update_run(
            self.session, run_id, status=status, finished_at=self.clock.now(), queries=queries
        )
        verdict: Mapping[str, Any] = next(
            (o for o in steps.values() if o.get("kind") == "localize"), {}
        )
        acts = [o for o in steps.values() if o.get("kind") == "act"]
        firing = alert_store.has_firing_alerts(self.session, incident_id)
        if status == "rejected":
            self._move(
                incident_id,
                IncidentState.TRIAGING,
                reason="remediation not approved; over to humans",
            )
        elif verdict.get("layer") == "none" and not firing:
            self.flush()
            incident = self._incident(incident_id)
            lifecycle.mark_check(self.session, incident, at=self.clock.now(), actor=BOT)
            self._move(incident_id, IncidentState.RESOLVED, reason="no fault found")
        elif acts and all(a.get("succeeded") for a in acts):
            unverified = unverified_reason(steps)
            if unverified is not None:  # not mitigated: watched until someone resolves it
                self._move(
                    incident_id, IncidentState.MONITORING, reason=unverified, mitigated=False
                )
                return
            self._move(
                incident_id, IncidentState.MONITORING, reason="actions carried out and verified"
            )
            if not firing:
                self._move(incident_id, IncidentState.RESOLVED, reason="mitigated")
        elif acts and any(a.get("results") and not a.get("succeeded") for a in acts):
            blocked = [
                str(r.get("blocked_by"))
                for a in acts
                for r in a.get("results", [])
                if r.get("outcome") == "blocked"
            ]
            reason = "an action did not succeed"
            if blocked:  # not a failure: a safety limit held it back; over to humans
                names = ", ".join(sorted(set(blocked)))
                reason = f"an action was blocked by a safety limit ({names})"
            results = outcomes.action_results(steps)
            if outcomes.partly_done(results):  # the node is in between: say what is where
                self._acted_not_fully(incident_id, run_id, outcomes.describe(results))
                return
            self._move(incident_id, IncidentState.TRIAGING, reason=reason)

    def _acted_not_fully(self, incident_id: int, run_id: str, summary: str) -> None:
        """Some approved actions were carried out and some not: the incident is mitigating
        (not mitigated, not back in triage as if nothing had been done), and its timeline says
        what was done and what was not."""
        reason = f"acted, not fully: {summary}; a person must finish or undo it"
        incident = self._incident(incident_id)
        if incident.state == IncidentState.MITIGATING.value:
            self._event(incident_id, EventKind.NOTE, reason, run_id=run_id)
        else:
            self._move(incident_id, IncidentState.MITIGATING, reason=reason, mitigated=False)

    # -- approval ------------------------------------------------------------------------------
    def approval_requested(self, incident_id: int, run_id: str, payload: Mapping[str, Any]) -> None:
        expires_at = datetime.fromisoformat(str(payload["expires_at"]))
        for result in payload.get("done", []):  # what a partial approval let run meanwhile
            self._action_event(incident_id, run_id, str(payload["step_id"]), result)
        approval_store.request_approval(
            self.session,
            run_id=run_id,
            incident_id=incident_id,
            step_id=str(payload["step_id"]),
            payload=dict(payload),
            at=self.clock.now(),
            expires_at=expires_at,
        )
        actions = ", ".join(p["description"] for p in payload.get("proposals", []))
        self._event(
            incident_id,
            EventKind.APPROVAL_REQUESTED,
            f"Approval requested: {actions} (expires {expires_at:%H:%M} UTC)",
            run_id=run_id,
            step_id=str(payload["step_id"]),
            payload=dict(payload),
        )
        run_store.update_run(self.session, run_id, status="awaiting_approval")
        self._move(incident_id, IncidentState.AWAITING_APPROVAL)

    # -- steps ---------------------------------------------------------------------------------
    def step(self, done: StepDone) -> None:
        """Record one completed step: a dedicated handler per kind, else `step_completed`."""
        handler = getattr(self, f"_on_{done.output.get('kind')}", self._completed)
        handler(done)

    def _note(
        self,
        done: StepDone,
        kind: EventKind,
        summary: str,
        *,
        actor: str = BOT,
        payload: Mapping[str, Any] | None = None,
    ) -> None:
        self._event(
            done.incident_id,
            kind,
            summary,
            run_id=done.run_id,
            step_id=done.step_id,
            actor=actor,
            payload=payload,
            at=done.at,
        )

    def _completed(self, done: StepDone) -> None:
        title = done.loaded.runbook.step(done.step_id).title or done.step_id
        summary = f"{title}: {describe_step(done.step_id, done.output)[1]}"
        self._note(done, EventKind.STEP_COMPLETED, summary, payload=_trim(done.output))

    def _on_check(self, done: StepDone) -> None:
        finding = done.output.get("finding")
        if done.output.get("status") != "fired" or not finding:
            self._completed(done)
            return
        self._findings.append(
            run_store.finding_values(
                run_id=done.run_id, incident_id=done.incident_id, finding=finding, at=done.at
            )
        )
        summary = f"[{finding['severity']}/{finding['layer']}] {finding['summary']}"
        self._note(done, EventKind.FINDING, summary, payload=finding)
        incident = self._incident(done.incident_id)
        lifecycle.adopt_finding_severity(self.session, incident, severity=str(finding["severity"]))

    def _on_localize(self, done: StepDone) -> None:
        output = done.output
        run_store.update_run(self.session, done.run_id, verdict=dict(output))
        facts = history.finding_facts(
            output, run_id=done.run_id, incident_id=done.incident_id, at=done.at
        )
        gpu_store.record_facts(self.session, facts)  # fault history per GPU (issue 14)
        self.flush()
        lifecycle.mark_diagnosed(
            self.session,
            self._incident(done.incident_id),
            at=done.at,
            layer=str(output["layer"]),
            confidence=float(output["confidence"]),
            culprits=list(output.get("culprits", [])),
            run_id=done.run_id,
            step_id=done.step_id,
        )

    def _on_approve(self, done: StepDone) -> None:
        decision = str(done.output.get("decision"))
        if decision not in _APPROVAL_EVENTS:
            return
        actor = str(done.output.get("actor", BOT))
        reason = done.output.get("reason")
        summary = f"Remediation {decision} by {actor}" + _only(done.output)
        summary += f": {reason}" if reason else ""
        self._note(
            done, _APPROVAL_EVENTS[decision], summary, actor=actor, payload=_trim(done.output)
        )
        if decision == "approved":
            incident = self._incident(done.incident_id)
            self.flush()
            lifecycle.mark_acknowledged(self.session, incident, at=done.at, actor=actor)
            self._move(done.incident_id, IncidentState.MITIGATING, actor=actor, at=done.at)

    def _on_act(self, done: StepDone) -> None:
        if done.output.get("skipped"):
            summary = f"Actions skipped: {done.output.get('reason')}"
            self._note(done, EventKind.ACTION_SKIPPED, summary)
            return
        # An act step is recorded once, when its output first reaches the engine. A result
        # marked `repeated` is an action a stopped worker carried out before this worker took
        # the run over: the ledger kept its result, the timeline never got it, so it goes on
        # the timeline now, saying so.
        self._record_gpu_actions(done)
        for later in done.output.get("later_decisions", []):  # the rest of a partial approval
            decision = str(later.get("decision"))
            actor = str(later.get("actor", BOT))
            summary = f"Remaining actions {decision} by {actor}" + _only(later)
            summary += f": {later['reason']}" if later.get("reason") else ""
            kind = _APPROVAL_EVENTS.get(decision, EventKind.APPROVAL_REJECTED)
            self._note(done, kind, summary, actor=actor, payload=dict(later))
        for result in done.output.get("results", []):
            if result.get("announced"):
                continue  # recorded when the rest of a partial approval was asked for
            kind = _ACTION_EVENTS.get(str(result.get("outcome")), EventKind.ACTION_SUCCEEDED)
            detail = str(result.get("detail"))
            if result.get("repeated"):
                detail += " (carried out before the run was taken over)"
            self._note(done, kind, detail, payload=result)

    def _action_event(
        self, incident_id: int, run_id: str, step_id: str, result: Mapping[str, Any]
    ) -> None:
        kind = _ACTION_EVENTS.get(str(result.get("outcome")), EventKind.ACTION_SUCCEEDED)
        self._event(
            incident_id,
            kind,
            str(result.get("detail")),
            run_id=run_id,
            step_id=step_id,
            payload=dict(result),
        )

    def _record_gpu_actions(self, done: StepDone) -> None:
        """Resets and removals of a GPU the verdict blamed go into its fault history."""
        run = run_store.get_run(self.session, done.run_id)
        verdict = (run.verdict if run is not None else None) or {}
        facts = history.action_facts(
            done.output.get("results", []),
            verdict,
            run_id=done.run_id,
            incident_id=done.incident_id,
            at=done.at,
        )
        gpu_store.record_facts(self.session, facts)

    def _on_verify(self, done: StepDone) -> None:
        status = done.output.get("status")
        if status == "skipped":
            title = done.loaded.runbook.step(done.step_id).title or done.step_id
            summary = f"{title}: not run ({done.output.get('reason')})"
            self._note(done, EventKind.STEP_COMPLETED, summary, payload=_trim(done.output))
            return
        passed = status == "passed"
        kind = EventKind.VERIFICATION_PASSED if passed else EventKind.VERIFICATION_FAILED
        summary = (
            f"Verification {status}: {done.output.get('signal')} = {done.output.get('value')} "
            f"after {done.output.get('polls')} poll(s)"
        )
        self._note(done, kind, summary, payload=_trim(done.output))


@dataclass(frozen=True)
class StepDone:
    """One completed step, as the recorder sees it. `at` is when its output reached the engine;
    its records carry that time even when they are written with the rest of its super-step."""

    incident_id: int
    run_id: str
    loaded: LoadedRunbook
    step_id: str
    output: Mapping[str, Any]
    at: datetime


def unverified_reason(steps: Mapping[str, Any]) -> str | None:
    """Why a run whose actions all succeeded has not mitigated its incident, in plain words;
    None when a verification passed and none failed (the fix is confirmed)."""
    verifies = [o for o in steps.values() if o.get("kind") == "verify"]
    failed = [o for o in verifies if o.get("status") == "failed"]
    if failed:
        v = failed[0]
        read = "had no reading" if v.get("value") is None else f"still read {v.get('value')}"
        return (
            f"not mitigated: verification failed ({v.get('signal')} {read} after "
            f"{v.get('polls')} poll(s)); the fault may persist, so a person should check the "
            "node before resolving"
        )
    if any(o.get("status") == "passed" for o in verifies):
        return None
    if not verifies:
        why = "the runbook has no verification step"
    else:
        why = "; ".join(str(o.get("reason") or "verification did not run") for o in verifies)
    return (
        f"not mitigated: nothing confirmed the fix ({why}); the incident stays in monitoring "
        "until a person checks and resolves it"
    )


def _only(decision: Mapping[str, Any]) -> str:
    """` (only cordon; the rest stays pending)` for a partial approval, else nothing."""
    only = decision.get("only")
    if not only or decision.get("decision") != "approved":
        return ""
    return f" (only {', '.join(only)}; the rest stays pending)"


def _trim(output: Mapping[str, Any]) -> dict[str, Any]:
    """Step payloads for the timeline, without the bulky sample lists."""
    return {k: v for k, v in output.items() if k not in ("samples", "items", "pods", "events")}
