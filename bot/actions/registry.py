"""The action registry: every remediation the bot can carry out, with its risk level.

Actions are idempotent ("already cordoned" is a result, not an error), return data, and never
talk to Slack or the terminal themselves (presentation renders their results).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from bot.actions.coexistence import (
    BOT,
    Markers,
    human_override,
    pause_refusal,
    refusal,
    uncordon_refusal,
)
from bot.actions.policy import Risk
from bot.clock import Clock
from bot.errors import UserInputError
from integrations.alertmanager import Matcher, Silences
from integrations.cluster import Cluster, DrainReport, NodeInfo, Outcome
from integrations.names import check_node_name
from integrations.node_agent import NodeAgent
from integrations.tickets import Ticket, Tickets


@dataclass(frozen=True)
class ActionContext:
    cluster: Cluster
    clock: Clock
    tickets: Tickets
    run_id: str
    incident: str
    idempotency_key: str
    verdict: Mapping[str, Any] = field(default_factory=dict)
    silences: Silences | None = None


@dataclass(frozen=True)
class ActionResult:
    outcome: str  # changed | already_done | skipped | failed | dry_run | refused | cancelled
    detail: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "detail": self.detail, "data": self.data}


ActionFn = Callable[[ActionContext, str, Mapping[str, Any]], ActionResult]


@dataclass(frozen=True)
class ActionSpec:
    name: str
    risk: Risk
    help: str
    target_kind: str  # node | workload
    destructive: bool
    run: ActionFn
    #: Carried out once per incident, not once per run: a re-run of the incident finds the
    #: first run's result (a second RMA ticket for one GPU is a second RMA).
    per_incident: bool = False

    def describe(self, target: str, params: Mapping[str, Any]) -> str:
        extra = ", ".join(f"{k}={v}" for k, v in params.items())
        return f"{self.name} {target}" + (f" ({extra})" if extra else "")


class ActionRegistry:
    def __init__(self, specs: list[ActionSpec]) -> None:
        self._specs = {spec.name: spec for spec in specs}

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Any:
        return iter(sorted(self._specs))

    def names(self) -> list[str]:
        return sorted(self._specs)

    def get(self, name: str) -> ActionSpec:
        try:
            return self._specs[name]
        except KeyError:
            raise UserInputError(
                f"unknown action '{name}' (actions: {', '.join(self.names())})"
            ) from None


def node_actions(markers: Markers) -> list[ActionSpec]:
    """cordon, uncordon, drain and taint: each reads the node first, refuses a node another
    party holds, cancels when a human undid the bot's cordon, and records ownership."""

    def cordon(ctx: ActionContext, target: str, params: Mapping[str, Any]) -> ActionResult:
        node = _read_node(ctx, target)
        stop = _stopped(node, ctx, markers)
        if stop is not None:
            return stop
        if node.unschedulable:
            _mark_claimed_cordon_done(ctx, node, markers)
            gpus = {"gpus": node.gpu_capacity}  # GPU-hours out of service (incidents/gpu_hours)
            return ActionResult(Outcome.ALREADY_DONE.value, f"{node.name} already cordoned", gpus)
        _cordon_owned(ctx, node.name, markers, reason=_reason(ctx, params))
        data = _owner(ctx) | {"gpus": node.gpu_capacity}
        return ActionResult(Outcome.CHANGED.value, f"{node.name} cordoned", data)

    def uncordon(ctx: ActionContext, target: str, params: Mapping[str, Any]) -> ActionResult:
        node = _read_node(ctx, target)
        refused = uncordon_refusal(node, markers)
        if refused is not None:
            return ActionResult("refused", f"refused: {refused}", {"reason": refused})
        outcome = ctx.cluster.uncordon(node.name)
        if markers.owns_cordon(node):
            ctx.cluster.annotate(node.name, markers.released())
        detail = "uncordoned" if outcome is Outcome.CHANGED else "already schedulable"
        return ActionResult(outcome.value, f"{node.name} {detail}")

    def drain(ctx: ActionContext, target: str, params: Mapping[str, Any]) -> ActionResult:
        grace = timedelta(seconds=float(params.get("grace_seconds", 30)))
        node = _read_node(ctx, target)
        stop = _stopped(node, ctx, markers)
        if stop is not None:
            return stop
        if not node.unschedulable:  # a drain cordons first, and the cordon is owned
            _cordon_owned(ctx, node.name, markers, reason=_reason(ctx, params))
        else:
            _mark_claimed_cordon_done(ctx, node, markers)
        report = ctx.cluster.drain(node.name, grace=grace)
        drained = _drained(node.name, report)
        drained.data["gpus"] = node.gpu_capacity  # GPU-hours out of service (incidents/gpu_hours)
        return drained

    def taint(ctx: ActionContext, target: str, params: Mapping[str, Any]) -> ActionResult:
        node = _read_node(ctx, target)
        stop = _stopped(node, ctx, markers)
        if stop is not None:
            return stop
        key = str(params.get("key") or f"{markers.prefix}/unhealthy")
        effect = str(params.get("effect", "NoSchedule"))
        value = str(params.get("value", ""))
        ctx.cluster.annotate(
            node.name, markers.taint_claim(incident=ctx.incident, reason=_reason(ctx, params))
        )
        outcome = ctx.cluster.taint(node.name, key=key, value=value, effect=effect)
        shown = f"{key}={value}:{effect}" if value else f"{key}:{effect}"
        detail = "tainted" if outcome is Outcome.CHANGED else "already tainted"
        return ActionResult(outcome.value, f"{node.name} {detail} {shown}", _owner(ctx))

    return [
        ActionSpec("cordon", Risk.MEDIUM, "Mark the node unschedulable", "node", False, cordon),
        ActionSpec(
            "uncordon",
            Risk.LOW,
            "Make the node schedulable again (only nodes the bot cordoned)",
            "node",
            False,
            uncordon,
        ),
        ActionSpec(
            "drain",
            Risk.HIGH,
            "Evict the node's pods (Eviction API, respects PDBs)",
            "node",
            True,
            drain,
        ),
        ActionSpec(
            "taint",
            Risk.MEDIUM,
            "Taint the node (default gpu-oncall.io/unhealthy:NoSchedule)",
            "node",
            False,
            taint,
        ),
    ]


def _read_node(ctx: ActionContext, target: str) -> NodeInfo:
    """The node as it is right now: every check happens at act time, right before acting."""
    return ctx.cluster.nodes([check_node_name(target)])[0]


def _stopped(node: NodeInfo, ctx: ActionContext, markers: Markers) -> ActionResult | None:
    """A cancelled result when a human undid the bot's cordon for this incident; a refused
    one when another party holds the node (its markers, then a paused remediator selecting
    it: one read of the cluster); None when the action may go ahead."""
    cancelled = human_override(node, markers, incident=ctx.incident)
    if cancelled is not None:
        return ActionResult("cancelled", f"cancelled: {cancelled}", {"reason": cancelled})
    refused = refusal(node, markers)
    if refused is None:
        refused = pause_refusal(node, ctx.cluster.remediation_pauses(node))
    if refused is not None:
        return ActionResult("refused", f"refused: {refused}", {"reason": refused})
    return None


def _mark_claimed_cordon_done(ctx: ActionContext, node: NodeInfo, markers: Markers) -> None:
    """A cordon this incident claimed, which landed after its worker stopped (the PATCH was
    applied, the `cordoned-at` mark never written): mark it done now, so a person's later
    uncordon is recognised and never undone (`human_override`)."""
    ours = markers.owns_cordon(node) and node.annotations.get(markers.incident) == ctx.incident
    if ours and markers.cordoned_at not in node.annotations:
        ctx.cluster.annotate(node.name, markers.cordon_done(at=ctx.clock.now()))


def _cordon_owned(ctx: ActionContext, node: str, markers: Markers, *, reason: str) -> None:
    """Claim, cordon, then mark the cordon done: a crash between leaves a claim the next try
    recognises as the bot's own, never a cordon nobody owns."""
    ctx.cluster.annotate(node, markers.cordon_claim(incident=ctx.incident, reason=reason))
    ctx.cluster.cordon(node)
    ctx.cluster.annotate(node, markers.cordon_done(at=ctx.clock.now()))


def _reason(ctx: ActionContext, params: Mapping[str, Any]) -> str:
    given = params.get("reason") or ctx.verdict.get("summary") or ctx.verdict.get("layer")
    reason = f"{ctx.incident}: {given}" if given else ctx.incident
    return reason[:250]


def _owner(ctx: ActionContext) -> dict[str, Any]:
    return {"owner": BOT, "incident": ctx.incident}


def _drained(node: str, report: DrainReport) -> ActionResult:
    if report.outcome is Outcome.ALREADY_DONE:
        return ActionResult(report.outcome.value, f"{node} already drained")
    detail = f"{node} drained: {len(report.evicted)} pod(s) evicted"
    if report.blocked:
        detail += f", {len(report.blocked)} blocked by a PodDisruptionBudget"
    data = {
        "evicted": list(report.evicted),
        "skipped": list(report.skipped),
        "blocked": list(report.blocked),
        "reasons": dict(report.reasons),
    }
    return ActionResult(report.outcome.value, detail, data)


def _open_ticket(ctx: ActionContext, target: str, params: Mapping[str, Any]) -> ActionResult:
    queue = str(params.get("queue", "ops"))
    ticket = render_ticket(queue=queue, target=target, incident=ctx.incident, verdict=ctx.verdict)
    ticket_id = ctx.tickets.open(ticket, idempotency_key=ctx.idempotency_key)
    return ActionResult(
        Outcome.CHANGED.value,
        f"opened {queue} ticket {ticket_id} for {target}",
        {"ticket_id": ticket_id, "queue": queue, "title": ticket.title, "body": ticket.body},
    )


def _silence(ctx: ActionContext, target: str, params: Mapping[str, Any]) -> ActionResult:
    """Silence every alert about the node (one silence per node label), or only `alertname`."""
    node = check_node_name(target)
    if ctx.silences is None:
        return ActionResult("skipped", f"no Alertmanager configured: {node} was not silenced")
    duration = _duration(params.get("duration", "2h"))
    labels = params.get("labels") or ctx.silences.node_labels
    labels = [labels] if isinstance(labels, str) else list(labels)
    extra = [Matcher("alertname", str(params["alertname"]))] if params.get("alertname") else []
    ids, outcomes, shown = [], [], []
    for label in labels:
        matchers = [Matcher(str(label), node), *extra]
        silence_id, outcome = ctx.silences.create(
            matchers=matchers,
            duration=duration,
            created_by="gpu-oncall",
            comment=f"{ctx.incident}: {node} is being remediated (run {ctx.run_id[:8]})",
        )
        ids.append(silence_id)
        outcomes.append(outcome)
        shown.append(",".join(f'{m.name}="{m.value}"' for m in matchers))
    changed = any(o is Outcome.CHANGED for o in outcomes)
    outcome = Outcome.CHANGED if changed else Outcome.ALREADY_DONE
    what = "silenced" if changed else "already silenced"
    data = {"silence_ids": ids, "matchers": shown, "duration_seconds": duration.total_seconds()}
    return ActionResult(outcome.value, f"{node}: alerts {what} for {_show(duration)}", data)


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|d)$")


def _duration(value: Any) -> timedelta:
    if isinstance(value, int | float):
        return timedelta(seconds=float(value))
    match = _DURATION.match(str(value).strip())
    if match is None:
        raise UserInputError(f"silence: invalid duration '{value}' (use e.g. 30m, 2h, 1d)")
    return timedelta(seconds=float(match[1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match[2]])


def _show(duration: timedelta) -> str:
    seconds = int(duration.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0 and seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def render_ticket(*, queue: str, target: str, incident: str, verdict: Mapping[str, Any]) -> Ticket:
    """A ticket pre-filled with the evidence (XID codes, ECC counts, remap state, GPU UUIDs)."""
    findings = verdict.get("findings", [])
    culprits = verdict.get("culprit_details", [])
    lines = [f"Incident {incident}: {verdict.get('summary', '')}", "", "Evidence:"]
    for finding in findings:
        lines.append(f"- [{finding['severity']}] {finding['summary']}")
        for ev in finding.get("evidence", [])[:5]:
            labels = ", ".join(f"{k}={v}" for k, v in ev.get("labels", {}).items())
            lines.append(f"    {ev['what']} = {ev.get('value')} {labels}".rstrip())
    uuids = sorted({c["uuid"] for c in culprits if c.get("uuid")})
    gpus = sorted({c["gpu"] for c in culprits if c.get("gpu")})
    title = f"[{queue.upper()}] {target}" + (f" GPU {', '.join(gpus)}" if gpus else "")
    title += f": {verdict.get('layer', 'unknown')} fault ({incident})"
    fields = {"node": target, "incident": incident, "gpus": gpus, "gpu_uuids": uuids}
    return Ticket(queue=queue, title=title, body="\n".join(lines), fields=fields)


def default_registry(
    *, markers: Markers | None = None, agent: NodeAgent | None = None, agent_queue: str = "node-ops"
) -> ActionRegistry:
    """The built-in actions. Risk levels drive the approval policy; `markers` are the node
    annotations and labels the node actions write and respect (`kubernetes.*` settings);
    `agent` carries out gpu_reset/reboot (None: they open a ticket in `agent_queue`)."""
    # Imported here: these actions build on this module's ActionSpec and render_ticket.
    from bot.actions.node_agent import node_agent_actions
    from bot.actions.workloads import WORKLOAD_ACTIONS

    return ActionRegistry(
        [
            *WORKLOAD_ACTIONS,
            *node_actions(markers or Markers()),
            ActionSpec(
                "open_ticket",
                Risk.LOW,
                "Open an RMA/fabric/facility ticket with the evidence",
                "node",
                False,
                _open_ticket,
                per_incident=True,
            ),
            ActionSpec(
                "silence",
                Risk.LOW,
                "Silence the node's alerts in Alertmanager while it is remediated",
                "node",
                False,
                _silence,
            ),
            *node_agent_actions(agent, ticket_queue=agent_queue),
        ]
    )
