"""Alert storms: many alerts of one alert name for different targets in one domain (a rack, a
leaf switch, or the whole fleet) within a window become one parent incident.

The rules (`storm_domain`, `is_storm`, `storm_inputs`) are pure; `find_storm_parent` opens or
finds the parent incident. Localizing the shared cause across the members is the storm
runbook's job (the runbook listing the alert under `triggers.storms`, run once with the members
as its `nodes` input); intake only groups.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session

from bot.config import IntakeSettings
from bot.incidents import lifecycle
from bot.incidents.timeline import ALERTMANAGER, EventKind
from bot.intake.alerts import Alert
from bot.intake.routing import AlertRoute, Route, target_of
from integrations.errors import InvalidName
from integrations.names import MAX_NODES, check_node_name
from storage import alerts as alert_store
from storage import incidents as incident_store
from storage.tables import Incident, ReceivedAlert

FLEET = "fleet"
STORM_KIND = "storm"


@dataclass(frozen=True)
class StormPolicy:
    """When alerts group into a storm. A `threshold` of 0 turns grouping off.

    Only alerts whose route names a storm runbook (one that lists the alert under
    `triggers.storms` and takes a `nodes` input) group: a parent incident must get a run that
    covers every member, or the members would go untriaged. The others keep one incident, and
    one run, per target.
    """

    threshold: int
    window: timedelta
    domain_labels: tuple[str, ...] = ("rack", "leaf")

    @property
    def enabled(self) -> bool:
        return self.threshold > 0

    @classmethod
    def from_settings(cls, intake: IntakeSettings) -> StormPolicy:
        return cls(
            threshold=intake.storm_threshold,
            window=timedelta(minutes=intake.storm_window_minutes),
            domain_labels=tuple(intake.storm_labels),
        )


@dataclass(frozen=True)
class StormKey:
    """Alerts that may form one storm: same runbook and alert name, same domain."""

    runbook: str
    alertname: str
    domain: str  # `rack=r03`, or `fleet` when no domain label is present

    @property
    def target(self) -> str:
        """The parent incident's target, e.g. `GPUXidBurst@rack=r03`."""
        return f"{self.alertname}@{self.domain}"

    def title(self, members: int) -> str:
        where = "across the fleet" if self.domain == FLEET else f"in {self.domain}"
        return f"{self.alertname} storm: {members} targets {where}"


def storm_domain(labels: Mapping[str, str], domain_labels: Sequence[str]) -> str:
    """`label=value` of the first domain label the alert carries, else `fleet`."""
    for name in domain_labels:
        value = labels.get(name)
        if value:
            return f"{name}={value}"
    return FLEET


def is_storm(
    *, policy: StormPolicy, new_targets: Iterable[str], recent_targets: Iterable[str]
) -> bool:
    """Whether the distinct targets seen in the window reach the threshold."""
    if not policy.enabled:
        return False
    return len(set(new_targets) | set(recent_targets)) >= policy.threshold


def storm_inputs(members: Sequence[str], runbook_inputs: Iterable[str]) -> dict[str, str] | None:
    """Run inputs for a storm's one run: the members as the runbook's `nodes` input.

    None when the runbook takes no `nodes` input: it cannot correlate a node set, so no run is
    started and the members are listed on the parent incident's timeline instead. A member that
    is not a valid node name is left out rather than failing the run for all the others, and
    the run covers at most `MAX_NODES` members (the first by name; the timeline lists them all).
    """
    if "nodes" not in set(runbook_inputs):
        return None
    valid = sorted({m for m in members if _is_node_name(m)})
    return {"nodes": ",".join(valid[:MAX_NODES])}


def _is_node_name(name: str) -> bool:
    try:
        check_node_name(name)
    except InvalidName:
        return False
    return True


_SEVERITY_RANK = {"critical": 3, "error": 2, "warning": 1, "info": 0}


@dataclass(frozen=True)
class Firing:
    """A newly stored firing alert of a webhook (its position), and where it routes."""

    index: int
    alert: Alert
    route: Route
    alert_id: int


@dataclass(frozen=True)
class StormParent:
    incident: Incident
    opened: bool
    members: tuple[str, ...]


def find_storm_parent(
    session: Session,
    key: StormKey,
    *,
    batch: Sequence[Firing],
    policy: StormPolicy,
    routes: Mapping[str, AlertRoute],
    at: datetime,
) -> StormParent | None:
    """The open parent incident of the storm `key`, opened now if the batch tips the window
    over the threshold, with the batch's alerts attached; None when there is no storm."""
    group = incident_store.group_key(runbook=key.runbook, target=key.target)
    parent = incident_store.find_open_incident(session, group)
    batch_targets = tuple(sorted({f.route.target for f in batch}))
    if parent is not None:
        _attach(
            session, parent, runbook=key.runbook, batch=batch, at=at, note=f"added to {parent.ref}"
        )
        return StormParent(parent, opened=False, members=batch_targets)
    route = routes[key.alertname]
    recent = _recent_targets(session, key, route=route, policy=policy, at=at)
    if not is_storm(policy=policy, new_targets=batch_targets, recent_targets=recent):
        return None
    members = tuple(sorted(set(batch_targets) | set(recent)))
    parent, opened = lifecycle.open_or_attach(
        session,
        runbook=key.runbook,
        target=key.target,
        target_kind=STORM_KIND,
        severity=worst_severity(f.alert.labels.get("severity", "warning") for f in batch),
        title=key.title(len(members)),
        fired_at=min([f.alert.startsAt for f in batch] + list(recent.values())),
        detected_at=at,
        actor=ALERTMANAGER,
    )
    _attach(session, parent, runbook=key.runbook, batch=batch, at=at, note=None)
    _record_members(session, parent, key=key, members=members, at=at)
    earlier = _recent_members(session, key, route=route, policy=policy, at=at)
    _link_earlier_incidents(
        session, parent, incident_ids={row.incident_id for row, _ in earlier}, at=at
    )
    return StormParent(parent, opened=opened, members=members)


def _recent_targets(
    session: Session, key: StormKey, *, route: AlertRoute, policy: StormPolicy, at: datetime
) -> dict[str, datetime]:
    """The targets `_recent_members` finds, each with the earliest startsAt it fired with,
    from one row per distinct alert (the check that usually finds no storm reads no more)."""
    targets: dict[str, datetime] = {}
    since = at - policy.window
    for labels, starts in alert_store.recent_firing_labels(
        session, alertname=key.alertname, since=since
    ):
        target = target_of(key.alertname, labels, route)
        if isinstance(target, str) and storm_domain(labels, policy.domain_labels) == key.domain:
            targets[target] = min(starts, targets.get(target, starts))
    return targets


def _recent_members(
    session: Session, key: StormKey, *, route: AlertRoute, policy: StormPolicy, at: datetime
) -> list[tuple[ReceivedAlert, str]]:
    """Firing alerts of the storm's name and domain in the window, with their targets. An
    alert that could not be routed (no target label, an invalid node name) never counts: it
    would tip the threshold and then fail the storm run's `nodes` input for every member."""
    members: list[tuple[ReceivedAlert, str]] = []
    since = at - policy.window
    for row in alert_store.recent_firing(session, alertname=key.alertname, since=since):
        target = target_of(key.alertname, row.labels, route)
        if isinstance(target, str) and storm_domain(row.labels, policy.domain_labels) == key.domain:
            members.append((row, target))
    return members


def _attach(
    session: Session,
    parent: Incident,
    *,
    runbook: str,
    batch: Sequence[Firing],
    at: datetime,
    note: str | None,
) -> None:
    assert parent.id is not None
    alert_store.attach_alerts(
        session, alert_ids=[f.alert_id for f in batch], incident_id=parent.id, runbook=runbook
    )
    if note is not None:
        members = sorted({f.route.target for f in batch})
        lifecycle.record(
            session,
            incident_id=parent.id,
            kind=EventKind.NOTE,
            at=at,
            actor=ALERTMANAGER,
            summary=f"{batch[0].alert.alertname} fired for {', '.join(members)}; {note}",
            payload={"members": members},
        )


def _record_members(
    session: Session, parent: Incident, *, key: StormKey, members: Sequence[str], at: datetime
) -> None:
    assert parent.id is not None
    shown = ", ".join(members[:10]) + (
        f" and {len(members) - 10} more" if len(members) > 10 else ""
    )
    lifecycle.record(
        session,
        incident_id=parent.id,
        kind=EventKind.NOTE,
        at=at,
        actor=ALERTMANAGER,
        summary=f"Alert storm: {key.alertname} for {len(members)} targets ({shown})",
        payload={"alertname": key.alertname, "domain": key.domain, "members": list(members)},
        pinned=True,
    )


def _link_earlier_incidents(
    session: Session, parent: Incident, *, incident_ids: set[int | None], at: datetime
) -> None:
    """Tell incidents opened before the storm was recognised which parent they belong to."""
    for incident_id in sorted(i for i in incident_ids if i is not None and i != parent.id):
        lifecycle.record(
            session,
            incident_id=incident_id,
            kind=EventKind.NOTE,
            at=at,
            actor=ALERTMANAGER,
            summary=f"Part of the alert storm {parent.ref} ({parent.title})",
            payload={"storm_incident": parent.id},
        )


def worst_severity(severities: Iterable[str]) -> str:
    """The most severe of the alerts' `severity` labels (critical > error > warning > info)."""
    return max(severities, key=lambda s: _SEVERITY_RANK.get(s, -1), default="warning")
