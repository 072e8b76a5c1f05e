"""The action catalogue: every remediation the bot can carry out, with its risk level (the
types they share are bot/actions/types.py).

Actions are idempotent ("already cordoned" is a result, not an error), return data, and never
talk to Slack or the terminal themselves (presentation renders their results).
"""

from __future__ import annotations

from collections.abc import Mapping
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
from bot.actions.job_requeue import drain_node
from bot.actions.node_agent import node_agent_actions
from bot.actions.policy import Risk
from bot.actions.silences import silence
from bot.actions.tickets import open_ticket
from bot.actions.types import ActionContext, ActionRegistry, ActionResult, ActionSpec
from bot.actions.workloads import WORKLOAD_ACTIONS
from integrations.cluster import DrainReport, NodeInfo, Outcome
from integrations.names import check_node_name
from integrations.node_agent import NodeAgent


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
        report = drain_node(ctx.cluster, node.name, grace=grace, params=params)
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
    detail = f"{node} drained: {len(report.evicted)} {report.moved_as}"
    if report.blocked:
        detail += f", {len(report.blocked)} {report.blocked_as}"
    data = {
        "evicted": list(report.evicted),
        "skipped": list(report.skipped),
        "blocked": list(report.blocked),
        "reasons": dict(report.reasons),
    }
    return ActionResult(report.outcome.value, detail, data)


def default_registry(
    *, markers: Markers | None = None, agent: NodeAgent | None = None, agent_queue: str = "node-ops"
) -> ActionRegistry:
    """The built-in actions. Risk levels drive the approval policy; `markers` are the node
    annotations and labels the node actions write and respect (`kubernetes.*` settings);
    `agent` carries out gpu_reset/reboot (None: they open a ticket in `agent_queue`)."""
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
                open_ticket,
                per_incident=True,
            ),
            ActionSpec(
                "silence",
                Risk.LOW,
                "Silence the node's alerts in Alertmanager while it is remediated",
                "node",
                False,
                silence,
            ),
            *node_agent_actions(agent, ticket_queue=agent_queue),
        ]
    )
