"""`open_ticket`: an RMA / fabric / facility ticket pre-filled with the evidence, and the ticket
text the node-agent and workload actions hand over when they cannot act themselves."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.actions.types import ActionContext, ActionResult
from integrations.cluster import Outcome
from integrations.tickets import Ticket


def open_ticket(ctx: ActionContext, target: str, params: Mapping[str, Any]) -> ActionResult:
    queue = str(params.get("queue", "ops"))
    ticket = render_ticket(queue=queue, target=target, incident=ctx.incident, verdict=ctx.verdict)
    ticket_id = ctx.tickets.open(ticket, idempotency_key=ctx.idempotency_key)
    return ActionResult(
        Outcome.CHANGED.value,
        f"opened {queue} ticket {ticket_id} for {target}",
        {"ticket_id": ticket_id, "queue": queue, "title": ticket.title, "body": ticket.body},
    )


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
