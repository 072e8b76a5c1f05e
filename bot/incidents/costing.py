"""The records behind an incident's GPU-hours (gpu_hours.py): which nodes it took out of service
and when they came back (its actions), and which jobs the culprit nodes held (the impact its
approval request showed). Reads through `storage`; the arithmetic stays pure in gpu_hours.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlmodel import Session

from bot.incidents.gpu_hours import GpuHours, IdleJob, Removal, compute_gpu_hours
from bot.incidents.timeline import EventKind
from storage import actions as action_store
from storage import incidents as incident_store
from storage.tables import ActionRow, Incident, TimelineEvent

REMOVING = frozenset({"cordon", "drain"})
"""Actions that take a node out of service."""
RETURNING = frozenset({"uncordon"})


def read_gpu_hours(session: Session, incident: Incident, *, now: datetime) -> GpuHours:
    """The incident's GPU-hours from its stored actions and approval requests."""
    incident_id = incident.id or 0
    actions = action_store.list_actions(session, incident_id=incident_id)
    requests = [
        e
        for e in incident_store.list_events(session, incident_id)
        if e.kind == EventKind.APPROVAL_REQUESTED
    ]
    return compute_gpu_hours(
        fired_at=incident.fired_at,
        detected_at=incident.detected_at,
        resolved_at=incident.resolved_at,
        now=now,
        removals=removals_of(actions),
        jobs=jobs_of(requests),
    )


def removals_of(actions: Sequence[ActionRow]) -> list[Removal]:
    """One removal per node a cordon or drain took out (the first success), ended by the first
    uncordon that succeeded after it."""
    removed: dict[str, Removal] = {}
    for row in actions:
        if row.status != "succeeded" or row.finished_at is None:
            continue
        if row.action in REMOVING and row.target not in removed:
            removed[row.target] = Removal(row.target, _gpus(row.result), row.finished_at)
        elif row.action in RETURNING and row.target in removed:
            first = removed[row.target]
            if first.back_at is None and row.finished_at >= first.removed_at:
                removed[row.target] = Removal(
                    first.node, first.gpus, first.removed_at, back_at=row.finished_at
                )
    return list(removed.values())


def jobs_of(requests: Iterable[TimelineEvent]) -> list[IdleJob]:
    """Each job named by an approval's impact, once, with its largest GPU count."""
    gpus: dict[str, int] = {}
    for event in requests:
        for proposal in event.payload.get("proposals", []) or []:
            impact = proposal.get("impact") if isinstance(proposal, Mapping) else None
            for job in (impact or {}).get("jobs", []) or []:
                name, total = job.get("job"), job.get("gpus_total")
                if isinstance(name, str) and isinstance(total, int):
                    gpus[name] = max(gpus.get(name, 0), total)
    return [IdleJob(name, count) for name, count in sorted(gpus.items())]


def _gpus(result: Mapping[str, Any]) -> int | None:
    data = result.get("data")
    value = data.get("gpus") if isinstance(data, Mapping) else None
    return value if isinstance(value, int) else None
