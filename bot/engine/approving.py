"""Deciding an approval: one use case for the Slack buttons, `gpu-oncall approve|reject` and
`RunEngine.resume`.

Given who decides, the approval's reference (a run id or its prefix, or an incident) and the
decision, `Approving.decide`:

1. reads the run and its approval rows once (one SELECT on `approvals`; `list_approvals`), and
   what else may be waiting for a person: a drain that waits for the next checkpoint, or a
   decided approval whose resumption was cut short (claimed here when its lease ran out);
2. resolves the runbook's approval policy once (who may approve, the two-person rule) and,
   only when the policy must be checked, the decider's groups among its approvers (Slack user
   groups; a lookup that may call Slack, so no transaction is open around it);
3. records the decision exactly once: the conditional UPDATE from `pending`
   (`storage.approvals.record_decision`) and the run's `resume` work row commit together, so
   two clicks, or two replicas, give one decision; the loser is told who won;
4. drives the run on (`Resumer.continue_run` / the work queue); the safety limits are checked
   when each action is claimed (bot/actions/guarding.py), at the moment it runs.

It returns a typed outcome that each adapter renders: `Decided` (the run went on), `Refused`
(the policy said no; the refusal is on the timeline and the approval stays pending),
`NotPending` (nothing waits for this decision; says who decided it, or which worker is at it)
and `Unknown` (no such run or incident). Bad input (`--only` naming no pending action, `reject
--only` of pending actions) raises UserInputError, as everywhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.engine import Engine
from sqlmodel import col, select

from bot.actions.policy import Policy, Risk, approvers_of, check_approver
from bot.clock import Clock
from bot.engine import deferred
from bot.engine.decisions import (
    Decide,
    Decided,
    NotPending,
    Outcome,
    Refused,
    Unknown,
    Verdict,
    refusal_note,
)
from bot.engine.outcomes import RunOutcome, StepCallback
from bot.engine.working import WorkQueue
from bot.errors import PolicyDenied, RunStateError, UserInputError
from bot.incidents import lifecycle
from bot.incidents.timeline import EventKind
from storage import approvals as approval_store
from storage import incidents as incident_store
from storage import runs as run_store
from storage import work as work_store
from storage.db import session_scope
from storage.tables import ApprovalRow, Incident, RunbookRun, WorkItem

MIN_PREFIX = 6
"""The shortest run-id prefix a reference may use."""


class Resumer(Protocol):
    """What drives a run on from its checkpoint (the RunEngine)."""

    def continue_run(
        self, run_id: str, *, answer: Any = None, on_step: StepCallback | None = None
    ) -> RunOutcome: ...


class EnginePorts(Resumer, Protocol):
    """The engine's side of the ports `Approving.of` takes (a RunEngine)."""

    db: Engine
    work: WorkQueue

    def policy_for(self, runbook: str) -> Policy: ...


@dataclass(frozen=True)
class _Found:
    """What one read found waiting for a person on a run."""

    run: RunbookRun
    pending: ApprovalRow | None
    plan: WorkItem | None = None
    interrupted: WorkItem | None = None


class Approving:
    """The approval use case over its ports: the database, the policy, the clock, the work
    queue and what drives a run on."""

    def __init__(
        self,
        *,
        db: Engine,
        policy_for: Callable[[str], Policy],
        clock: Clock,
        work: WorkQueue,
        runs: Resumer,
    ) -> None:
        self.db, self.policy_for, self.clock = db, policy_for, clock
        self.work, self.runs = work, runs

    @classmethod
    def of(cls, engine: EnginePorts) -> Approving:
        """The use case over a RunEngine's ports."""
        return cls(
            db=engine.db,
            policy_for=engine.policy_for,
            clock=engine.work.deps.clock,
            work=engine.work,
            runs=engine,
        )

    def decide(self, request: Decide, *, on_step: StepCallback | None = None) -> Outcome:
        verdict = request.verdict()
        found = self._read(request)
        if not isinstance(found, _Found):
            return found
        if found.plan is not None:
            return self._plan(request, verdict, found, found.plan, on_step)
        if request.only and verdict == "reject":
            raise UserInputError(
                "reject --only cancels a drain that waits for the next checkpoint; to "
                "refuse some of the pending actions, approve the others with --only"
            )
        if found.interrupted is not None:
            outcome = self.work.perform_claimed(found.interrupted, on_step)
            return Decided(run=found.run, outcome=outcome, state="resumed", approval=None)
        assert found.pending is not None
        return self._pending(request, verdict, found.run, found.pending, on_step)

    # -- the one read ----------------------------------------------------------------------
    def _read(self, request: Decide) -> _Found | NotPending | Unknown:
        with session_scope(self.db) as session:
            incident = (
                incident_store.get_incident(session, request.ref)
                if incident_store.parse_incident_ref(request.ref) is not None
                else None
            )
            if incident is not None and incident.id is not None:
                return self._read_incident(session, incident)
            run = run_store.get_run(session, request.ref) or _run_by_prefix(session, request.ref)
            if run is None:
                return Unknown(request.ref)
            rows = approval_store.list_approvals(session, run_id=run.id)
            return self._waiting(session, run, rows, subject=f"run {run.id[:8]} ({run.status})")

    def _read_incident(self, session: Any, incident: Incident) -> _Found | NotPending:
        assert incident.id is not None
        rows = approval_store.list_approvals(session, incident_id=incident.id)
        subject = f"{incident.ref} ({incident.state})"
        pending = _oldest_pending(rows)
        run_id = pending.run_id if pending is not None else _waiting_run(session, incident.id)
        if run_id is None:
            return NotPending(subject=subject, run=None, decided=_last_decided(rows))
        run = run_store.get_run(session, run_id)
        if run is None:  # a row of a run that is gone: nothing to decide
            return NotPending(subject=subject, run=None, decided=_last_decided(rows))
        return self._waiting(session, run, [r for r in rows if r.run_id == run_id], subject)

    def _waiting(
        self, session: Any, run: RunbookRun, rows: list[ApprovalRow], subject: str
    ) -> _Found | NotPending:
        pending = _oldest_pending(rows)  # also the rest of a partial approval (`--only`)
        if pending is not None:
            return _Found(run=run, pending=pending)
        plan = deferred.waiting_plan(session, run.id)
        if plan is not None:
            return _Found(run=run, pending=None, plan=plan)
        try:
            interrupted = self.work.interrupted_resumption(session, run.id)
        except RunStateError as busy:  # a live worker is resuming it right now
            return NotPending(subject, run, _last_decided(rows), busy=str(busy))
        if interrupted is not None:
            return _Found(run=run, pending=None, interrupted=interrupted)
        return NotPending(subject=subject, run=run, decided=_last_decided(rows))

    # -- the policy, resolved once ---------------------------------------------------------
    def _check(
        self, request: Decide, run: RunbookRun, requester: str, risks: list[Risk]
    ) -> tuple[str | None, Collection[str]]:
        """(None, the decider's groups) when the decider may approve `risks`; else (why not,
        ())."""
        policy = self.policy_for(run.runbook)
        try:
            groups = request.groups(approvers_of(policy, run.runbook))
            check_approver(
                policy,
                actor=request.actor,
                requester=requester,
                risks=risks,
                groups=groups,
                runbook=run.runbook,
            )
        except PolicyDenied as exc:
            return exc.reason, ()
        return None, groups

    def _refused(self, request: Decide, run: RunbookRun, reason: str) -> Refused:
        self.note(run, request.actor, refusal_note(request.actor, reason))
        return Refused(run=run, reason=reason)

    # -- for the adapters ------------------------------------------------------------------
    def note(self, run: RunbookRun, actor: str, text: str) -> None:
        """Put what a person did about a run's approval on its incident's timeline."""
        with session_scope(self.db) as session:
            lifecycle.record(
                session,
                incident_id=run.incident_id,
                kind=EventKind.NOTE,
                at=self.clock.now(),
                actor=actor,
                summary=text,
                run_id=run.id,
            )

    def shown(self, run_id: str) -> tuple[RunbookRun, ApprovalRow] | Unknown | None:
        """A run and the approval its buttons show (the pending one, else the last decided),
        for a preview that decides nothing; None when it never asked for one."""
        with session_scope(self.db) as session:
            run = run_store.get_run(session, run_id)
            if run is None:
                return Unknown(run_id)
            rows = approval_store.list_approvals(session, run_id=run_id)
        approval = _oldest_pending(rows) or _last_decided(rows)
        return None if approval is None else (run, approval)

    # -- deciding --------------------------------------------------------------------------
    def _pending(
        self,
        request: Decide,
        verdict: Verdict,
        run: RunbookRun,
        pending: ApprovalRow,
        on_step: StepCallback | None,
    ) -> Outcome:
        now = self.clock.now()
        proposals = list(pending.payload.get("proposals", []))
        chosen = choose_actions(proposals, request.only) if verdict == "approve" else proposals
        expired = now >= pending.expires_at
        groups: Collection[str] = ()
        if verdict == "approve" and not expired:
            requester = str(pending.payload.get("requester", ""))
            why, groups = self._check(request, run, requester, [Risk(p["risk"]) for p in chosen])
            if why is not None:
                return self._refused(request, run, why)
        state = "expired" if expired else ("approved" if verdict == "approve" else "rejected")
        with session_scope(self.db) as session:
            won = approval_store.record_decision(
                session,
                approval=pending,
                state=state,
                actor=request.actor,
                reason=request.reason or None,
                at=now,
            )
            if not won:  # another click or replica decided it first: say who
                decided = approval_store.get_approval(session, pending.id or 0)
                return NotPending(f"run {run.id[:8]} ({run.status})", run, decided)
            item = self.work.record_work(
                session,
                kind="resume",
                key=f"resume:{run.id}:{pending.id}",
                incident_id=run.incident_id,
                run_id=run.id,
                payload={"answer": _answer(request, verdict, now, chosen, groups)},
                claim=True,
            )
        outcome = self.work.perform_claimed(item, on_step)
        return Decided(run=run, outcome=outcome, state=state, approval=pending)

    def _plan(
        self,
        request: Decide,
        verdict: Verdict,
        found: _Found,
        plan: WorkItem,
        on_step: StepCallback | None,
    ) -> Outcome:
        """A drain waiting for the next checkpoint: hurry it (approve) or cancel it (reject)."""
        run = found.run
        deferred.check_only(request.only)
        if verdict == "approve":
            requester = str(run.inputs.get("requester", ""))
            why, _groups = self._check(request, run, requester, deferred.plan_risks(plan))
            if why is not None:
                return self._refused(request, run, why)
        outcome = deferred.decide(
            self.work,
            plan,
            decision=verdict,
            actor=request.actor,
            reason=request.reason,
            drive=lambda answer: self.runs.continue_run(run.id, answer=answer, on_step=on_step),
        )
        state = "drain now" if verdict == "approve" else "drain cancelled"
        ended = outcome or self.runs.continue_run(run.id)
        return Decided(run=run, outcome=ended, state=state, approval=None)


def choose_actions(proposals: list[dict[str, Any]], only: Collection[str]) -> list[dict[str, Any]]:
    """The proposals named by `only` (all of them when it is empty)."""
    if not only:
        return proposals
    names = {str(p["action"]) for p in proposals}
    unknown = sorted(set(only) - names)
    if unknown:
        raise UserInputError(
            f"--only {unknown[0]}: not among the actions awaiting approval "
            f"({', '.join(sorted(names))})"
        )
    return [p for p in proposals if p["action"] in set(only)]


def _answer(
    request: Decide, verdict: Verdict, now: Any, chosen: list[dict[str, Any]], groups: Any
) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "decision": verdict,
        "actor": request.actor,
        "at": now.isoformat(),
        "reason": request.reason,
    }
    if request.only and verdict == "approve":
        answer["only"] = sorted({str(p["action"]) for p in chosen})
    if groups:  # a deferred drain checks its approver again when it runs
        answer["groups"] = sorted(groups)
    return answer


def _oldest_pending(rows: list[ApprovalRow]) -> ApprovalRow | None:
    return next((r for r in rows if r.state == approval_store.PENDING), None)


def _last_decided(rows: list[ApprovalRow]) -> ApprovalRow | None:
    decided = [r for r in rows if r.state != approval_store.PENDING]
    return max(decided, key=lambda r: (r.decided_at or r.requested_at, r.id or 0), default=None)


def _waiting_run(session: Any, incident_id: int) -> str | None:
    """The run of an incident's decided approval cut short, or of its waiting drain."""
    item = work_store.open_resumption(session, incident_id=incident_id) or next(
        (
            w
            for w in work_store.list_work(session, incident_id=incident_id)
            if w.state == work_store.PENDING and w.payload.get("plan")
        ),
        None,
    )
    return None if item is None else item.run_id


def _run_by_prefix(session: Any, prefix: str) -> RunbookRun | None:
    if len(prefix) < MIN_PREFIX:
        return None
    statement = select(RunbookRun).where(col(RunbookRun.id).startswith(prefix)).limit(2)
    rows = list(session.exec(statement))
    return rows[0] if len(rows) == 1 else None
