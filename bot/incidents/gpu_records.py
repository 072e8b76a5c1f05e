"""GPU-hours from an incident's records: its actions and its approval requests, as rows of any
kind that have the fields read (ORM rows in bot/incidents/costing.py, the driver's rows in
the CLI's light read, storage/glance.py). Pure: no database, no ORM import."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from bot.incidents.gpu_hours import GpuHours, IdleJob, Removal, compute_gpu_hours
from bot.incidents.timeline import EventKind

REMOVING = frozenset({"cordon", "drain"})
"""Actions that take a node out of service."""
RETURNING = frozenset({"uncordon"})


class ActionRecord(Protocol):
    """What the GPU-hours read of an action (`storage.tables.ActionRow`)."""

    @property
    def action(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def result(self) -> dict[str, Any]: ...
    @property
    def finished_at(self) -> datetime | None: ...


class EventRecord(Protocol):
    """What the GPU-hours read of a timeline event (`storage.tables.TimelineEvent`)."""

    @property
    def kind(self) -> str: ...
    @property
    def payload(self) -> dict[str, Any]: ...


class Stamps(Protocol):
    @property
    def fired_at(self) -> datetime | None: ...
    @property
    def detected_at(self) -> datetime | None: ...
    @property
    def resolved_at(self) -> datetime | None: ...


def gpu_hours_of(
    incident: Stamps,
    actions: Sequence[ActionRecord],
    events: Iterable[EventRecord],
    *,
    now: datetime,
) -> GpuHours:
    """The incident's GPU-hours from its actions and the approval requests in its timeline."""
    requests = [e for e in events if e.kind == EventKind.APPROVAL_REQUESTED]
    return compute_gpu_hours(
        fired_at=incident.fired_at,
        detected_at=incident.detected_at,
        resolved_at=incident.resolved_at,
        now=now,
        removals=removals_of(actions),
        jobs=jobs_of(requests),
    )


def removals_of(actions: Sequence[ActionRecord]) -> list[Removal]:
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


def jobs_of(requests: Iterable[EventRecord]) -> list[IdleJob]:
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
