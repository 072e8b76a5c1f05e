"""Route an alert to a runbook and a target by the runbooks' `triggers` (pure).

The routing table is built from the runbook catalog by the engine (`RunbookCatalog.alert_routes`),
so intake never reads runbooks itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bot.intake.alerts import Alert
from integrations.errors import InvalidName
from integrations.names import check_node_name


@dataclass(frozen=True)
class AlertRoute:
    """Which runbook an alert name starts, and which label holds the target."""

    runbook: str
    target_label: str
    target_input: str
    target_kind: str  # node | job | service
    storm_runbook: str | None = None
    """The runbook that triages a storm of this alert across many nodes (`triggers.storms`)."""


@dataclass(frozen=True)
class Route:
    runbook: str
    target: str
    target_kind: str
    target_input: str
    storm_runbook: str | None = None


@dataclass(frozen=True)
class Unroutable:
    reason: str


def route_alert(alert: Alert, routes: Mapping[str, AlertRoute]) -> Route | Unroutable:
    """The runbook whose triggers name this alert, and the target from the alert's labels."""
    found = routes.get(alert.alertname)
    if found is None:
        return Unroutable(f"no runbook is triggered by alert '{alert.alertname}'")
    target = target_of(alert.alertname, alert.labels, found)
    if isinstance(target, Unroutable):
        return target
    return Route(found.runbook, target, found.target_kind, found.target_input, found.storm_runbook)


def target_of(alertname: str, labels: Mapping[str, str], route: AlertRoute) -> str | Unroutable:
    """The target an alert's labels name under `route` (a valid node name for node runbooks),
    or why there is none. Storm detection counts only alerts that have one."""
    target = labels.get(route.target_label, "")
    if not target:
        return Unroutable(
            f"alert '{alertname}' has no '{route.target_label}' label "
            f"(runbook {route.runbook} needs it)"
        )
    if route.target_kind == "node":
        try:
            check_node_name(target)
        except InvalidName as exc:
            return Unroutable(f"alert '{alertname}': label '{route.target_label}': {exc}")
    return target
