"""`silence`: the node's alerts silenced in Alertmanager while it is remediated (the bot's own
silences are expired again when the incident resolves: bot/work/dispatching.py)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from bot.actions.types import ActionContext, ActionResult
from bot.errors import UserInputError
from integrations import durations
from integrations.alertmanager import Matcher
from integrations.cluster import Outcome
from integrations.names import check_node_name


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
