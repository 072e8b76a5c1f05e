"""Received alerts as plain rows for `gpu-oncall alerts`: what arrived, where it went, and for
an alert no runbook took, why. The reason is found by routing the alert again with today's
runbooks, so the listing stays right after a runbook that takes the alert is added.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError
from sqlmodel import Session

from bot.intake.alert_rows import alert_row
from bot.intake.alerts import REJECTED, Alert
from bot.intake.routing import AlertRoute, Unroutable, route_alert
from storage import alerts as alert_store
from storage.tables import ReceivedAlert


def alert_rows(
    session: Session,
    *,
    routes: Mapping[str, AlertRoute] | Callable[[], Mapping[str, AlertRoute]],
    unrouted: bool,
    limit: int,
) -> list[dict[str, Any]]:
    """Newest first. `unrouted`: only alerts attached to no incident that no runbook takes.
    `routes` may be a function giving them: it is called only if an alert attached to no
    incident is listed (loading the runbooks costs more than the listing)."""
    rows: list[dict[str, Any]] = []
    batch = alert_store.list_alerts(session, unattached_only=unrouted, limit=limit * 4 or 1)
    known: list[Mapping[str, AlertRoute]] = []

    def table() -> Mapping[str, AlertRoute]:
        if not known:
            known.append(routes() if callable(routes) else routes)
        return known[0]

    for stored in batch:
        reason = _unroutable_reason(stored, table) if stored.incident_id is None else None
        if unrouted and reason is None:
            continue  # e.g. a resolved alert whose incident had already closed
        rows.append(alert_row(stored, reason))
        if len(rows) >= limit:
            break
    return rows


def _unroutable_reason(
    stored: ReceivedAlert, routes: Callable[[], Mapping[str, AlertRoute]]
) -> str | None:
    if REJECTED in stored.annotations:  # refused at intake (bot.intake.alerts.screen_alerts)
        return f"rejected: {stored.annotations[REJECTED]}"
    try:
        alert = Alert(
            status="firing" if stored.status == "firing" else "resolved",
            labels=dict(stored.labels),
            startsAt=stored.starts_at,
            fingerprint=stored.fingerprint,
        )
    except ValidationError:
        return "stored alert no longer parses"
    route = route_alert(alert, routes())
    return route.reason if isinstance(route, Unroutable) else None
