"""Remediation steps: propose actions, ask for approval (a LangGraph interrupt), act exactly
once, and verify that the fix worked.

The approve node calls `interrupt()` and has no other side effect: it re-runs from its start on
resume. Times it needs (requested/expires) are fixed earlier by the propose node, so a re-run
computes the same thing. Execution happens in the act node behind the idempotency ledger.

A verification that must wait for its next poll does not sleep on a thread: it interrupts with
a timer payload (`{"kind": "timer", "due_at": ...}`) and the run checkpoints; the engine
resumes it when the timer is due (engine/running.py). Its deadline is fixed by the act step's
time, so the re-run on resume (LangGraph re-runs an interrupted node from its start, replaying
earlier timers at once) polls again and ends at the same deadline.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from bot.actions import outcomes
from bot.actions.executing import execute_once, idempotency_key
from bot.actions.impact import IMPACT_ACTIONS, JobReadings, read_impact
from bot.actions.policy import Policy, approvers_of, is_expired, proposals_need_approval
from bot.actions.types import ActionContext
from bot.engine import deferred
from bot.engine.expressions import ExpressionError
from bot.engine.loading import LoadedRunbook
from bot.engine.policies import policy_for
from bot.engine.schema import Step, StepKind
from bot.engine.state import Deps, RunState, step_context
from bot.engine.steps.common import output, parse_duration, step_window
from bot.engine.steps.gather import NodeFn, summarize_signal
from bot.engine.steps.reviewing import review
from bot.engine.templates import TemplateRenderError
from bot.errors import StepError
from integrations.errors import IntegrationError, TelemetryUnavailable
from integrations.names import expand_nodes
from integrations.telemetry import SignalQuery, SignalResult


def _steps_of(loaded: LoadedRunbook, kind: StepKind) -> list[str]:
    return [s.id for s in loaded.runbook.steps if s.kind is kind]


def make_propose_node(step: Step, loaded: LoadedRunbook) -> NodeFn:
    localizers = _steps_of(loaded, StepKind.LOCALIZE)

    def propose_node(state: RunState, runtime: Runtime[Deps]) -> dict[str, Any]:
        deps = runtime.context
        context = step_context(state)
        steps = state.get("steps", {})
        healthy = bool(localizers) and all(
            steps.get(sid, {}).get("layer") == "none" for sid in localizers
        )
        proposals = [] if healthy else _proposals(step, loaded, context, deps)
        proposals, withheld = review(steps, localizers, proposals, actions=deps.actions)
        queries = _with_impact(deps, proposals)
        now = deps.clock.now()
        policy = policy_for(deps.policy, loaded)
        return output(
            step,
            {
                "proposals": proposals,
                "actions": [p["action"] for p in proposals],
                "needs_approval": bool(proposals) and proposals_need_approval(policy, proposals),
                "requested_at": now.isoformat(),
                "expires_at": (now + policy.approval_ttl).isoformat(),
                "policy": _policy_summary(policy, loaded.name),
                "queries": queries,
                "dry_run": deps.policy.dry_run,
                "note": "target is healthy: nothing to do" if healthy else "",
                "withheld": withheld,
            },
        )

    return propose_node


def _with_impact(deps: Deps, proposals: list[dict[str, Any]]) -> int:
    """Give cordon and drain proposals the gang-aware impact of losing their node (advice for
    the approver; a cluster error is shown as such, never a silent gap); returns the telemetry
    queries it took (each job's signals are read once)."""
    readings = JobReadings(deps.telemetry, deps.signals.names())
    found: dict[str, dict[str, Any]] = {}
    for proposal in proposals:
        node = str(proposal["target"])
        if proposal["action"] not in IMPACT_ACTIONS:
            continue
        if node not in found:
            try:
                found[node] = read_impact(
                    cluster=deps.cluster,
                    readings=readings,
                    node=node,
                    pool_label=deps.pool_label,
                ).to_dict()
            except IntegrationError as exc:
                found[node] = {"node": node, "error": f"could not be read: {exc}"}
        proposal["impact"] = found[node]
    return readings.queries


def _policy_summary(policy: Policy, runbook: str) -> dict[str, Any]:
    """What the approval message says of the policy: who may approve, the two-person risks,
    and each override the runbook's YAML made to the settings' defaults."""
    return {
        "approvers": sorted(approvers_of(policy, runbook)),
        "two_person_risks": sorted(r.value for r in policy.two_person_risks),
        "overrides": list(policy.overrides),
    }


def _proposals(
    step: Step, loaded: LoadedRunbook, context: dict[str, Any], deps: Deps
) -> list[dict[str, Any]]:
    proposals = []
    tested: dict[str, bool] = {}  # `when` source -> its value: one evaluation per distinct text
    for index, proposal in enumerate(step.propose or []):
        where = f"propose.{index}"
        if proposal.when is not None:
            try:
                if proposal.when not in tested:
                    expression = loaded.expression(step.id, f"{where}.when")
                    tested[proposal.when] = expression.test(context)
                if not tested[proposal.when]:
                    continue
            except ExpressionError as exc:
                raise step_error(loaded, step, f"{where}.when", exc) from exc
        params: dict[str, Any] = {}
        for key, value in proposal.params.items():
            params[key] = _render_param(loaded, step, f"{where}.params.{key}", value, context)
        spec = deps.actions.get(proposal.action)
        for target in _targets(step, loaded, where, context):
            proposals.append(
                {
                    "action": proposal.action,
                    "target": target,
                    "params": params,
                    "risk": spec.risk.value,
                    "destructive": spec.destructive,
                    "reason": proposal.reason,
                    "description": spec.describe(target, params),
                }
            )
    return proposals


def _targets(step: Step, loaded: LoadedRunbook, where: str, context: dict[str, Any]) -> list[str]:
    """`targets` (one proposal per rendered item), else `target`, else the run's target."""
    index = int(where.rsplit(".", 1)[1])
    proposal = (step.propose or [])[index]
    try:
        if proposal.targets is not None:
            rendered = loaded.template(step.id, f"{where}.targets").render(context)
            return list(dict.fromkeys(t for t in rendered.replace(",", " ").split() if t))
        if proposal.target is not None:
            return [loaded.template(step.id, f"{where}.target").render(context).strip()]
    except TemplateRenderError as exc:
        field = f"{where}.targets" if proposal.targets is not None else f"{where}.target"
        raise step_error(loaded, step, field, exc) from exc
    return [str(context.get("target", ""))]


def _render_param(
    loaded: LoadedRunbook, step: Step, field: str, value: Any, context: dict[str, Any]
) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return loaded.template(step.id, field).render(context)
    except TemplateRenderError as exc:  # never hand the raw template text to an action
        raise step_error(loaded, step, field, exc) from exc


def make_approve_node(step: Step, loaded: LoadedRunbook) -> NodeFn:
    proposers = _steps_of(loaded, StepKind.PROPOSE)

    def approve_node(state: RunState, runtime: Runtime[Deps]) -> dict[str, Any]:
        steps = state.get("steps", {})
        proposed = [steps[p] for p in proposers if p in steps]
        proposals = [item for p in proposed for item in p.get("proposals", [])]
        if not proposals:
            return output(step, {"decision": "not_needed", "actor": "bot", "proposals": []})
        if not any(p.get("needs_approval") for p in proposed):
            return output(
                step, {"decision": "approved", "actor": "policy:auto", "proposals": proposals}
            )
        expires_at = min(p["expires_at"] for p in proposed)
        payload = {
            "run_id": state.get("run_id"),
            "incident": state.get("incident"),
            "step_id": step.id,
            "runbook": state.get("runbook"),
            "target": state.get("target"),
            "proposals": proposals,
            "requested_at": min(p["requested_at"] for p in proposed),
            "expires_at": expires_at,
            "requester": state.get("inputs", {}).get("requester", "bot"),
            "policy": next((p["policy"] for p in proposed if "policy" in p), {}),
        }
        answer = interrupt(payload)
        return output(step, _decision(answer, expires_at) | {"proposals": proposals})

    return approve_node


def _decision(answer: Any, expires_at: str) -> dict[str, Any]:
    data = answer if isinstance(answer, dict) else {"decision": str(answer)}
    decision = str(data.get("decision", "reject"))
    at = str(data.get("at", ""))
    if at and is_expired(datetime.fromisoformat(expires_at), datetime.fromisoformat(at)):
        decision = "expired"  # too late either way: the rejected branch, recorded as expiry
    normalized = {"approve": "approved", "reject": "rejected"}.get(decision, decision)
    decided: dict[str, Any] = {
        "decision": normalized,
        "actor": str(data.get("actor", "unknown")),
        "at": at,
        "reason": str(data.get("reason", "")),
        "expires_at": expires_at,
    }
    if normalized == "approved" and data.get("only"):
        decided["only"] = sorted(str(name) for name in data["only"])
    return decided


def make_act_node(step: Step, loaded: LoadedRunbook) -> NodeFn:
    approvers = _steps_of(loaded, StepKind.APPROVE)
    proposers = _steps_of(loaded, StepKind.PROPOSE)
    localizers = _steps_of(loaded, StepKind.LOCALIZE)

    def act_node(state: RunState, runtime: Runtime[Deps]) -> dict[str, Any]:
        deps = runtime.context
        steps = state.get("steps", {})
        decisions = [steps[a] for a in approvers if a in steps]
        if approvers and not all(d.get("decision") == "approved" for d in decisions):
            reason = ", ".join(f"{d.get('decision')} by {d.get('actor')}" for d in decisions)
            return output(
                step, {"skipped": True, "reason": reason or "not approved", "results": []}
            )
        proposals = [item for p in proposers for item in steps.get(p, {}).get("proposals", [])]
        verdict = steps.get(localizers[0], {}) if localizers else {}
        chosen, rest = _split(proposals, decisions[0].get("only") if decisions else None)
        chosen, waits = deferred.deferred_drains(chosen, deps.plan)  # cordon now, drain later
        chosen = deferred.cordons_for(waits, chosen, deps) + chosen
        results = _execute(step, state, deps, verdict, chosen)
        later: list[dict[str, Any]] = []
        while rest:  # the actions not yet approved: asked again, each round its own expiry
            results = [r | {"announced": True} for r in results]  # on the timeline at the ask
            answer = _ask_rest(step, state, steps, decisions, later, rest, results)
            later.append(answer)
            if answer["decision"] != "approved":
                results += [_not_approved(p, answer) for p in rest]
                break
            chosen, rest = _split(rest, answer.get("only"))
            results += _execute(step, state, deps, verdict, chosen)
        story: list[dict[str, Any]] = []
        if waits:
            results, story = _carry_out_plan(step, state, loaded, deps, verdict, waits, results)
        ran = [r for r in results if r["outcome"] != NOT_APPROVED]
        ok = all(r["outcome"] in ("changed", "already_done") for r in ran)
        done = {"skipped": False, "results": results, "succeeded": ok and bool(ran)}
        if story:
            done["plans"] = story
        if later:
            done["later_decisions"] = later
        return output(step, done | {"at": deps.clock.now().isoformat()})

    return act_node


def _carry_out_plan(
    step: Step,
    state: RunState,
    loaded: LoadedRunbook,
    deps: Deps,
    verdict: dict[str, Any],
    waits: list[dict[str, Any]],
    results: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The drains that wait for the next checkpoint (bot/engine/deferred.py), after what the
    approval let run at once; that part is on the timeline from the plan's first wait."""
    steps = state.get("steps", {})
    approvers = [steps[a] for a in _steps_of(loaded, StepKind.APPROVE) if a in steps]
    first = approvers[0] if approvers else {"actor": "policy:auto"}
    requester = str(state.get("inputs", {}).get("requester", "bot"))
    started = str(first.get("at") or _requested_at(steps, first))
    policy = policy_for(deps.policy, loaded)

    def ask(drains: list[dict[str, Any]], at: datetime, why: str) -> dict[str, Any]:
        return _ask_plan(step, state, steps, policy, drains, at, why)

    later, story = deferred.carry_out(
        step_id=step.id,
        run_id=str(state.get("run_id", "")),
        deps=deps,
        policy=policy,
        runbook=loaded.name,
        decision=dict(first) | {"requester": requester},
        started_at=datetime.fromisoformat(started),
        drains=waits,
        done=results,
        terms=deps.plan,
        execute=lambda drains: _execute(step, state, deps, verdict, drains),
        ask=ask,
    )
    if any(s.get("waited") for s in story):
        results = [r | {"announced": True} for r in results]
    return results + later, story


def _ask_plan(
    step: Step,
    state: RunState,
    steps: dict[str, Any],
    policy: Policy,
    drains: list[dict[str, Any]],
    asked_at: datetime,
    why: str,
) -> dict[str, Any]:
    """Ask again for a drain that waited (its deadline passed, or its approver no longer
    qualifies). A replayed timer answer is not a decision: the question is asked again."""
    expires_at = (asked_at + policy.approval_ttl).isoformat()
    step_id = f"{step.id}.plan-{drains[0]['target']}"
    payload = _question(step_id, state, steps, drains, asked_at, expires_at) | {
        "why": f"the drain waited for the next checkpoint: {why}",
    }
    answer = interrupt(payload)
    while isinstance(answer, Mapping) and answer.get("kind") == "timer":
        answer = interrupt(payload)
    return _decision(answer, expires_at)


def incident_key(incident: str, action: str, proposal: Mapping[str, Any]) -> str:
    """The idempotency key of a per-incident action: no run in it, so a re-run of the
    incident finds the first run's claim."""
    params = json.dumps(proposal.get("params", {}), sort_keys=True, default=str)
    return idempotency_key(
        run_id=incident, step_id="incident", action=action, target=f"{proposal['target']}{params}"
    )


NOT_APPROVED = "not_approved"
"""The outcome of a proposed action whose approval was rejected or expired after others ran."""


def _split(
    proposals: list[dict[str, Any]], only: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(approved now, still to approve): `only` names the approved actions; None: all."""
    if not only:
        return proposals, []
    names = set(only)
    return [p for p in proposals if p["action"] in names], [
        p for p in proposals if p["action"] not in names
    ]


def _ask_rest(
    step: Step,
    state: RunState,
    steps: dict[str, Any],
    decisions: list[dict[str, Any]],
    later: list[dict[str, Any]],
    rest: list[dict[str, Any]],
    done: list[dict[str, Any]],
) -> dict[str, Any]:
    """Interrupt for the actions still awaiting approval. Its times come from the previous
    decision (in state), so the re-run on resume asks the same question with the same expiry."""
    previous = later[-1] if later else decisions[0]
    asked_at = datetime.fromisoformat(str(previous["at"]))
    first = decisions[0]
    ttl = datetime.fromisoformat(str(first["expires_at"])) - datetime.fromisoformat(
        str(_requested_at(steps, first))
    )
    expires_at = (asked_at + ttl).isoformat()
    payload = _question(
        f"{step.id}.rest{len(later) + 1}", state, steps, rest, asked_at, expires_at
    ) | {
        "after": {"actor": previous.get("actor"), "only": previous.get("only")},
        "done": [r for r in done if r["outcome"] != NOT_APPROVED],
    }
    return _decision(interrupt(payload), expires_at)


def _question(
    step_id: str,
    state: RunState,
    steps: dict[str, Any],
    proposals: list[dict[str, Any]],
    asked_at: datetime,
    expires_at: str,
) -> dict[str, Any]:
    """The approval payload of a question the act step asks (the rest, a waited drain)."""
    return {
        "run_id": state.get("run_id"),
        "incident": state.get("incident"),
        "step_id": step_id,
        "runbook": state.get("runbook"),
        "target": state.get("target"),
        "proposals": proposals,
        "requested_at": asked_at.isoformat(),
        "expires_at": expires_at,
        "requester": state.get("inputs", {}).get("requester", "bot"),
        "policy": next((s["policy"] for s in steps.values() if "policy" in s), {}),
    }


def _requested_at(steps: dict[str, Any], decision: dict[str, Any]) -> str:
    """When the first approval was requested (the propose step's time)."""
    asked = [str(s["requested_at"]) for s in steps.values() if s.get("kind") == "propose"]
    return min(asked) if asked else str(decision.get("at"))


def _not_approved(proposal: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    return {
        "action": proposal["action"],
        "target": proposal["target"],
        "risk": proposal.get("risk"),
        "outcome": NOT_APPROVED,
        "detail": f"{proposal['description']}: not run ({answer['decision']} by "
        f"{answer['actor']})",
    }


def _execute(
    step: Step,
    state: RunState,
    deps: Deps,
    verdict: dict[str, Any],
    proposals: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Each proposal once, behind its idempotency key (a re-run returns the first result)."""
    results = []
    for proposal in proposals:
        spec = deps.actions.get(proposal["action"])
        key = idempotency_key(
            run_id=state.get("run_id", ""),
            step_id=step.id,
            action=spec.name,
            target=proposal["target"],
        )
        if spec.per_incident:  # once per incident and parameters (a ticket per queue)
            key = incident_key(state.get("incident", ""), spec.name, proposal)
        ctx = ActionContext(
            cluster=deps.cluster,
            clock=deps.clock,
            tickets=deps.tickets,
            run_id=state.get("run_id", ""),
            incident=state.get("incident", ""),
            idempotency_key=key,
            verdict=verdict,
            silences=deps.silences,
        )
        results.append(
            execute_once(
                spec,
                ctx,
                ledger=deps.ledger,
                step_id=step.id,
                target=proposal["target"],
                params=proposal.get("params", {}),
                dry_run=deps.policy.dry_run,
            )
        )
    return results


def make_verify_node(step: Step, loaded: LoadedRunbook) -> NodeFn:
    spec = step.verify
    assert spec is not None
    actors = _steps_of(loaded, StepKind.ACT)
    expect = loaded.expression(step.id, "verify.expect")

    def verify_node(state: RunState, runtime: Runtime[Deps]) -> dict[str, Any]:
        deps = runtime.context
        steps = state.get("steps", {})
        acts = [steps.get(a, {}) for a in actors]
        if not acts or any(a.get("skipped") or not a.get("succeeded") for a in acts):
            results = [r for a in acts for r in a.get("results") or ()]
            reason = "no action was carried out"
            if outcomes.partly_done(results):  # never "no action" after a cordon
                reason = f"not every action was carried out ({outcomes.describe(results)})"
            return output(step, {"status": "skipped", "reason": reason})
        if spec.when is not None and not _applies(loaded, step, step_context(state)):
            reason = f"it checks only when {spec.when}, which does not hold for this incident"
            return output(step, {"status": "skipped", "reason": reason, "condition": spec.when})
        inputs = state.get("inputs", {})
        workload = inputs.get("job") or inputs.get("service")  # job runbooks verify the job
        target = inputs.get("node") or ("" if workload else state.get("target", ""))
        nodes = expand_nodes(str(target)) if target else []
        window = parse_duration(spec.window) if spec.window else step_window(loaded, step, state)
        acted = [str(a["at"]) for a in acts if a.get("at")]
        start = max(datetime.fromisoformat(a) for a in acted) if acted else deps.clock.now()
        deadline = start + parse_duration(spec.within)
        interval = parse_duration(spec.interval)
        polls, queries, summary = 0, 0, {}
        while True:
            polls += 1
            try:
                result = deps.telemetry.read(
                    SignalQuery(
                        signal=spec.signal, nodes=tuple(nodes), window=window, workload=workload
                    )
                )
            except TelemetryUnavailable:
                result = SignalResult(signal=spec.signal, missing_nodes=tuple(nodes))
            queries += result.queries
            summary = summarize_signal(result, nodes=nodes, window=window)
            if _holds(loaded, step, expect, summary, step_context(state)):
                return output(step, _verified("passed", summary, polls, queries, deps))
            due = deps.clock.now() + interval
            if due > deadline or interval <= timedelta(0):
                return output(step, _verified("failed", summary, polls, queries, deps))
            interrupt(
                {
                    "kind": "timer",
                    "step_id": step.id,
                    "due_at": due.isoformat(),
                    "deadline": deadline.isoformat(),
                    "polls": polls,
                    "signal": spec.signal,
                }
            )

    return verify_node


def _applies(loaded: LoadedRunbook, step: Step, context: dict[str, Any]) -> bool:
    """Whether the verify step's `when` holds; an expression error fails the step loudly."""
    try:
        return loaded.expression(step.id, "verify.when").test(context)
    except ExpressionError as exc:
        raise step_error(loaded, step, "verify.when", exc) from exc


def _holds(
    loaded: LoadedRunbook, step: Step, expect: Any, summary: dict[str, Any], run: dict[str, Any]
) -> bool:
    """`expect` over the fresh reading (`value` = its max, `min`, `median`, ...), which may
    also compare with the run's inputs and earlier steps (e.g. `median >= drop *
    baseline.median`). No reading is not a pass; an expression that cannot be evaluated is a
    broken step (StepError), never "verification failed"."""
    if summary.get("missing"):
        return False
    context = run | dict(summary) | {"value": summary.get("max")}
    try:
        return bool(expect.test(context))
    except ExpressionError as exc:
        raise step_error(loaded, step, "verify.expect", exc) from exc


def step_error(loaded: LoadedRunbook, step: Step, field: str, exc: Exception) -> StepError:
    """The loud failure of a step whose expression or template broke at run time."""
    return StepError(f"could not be evaluated: {exc}", file=loaded.file, step=step.id, field=field)


def _verified(
    status: str, summary: dict[str, Any], polls: int, queries: int, deps: Deps
) -> dict[str, Any]:
    return {
        "status": status,
        "signal": summary.get("signal"),
        "value": summary.get("max"),
        "polls": polls,
        "queries": queries,
        "at": deps.clock.now().isoformat(),
    }
