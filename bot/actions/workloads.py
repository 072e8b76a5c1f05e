"""Workload actions: restart a job from its checkpoint, roll back a deploy, scale a service,
restart a pod (e.g. the device plugin's). The remedies for the workload and kubernetes layers,
where the fix is to the job or its spec, never a node drain.

The Cluster port has no hook into training-job or serving controllers (PyTorchJob, Volcano,
Deployments differ per fleet), so each action hands the work to the owning team as a ticket
pre-filled with the verdict and says so in its result. Outcomes are idempotent through the
ticket's idempotency key, like every action.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from bot.actions.policy import Risk
from bot.actions.tickets import render_ticket
from bot.actions.types import ActionContext, ActionFn, ActionResult, ActionSpec
from bot.errors import UserInputError
from integrations.cluster import Outcome
from integrations.errors import InvalidName
from integrations.names import check_node_name

#: Ticket queue a workload action is handed to unless the proposal names another.
DEFAULT_QUEUE = "ml-platform"


def _checked_name(target: str, what: str) -> str:
    """Workload and pod names are DNS-1123 names, like node names."""
    try:
        return check_node_name(target)
    except InvalidName as exc:
        raise UserInputError(f"invalid {what} name '{target}': {exc}") from exc


def _handoff(verb: str, what: str, render: Callable[[str, Mapping[str, Any]], str]) -> ActionFn:
    """An action that opens a ticket asking the owners to `verb` the target."""

    def run(ctx: ActionContext, target: str, params: Mapping[str, Any]) -> ActionResult:
        name = _checked_name(target, what)
        queue = str(params.get("queue", DEFAULT_QUEUE))
        request = render(name, params)
        ticket = render_ticket(queue=queue, target=name, incident=ctx.incident, verdict=ctx.verdict)
        ticket = replace(
            ticket,
            title=f"[{verb}] {request} ({ctx.incident})",
            body=f"Requested: {request}.\n\n{ticket.body}",
            fields=ticket.fields | {"request": verb, what: name, "params": dict(params)},
        )
        ticket_id = ctx.tickets.open(ticket, idempotency_key=ctx.idempotency_key)
        detail = (
            f"{request}: handed to {queue} as ticket {ticket_id} "
            "(no workload-controller hook is configured)"
        )
        return ActionResult(Outcome.CHANGED.value, detail, {"ticket_id": ticket_id, "queue": queue})

    return run


def _restart_job(name: str, params: Mapping[str, Any]) -> str:
    return f"restart job {name} from its last checkpoint"


def _rollback(name: str, params: Mapping[str, Any]) -> str:
    to = params.get("to")
    return f"roll back {name}" + (f" to {to}" if to else " to its previous revision")


def _scale(name: str, params: Mapping[str, Any]) -> str:
    replicas = params.get("replicas")
    return f"scale {name}" + (f" to {replicas} replicas" if replicas else " out")


def _restart_pod(name: str, params: Mapping[str, Any]) -> str:
    namespace = params.get("namespace")
    return f"restart pod {name}" + (f" in {namespace}" if namespace else "")


WORKLOAD_ACTIONS: tuple[ActionSpec, ...] = (
    ActionSpec(
        "restart_job",
        Risk.MEDIUM,
        "Restart a training job from its last checkpoint (loses the steps since)",
        "workload",
        True,
        _handoff("restart_job", "workload", _restart_job),
    ),
    ActionSpec(
        "rollback",
        Risk.MEDIUM,
        "Roll a workload back to its previous image/config revision",
        "workload",
        False,
        _handoff("rollback", "workload", _rollback),
    ),
    ActionSpec(
        "scale",
        Risk.LOW,
        "Scale a serving workload out (more replicas)",
        "workload",
        False,
        _handoff("scale", "workload", _scale),
    ),
    ActionSpec(
        "restart_pod",
        Risk.MEDIUM,
        "Restart a pod (e.g. the NVIDIA device plugin) so it re-registers its devices",
        "pod",
        True,
        _handoff("restart_pod", "pod", _restart_pod),
    ),
)
