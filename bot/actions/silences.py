"""`silence`: the node's alerts silenced in Alertmanager while it is remediated, and the bot's
own silences expired again once the incident resolves (`expire_incident_silences`, queued by the
triage pool when it hears of the resolution: bot/work/dispatching.py)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from sqlalchemy.engine import Engine

from bot.actions.types import ActionContext, ActionResult
from bot.errors import UserInputError
from integrations import durations
from integrations.alertmanager import Matcher, Silences
from integrations.cluster import Outcome
from integrations.errors import IntegrationError
from integrations.names import check_node_name
from storage import actions as action_store
from storage.db import read_scope


def silence(ctx: ActionContext, target: str, params: Mapping[str, Any]) -> ActionResult:
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
    shown_for = durations.render_duration(duration)
    return ActionResult(outcome.value, f"{node}: alerts {what} for {shown_for}", data)


def _duration(value: Any) -> timedelta:
    try:
        return durations.parse_duration(value)
    except durations.InvalidDuration as exc:
        raise UserInputError(f"silence: {exc}") from exc


def expire_incident_silences(
    db: Engine, silences: Silences, incident_id: int
) -> list[tuple[str, bool]]:
    """Expire every silence the incident's runs created; one timeline note per silence, as
    (text, failed). A silence already gone is reported as such, never an error."""
    with read_scope(db) as session:  # reads only: never the write lock
        results = action_store.succeeded_results(session, incident_id=incident_id, action="silence")
    ids = [str(i) for result in results for i in result.get("data", {}).get("silence_ids", [])]
    notes: list[tuple[str, bool]] = []
    for silence_id in dict.fromkeys(ids):
        try:
            outcome = silences.expire(silence_id)
        except IntegrationError as exc:
            notes.append((f"Could not expire silence {silence_id}: {exc}", True))
            continue
        notes.append((f"Silence {silence_id} expired ({outcome.value}): resolved", False))
    return notes
