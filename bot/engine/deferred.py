"""The drain plan: "cordon now, drain after the next checkpoint" (issue 24, item 2).

When the impact of a drain recommends waiting (bot/actions/impact.py: `CORDON_AND_WAIT`),
approving the drain approves the plan: the node is cordoned at once and the drain waits for
the next checkpoint of every job with ranks on the node, or for its deadline (setting
`policy.drain_checkpoint_deadline_minutes`, or the drain proposal's `checkpoint_deadline`
param), whichever comes first.

The wait is a timer interrupt of the act step (`{"kind": "timer", "plan": ...}`): on simulated
time it passes at once; on wall-clock time it is a durable `timer` work row (storage/work.py)
due at the next poll, claimed under a lease, so a killed process's plan is taken over by the
next worker or replica from the run's checkpoint. At each poll the job's checkpoint age is read
(`job.checkpoint_age`); a checkpoint that completed after the plan started lets the drain run.
At the deadline the drain is asked for again (`policy.drain_at_deadline: ask`) or runs
(`drain`). Either way the approver is checked again against the current policy, and the safety
limits when the drain is claimed (bot/actions/guarding.py).

A person cancels the drain with `reject INC-N [--only drain]`, or drains at once with
`approve INC-N --only drain`. A cancel is written into the action ledger under the drain's
idempotency key before the run is driven on, so whatever path the run takes when it re-runs
its act step, the drain finds that claim and never runs (and a drain that already ran refuses
the cancel). Every decision here is a function of the run's state and of monotonic facts (a
checkpoint after the start stays after it; the deadline stays passed), so a re-run after a
crash reaches the same end.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.engine import Engine

from bot.actions.executing import idempotency_key
from bot.actions.impact import CHECKPOINT_SIGNAL, CORDON_AND_WAIT, JobReadings, format_age
from bot.actions.policy import Policy, Risk, check_approver, proposals_need_approval
from bot.engine.outcomes import RunOutcome
from bot.engine.recording import ACTION_EVENTS
from bot.engine.state import Deps, PlanTerms
from bot.engine.working import WorkQueue
from bot.errors import PolicyDenied, RunStateError, UserInputError
from bot.incidents import lifecycle
from bot.incidents.timeline import EventKind
from integrations.durations import parse_duration
from storage import actions as action_store
from storage import work as work_store
from storage.db import session_scope
from storage.tables import WorkItem

PLAN = "drain_after_checkpoint"
CANCELLED = "not_approved"
"""The ledger outcome of a cancelled drain: the act step's NOT_APPROVED (never run)."""
ASK, DRAIN = "ask", "drain"


def deferred_drains(
    proposals: Sequence[dict[str, Any]], terms: PlanTerms
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(run now, wait for the checkpoint): the drains whose impact recommends waiting."""
    now: list[dict[str, Any]] = []
    later: list[dict[str, Any]] = []
    for proposal in proposals:
        impact = proposal.get("impact") or {}
        waits = (
            proposal["action"] == "drain"
            and impact.get("recommendation") == CORDON_AND_WAIT
            and deadline_of(proposal, terms) > timedelta(0)
        )
        (later if waits else now).append(proposal)
    return now, later


def deadline_of(proposal: Mapping[str, Any], terms: PlanTerms) -> timedelta:
    """The drain's own `checkpoint_deadline` param (a Prometheus duration), else the setting."""
    given = (proposal.get("params") or {}).get("checkpoint_deadline")
    return parse_duration(str(given)) if given else terms.deadline


def cordons_for(
    deferred: Sequence[Mapping[str, Any]], chosen: Sequence[Mapping[str, Any]], deps: Deps
) -> list[dict[str, Any]]:
    """The cordons the plan needs now: one per deferred node not already being cordoned."""
    cordoned = {str(p["target"]) for p in chosen if p["action"] == "cordon"}
    spec = deps.actions.get("cordon")
    found: list[dict[str, Any]] = []
    for drain in deferred:
        node = str(drain["target"])
        if node in cordoned:
            continue
        cordoned.add(node)
        found.append(
            {
                "action": "cordon",
                "target": node,
                "params": {},
                "risk": spec.risk.value,
                "destructive": spec.destructive,
                "reason": "the drain waits for the next checkpoint",
                "description": spec.describe(node, {}),
            }
        )
    return found


@dataclass(frozen=True)
class Plan:
    """One deferred drain, as the act step carries it through its waits (JSON in `payload`)."""

    node: str
    jobs: tuple[str, ...]
    started_at: datetime
    deadline_at: datetime

    def payload(self, key: str) -> dict[str, Any]:
        return {
            "node": self.node,
            "jobs": list(self.jobs),
            "started_at": self.started_at.isoformat(),
            "deadline_at": self.deadline_at.isoformat(),
            "key": key,
        }


def plan_of(drain: Mapping[str, Any], started_at: datetime, terms: PlanTerms) -> Plan:
    impact = drain.get("impact") or {}
    jobs = tuple(sorted(str(j["job"]) for j in impact.get("jobs", [])))
    return Plan(
        node=str(drain["target"]),
        jobs=jobs,
        started_at=started_at,
        deadline_at=started_at + deadline_of(drain, terms),
    )


def checkpointed(deps: Deps, plan: Plan) -> str | None:
    """Why the plan's jobs have all checkpointed since it started (None: not yet, or unknown).
    A job's age is its oldest rank's (conservative); no age is "not yet"."""
    readings = JobReadings(deps.telemetry, deps.signals.names())
    now = deps.clock.now()
    waited = (now - plan.started_at).total_seconds()
    seen = []
    for job in plan.jobs:
        ages = [age for _, age in readings.read(CHECKPOINT_SIGNAL, job)]
        if not ages or max(ages) >= waited:
            return None
        seen.append(f"{job} checkpointed {format_age(max(ages))} ago")
    return "; ".join(seen) if seen else None


def still_approved(
    policy: Policy, decision: Mapping[str, Any], drain: Mapping[str, Any], runbook: str
) -> str | None:
    """None when the decision that approved the plan still covers the drain under the current
    policy; else why not (the drain is asked for again)."""
    actor = str(decision.get("actor", ""))
    if actor == "policy:auto":
        if proposals_need_approval(policy, [drain]):
            return "the policy now asks a person to approve a drain"
        return None
    try:
        check_approver(
            policy,
            actor=actor,
            requester=str(decision.get("requester", "")),
            risks=[Risk(drain["risk"])],
            groups=list(decision.get("groups") or ()),
            runbook=runbook,
        )
    except PolicyDenied as exc:
        return f"{actor} may no longer approve it ({exc})"
    return None


def hhmm(at: datetime) -> str:
    return f"{at:%H:%M} UTC"


def scheduled_summary(plan: Mapping[str, Any]) -> str:
    """The timeline line when the drain starts waiting."""
    jobs = ", ".join(plan.get("jobs", [])) or "its jobs"
    deadline = hhmm(datetime.fromisoformat(str(plan["deadline_at"])))
    return (
        f"Drain of {plan['node']} scheduled after the next checkpoint of {jobs} "
        f"(deadline {deadline})"
    )


def drain_key(run_id: str, step_id: str, node: str) -> str:
    """The idempotency key the act step drains `node` under (remediate._execute)."""
    return idempotency_key(run_id=run_id, step_id=step_id, action="drain", target=node)


# -- the act step's side: wait, then drain, ask again, or not ----------------------------------


Execute = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
Ask = Callable[[list[dict[str, Any]], datetime, str], dict[str, Any]]


def carry_out(
    *,
    step_id: str,
    run_id: str,
    deps: Deps,
    policy: Policy,
    runbook: str,
    decision: Mapping[str, Any],
    started_at: datetime,
    drains: Sequence[dict[str, Any]],
    done: Sequence[dict[str, Any]],
    terms: PlanTerms,
    execute: Execute,
    ask: Ask,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Wait (timer interrupts) until each deferred drain's jobs checkpoint or its deadline
    passes, then drain, ask again, or record the cancel. Returns (results, what happened)."""
    plans = {str(d["target"]): plan_of(d, started_at, terms) for d in drains}
    ended, polls = _wait(step_id, run_id, deps, plans, drains, done)
    results: list[dict[str, Any]] = []
    story: list[dict[str, Any]] = []
    for drain in drains:
        node = str(drain["target"])
        how, why = ended[node]
        plan = plans[node]
        story.append(
            {"node": node, "ended": how, "why": why, "waited": polls > 0}
            | plan.payload(drain_key(run_id, step_id, node))
        )
        if how == "cancel":
            results.append(_cancelled(drain, why))
            continue
        doubt = None if how == "now" else still_approved(policy, decision, drain, runbook)
        if how == "deadline" and terms.at_deadline == ASK:
            doubt = doubt or f"no checkpoint by the deadline {hhmm(plan.deadline_at)}"
        if doubt is not None:
            answer = ask([drain], plan.deadline_at, doubt)
            story[-1]["asked"] = {k: answer.get(k) for k in ("decision", "actor", "at")}
            if answer.get("decision") != "approved":
                results.append(_cancelled(drain, f"{answer.get('decision')} by "
                                                  f"{answer.get('actor')}"))  # fmt: skip
                continue
        for result in execute([drain]):
            results.append(_told(result, how, why))
    return results, story


def _wait(
    step_id: str,
    run_id: str,
    deps: Deps,
    plans: Mapping[str, Plan],
    drains: Sequence[dict[str, Any]],
    done: Sequence[dict[str, Any]],
) -> tuple[dict[str, tuple[str, str]], int]:
    """node -> (checkpoint | deadline | cancel | now, why) after as many polls as it took,
    and how many."""
    from langgraph.types import interrupt  # the graph runtime: only inside a running node

    ended: dict[str, tuple[str, str]] = {}
    risks = {str(d["target"]): str(d.get("risk", "high")) for d in drains}
    polls = 0
    while True:
        now = deps.clock.now()
        for node, plan in plans.items():
            if node in ended or not polls:  # never before the first wait (see below)
                continue
            why = checkpointed(deps, plan)
            if why is not None:
                ended[node] = ("checkpoint", why)
            elif now >= plan.deadline_at:
                ended[node] = ("deadline", f"no checkpoint of {', '.join(plan.jobs)} by "
                                           f"{hhmm(plan.deadline_at)}")  # fmt: skip
        waiting = [p for n, p in plans.items() if n not in ended]
        if not waiting:
            return ended, polls
        # The first wait is always taken: it is what the timeline announces, and a re-run of
        # the step (each resume replays it) must reach the same interrupts in the same order;
        # a check before it would read the telemetry of the re-run's time, not the first run's.
        polls += 1
        due = min([now + deps.plan.poll] + [p.deadline_at for p in waiting])
        answer = interrupt(
            {
                "kind": "timer",
                "step_id": f"{step_id}.plan",
                "due_at": due.isoformat(),
                "deadline": max(p.deadline_at for p in waiting).isoformat(),
                "polls": polls,
                "signal": CHECKPOINT_SIGNAL,
                "plan": [
                    p.payload(drain_key(run_id, step_id, p.node))
                    | {"step_id": step_id, "risk": risks[p.node]}
                    for p in waiting
                ],
                "done": [r for r in done if not r.get("announced")] if polls == 1 else [],
            }
        )
        hurried = answer.get("plan") if isinstance(answer, Mapping) else None
        if hurried in ("cancel", "now"):
            verb = "cancelled" if hurried == "cancel" else "drain now approved"
            why = f"{verb} by {answer.get('actor')}"
            why += f": {answer['reason']}" if answer.get("reason") else ""
            for plan in waiting:
                ended[plan.node] = (str(hurried), why)
            return ended, polls


def _cancelled(drain: Mapping[str, Any], why: str) -> dict[str, Any]:
    return {
        "action": "drain",
        "target": drain["target"],
        "risk": drain.get("risk"),
        "outcome": CANCELLED,
        "detail": f"{drain['description']}: not run ({why})",
    }


_TOLD = {
    "checkpoint": "after the next checkpoint ({why})",
    "deadline": "at the deadline, without a checkpoint ({why})",
    "now": "before the checkpoint ({why})",
}


def _told(result: dict[str, Any], how: str, why: str) -> dict[str, Any]:
    """The drain's result, saying which end of the wait let it run."""
    told = dict(result)
    if told.get("outcome") == CANCELLED:  # cancelled in the ledger: never run
        told.pop("repeated", None)
        return told
    told["detail"] = f"{told.get('detail')}, {_TOLD.get(how, how).format(why=why)}"
    told["plan"] = PLAN
    return told


# -- the engine's side: announce, find, cancel or hurry a waiting plan -------------------------


def plans_waiting(values: Sequence[Any]) -> list[dict[str, Any]]:
    """The deferred drains among a run's pending interrupt values."""
    return [
        dict(plan)
        for v in values
        if isinstance(v, Mapping) and v.get("kind") == "timer"
        for plan in v.get("plan") or ()
    ]


def announce(db: Engine, deps: Deps, incident_id: int, run_id: str, values: Sequence[Any]) -> None:
    """At a plan's first wait, put what the approval let run (the cordon) and "drain scheduled
    after the next checkpoint (deadline HH:MM)" on the timeline. The first poll's interrupt is
    raised once; its replay on resume is answered, never raised again."""
    first = [v for v in values if isinstance(v, Mapping) and v.get("polls") == 1]
    if not plans_waiting(first):
        return
    now = deps.clock.now()
    with session_scope(db) as session:
        for value in first:
            for result in value.get("done", []):
                lifecycle.record(
                    session,
                    incident_id=incident_id,
                    kind=ACTION_EVENTS.get(str(result.get("outcome")), EventKind.ACTION_SUCCEEDED),
                    at=now,
                    actor="bot",
                    summary=str(result.get("detail")),
                    payload=dict(result),
                    run_id=run_id,
                    step_id=str(value.get("step_id")),
                )
        for plan in plans_waiting(first):
            lifecycle.record(
                session,
                incident_id=incident_id,
                kind=EventKind.NOTE,
                at=now,
                actor="bot",
                summary=scheduled_summary(plan),
                payload={"plan": PLAN} | plan,
                run_id=run_id,
            )


def waiting_plan(session: Any, run_id: str) -> WorkItem | None:
    """The run's pending plan timer (a durable work row whose payload names the plan)."""
    for item in work_store.open_work_for_run(session, run_id):
        if item.kind == "timer" and item.payload.get("plan"):
            return item
    return None


def check_only(only: Collection[str]) -> None:
    if only and set(only) != {"drain"}:
        names = ", ".join(sorted(set(only) - {"drain"}))
        raise UserInputError(
            f"--only {names}: the run waits only for its drain after the next checkpoint "
            "(use --only drain, or no --only)"
        )


def cancel_drain(
    db: Engine, deps: Deps, item: WorkItem, *, actor: str, reason: str
) -> list[str]:
    """Write the cancel into the ledger under each waiting drain's key (the drain finds it and
    never runs); RunStateError when a drain has already been claimed. Returns the nodes."""
    plans = list(item.payload.get("plan", []))
    now = deps.clock.now()
    nodes = []
    with session_scope(db) as session:
        for plan in plans:
            node, key = str(plan["node"]), str(plan["key"])
            row, claimed = action_store.claim_action(
                session,
                key=key,
                run_id=item.run_id,
                step_id=str(plan.get("step_id", "act")),
                action="drain",
                target=node,
                params={},
                at=now,
                incident_id=item.incident_id,
            )
            if not claimed:
                raise RunStateError(
                    f"the drain of {node} cannot be cancelled: it is {row.status} already"
                )
            detail = f"drain {node}: cancelled by {actor} while it waited for the next checkpoint"
            detail += f" ({reason})" if reason else ""
            action_store.finish_action(
                session,
                key=key,
                status="skipped",
                at=now,
                outcome=CANCELLED,
                result={"outcome": CANCELLED, "detail": detail, "action": "drain",
                        "target": node, "risk": str(plan.get("risk", "high"))},
            )  # fmt: skip
            nodes.append(node)
        lifecycle.record(
            session,
            incident_id=item.incident_id,
            kind=EventKind.APPROVAL_REJECTED,
            at=now,
            actor=actor,
            summary=f"Drain of {', '.join(nodes)} after the next checkpoint cancelled by {actor}"
            + (f": {reason}" if reason else ""),
            payload={"plan": PLAN, "nodes": nodes},
            run_id=item.run_id,
        )
    return nodes


def plan_risks(item: WorkItem) -> list[Risk]:
    """The risks `approve --only drain` approves while the plan waits (high if unnamed)."""
    return [Risk(str(p.get("risk", "high"))) for p in item.payload.get("plan", [])] or [Risk.HIGH]


def decide(
    work: WorkQueue,
    item: WorkItem,
    *,
    decision: str,
    actor: str,
    reason: str,
    drive: Callable[[dict[str, Any]], RunOutcome],
) -> RunOutcome | None:
    """Cancel (`reject`) or hurry (`approve`) a waiting plan, then drive the run on at once
    under its timer row's claim (claimed early: the row is not due yet). None: another worker
    holds the timer right now; a cancel is in the ledger already and takes effect there, a
    hurry must be asked again."""
    deps = work.deps
    if decision == "reject":
        cancel_drain(work.db, deps, item, actor=actor, reason=reason)
    answer = {
        "kind": "timer",
        "plan": "cancel" if decision == "reject" else "now",
        "actor": actor,
        "at": deps.clock.now().isoformat(),
        "reason": reason,
    }
    assert item.id is not None
    with session_scope(work.db) as session:
        claimed = work_store.claim_work(
            session,
            work_id=item.id,
            owner=work.leases.owner,
            at=work.leases.now(),
            lease=work.leases.terms.lease,
            due_by=item.due_at,
        )
    if claimed is None:
        if decision == "reject":
            return None
        raise RunStateError(
            f"run {item.run_id[:8]}'s drain plan is being advanced by another worker right "
            "now; try again in a minute"
        )
    return work.perform_claimed(claimed, None, run=lambda: drive(answer))
