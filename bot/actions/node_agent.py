"""`gpu_reset` and `reboot`: carried out by the node agent when one is configured (`agent.mode`:
an HTTP endpoint, or a Kubernetes Job on the node), otherwise handed to people as a ticket with
the exact command to run. Never a silent skip.

The agent's answer is the action's result (`changed`, `already_done`, `failed` with its detail);
the idempotency key travels with the request, so a resumed run never resets a GPU twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from bot.actions.policy import Risk
from bot.actions.tickets import render_ticket
from bot.actions.types import ActionContext, ActionFn, ActionResult, ActionSpec
from integrations.cluster import Outcome
from integrations.names import check_node_name
from integrations.node_agent import AgentRequest, NodeAgent
from integrations.node_jobs import JobNodeAgent

_COMMANDS = {"gpu_reset": "nvidia-smi -r", "reboot": "systemctl reboot"}
_WHAT = {"gpu_reset": "reset GPU", "reboot": "reboot"}


def node_agent_actions(agent: NodeAgent | None, *, ticket_queue: str) -> list[ActionSpec]:
    """The two actions that need a process on the node."""
    return [
        ActionSpec(
            "gpu_reset",
            Risk.HIGH,
            "Reset a GPU (nvidia-smi -r) via the node agent; a ticket when none is configured",
            "node",
            True,
            _through_agent("gpu_reset", agent, ticket_queue),
        ),
        ActionSpec(
            "reboot",
            Risk.HIGH,
            "Reboot the node via the node agent; a ticket when none is configured",
            "node",
            True,
            _through_agent("reboot", agent, ticket_queue),
        ),
    ]


def _through_agent(action: str, agent: NodeAgent | None, queue: str) -> ActionFn:
    def run(ctx: ActionContext, target: str, params: Mapping[str, Any]) -> ActionResult:
        node = check_node_name(target)
        gpu = _gpu(action, node, params, ctx.verdict)
        if agent is None:
            return _ticket(ctx, action, node, gpu, str(params.get("queue", queue)))
        bound = agent.on(ctx.cluster) if isinstance(agent, JobNodeAgent) else agent
        answer = bound.request(
            AgentRequest(node=node, action=action, gpu=gpu, idempotency_key=ctx.idempotency_key)
        )
        what = f"{_WHAT[action]} {node}" + (f" GPU {gpu}" if gpu is not None else "")
        detail = f"{what}: {answer.outcome.replace('_', ' ')} by the node agent"
        detail += f" ({answer.detail})" if answer.detail else ""
        data = {"node": node, "gpu": gpu, "agent_detail": answer.detail}
        return ActionResult(answer.outcome, detail, data)

    return run


def _gpu(
    action: str, node: str, params: Mapping[str, Any], verdict: Mapping[str, Any]
) -> str | None:
    """The GPU a reset is for: the `gpu` parameter, else the verdict's culprit GPU on the node."""
    if action != "gpu_reset":
        return None
    if params.get("gpu") is not None:
        return str(params["gpu"])
    for culprit in verdict.get("culprit_details", []):
        if culprit.get("node") == node and culprit.get("gpu") is not None:
            return str(culprit["gpu"])
    return None


def _ticket(
    ctx: ActionContext, action: str, node: str, gpu: str | None, queue: str
) -> ActionResult:
    """No agent configured: a person does it, from a ticket that says exactly what to run."""
    command = _COMMANDS[action] + (f" -i {gpu}" if gpu is not None else "")
    what = f"{_WHAT[action]} {node}" + (f" GPU {gpu}" if gpu is not None else "")
    ticket = render_ticket(queue=queue, target=node, incident=ctx.incident, verdict=ctx.verdict)
    ticket = replace(
        ticket,
        title=f"[{action}] {what} ({ctx.incident})",
        body=f"Requested: {what}. Run on the node (drained first): {command}\n\n{ticket.body}",
        fields=ticket.fields | {"request": action, "command": command},
    )
    ticket_id = ctx.tickets.open(ticket, idempotency_key=ctx.idempotency_key)
    detail = (
        f"{what}: no node agent is configured (GPU_ONCALL_AGENT__URL), so it was handed to "
        f"{queue} as ticket {ticket_id} with the command `{command}`"
    )
    data = {"ticket_id": ticket_id, "queue": queue, "command": command, "handed_off": True}
    return ActionResult(Outcome.CHANGED.value, detail, data)
