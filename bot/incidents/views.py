"""Plain, frozen views of an incident and its timeline events, for the pure renderers.

`postmortem.py`, Slack blocks and the terminal read these instead of database rows, so they
never import sqlmodel. `incident_view`/`event_views` build them from anything shaped like the
storage rows (structural Protocols), so this module stays free of database imports too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Protocol

from bot.incidents.mttr import MttrFigures, compute_figures


@dataclass(frozen=True)
class IncidentView:
    id: int
    runbook: str
    target: str
    target_kind: str
    severity: str
    title: str
    state: str
    created_at: datetime
    layer: str | None = None
    confidence: float | None = None
    culprits: tuple[str, ...] = ()
    fired_at: datetime | None = None
    detected_at: datetime | None = None
    diagnosed_at: datetime | None = None
    acknowledged_at: datetime | None = None
    acknowledged_by: str | None = None
    mitigated_at: datetime | None = None
    resolved_at: datetime | None = None
    fired_at_corrected_by: str | None = None
    fired_at_source: str | None = None  # alert | human | None (nobody said when impact began)
    kind: str = "incident"  # incident | check (nothing found) | failed (no run finished): no MTTR
    gpu_hours_lost: float | None = None  # set at resolution (gpu_hours.py)

    @property
    def ref(self) -> str:
        """The human id, e.g. `INC-42`."""
        return f"INC-{self.id}"

    def timestamps(self) -> dict[str, datetime | None]:
        """The six MTTR timestamps, keyed as `mttr.compute_figures` expects them."""
        return {
            "fired_at": self.fired_at,
            "detected_at": self.detected_at,
            "acknowledged_at": self.acknowledged_at,
            "diagnosed_at": self.diagnosed_at,
            "mitigated_at": self.mitigated_at,
            "resolved_at": self.resolved_at,
        }

    def figures(self) -> MttrFigures:
        """MTTD/MTTA/TTD/MTTM/MTTR; raises TimestampOrderError if the timestamps are corrupt."""
        return compute_figures(**self.timestamps())

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe fields: `id` is the ref (INC-7), `number` the integer, times ISO 8601 UTC."""
        data: dict[str, Any] = {"id": self.ref, "number": self.id}
        for f in fields(self):
            if f.name != "id":
                data[f.name] = _plain(getattr(self, f.name))
        return data


@dataclass(frozen=True)
class EventView:
    at: datetime
    kind: str
    actor: str
    summary: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    pinned: bool = False
    run_id: str | None = None
    step_id: str | None = None
    id: int | None = None  # the number people pin it by (`pin INC-7 #42`)
    pinned_by: str | None = None  # who last pinned or unpinned it; None: pinned by kind

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe fields, time as ISO 8601 UTC."""
        return {
            "id": self.id,
            "pinned_by": self.pinned_by,
            "at": _plain(self.at),
            "kind": self.kind,
            "actor": self.actor,
            "summary": self.summary,
            "pinned": self.pinned,
            "run_id": self.run_id,
            "step_id": self.step_id,
            "payload": dict(self.payload),
        }


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, tuple):
        return list(value)
    return value


class IncidentRow(Protocol):
    """What `incident_view` reads: the shape of `storage.tables.Incident`."""

    id: int | None
    runbook: str
    target: str
    target_kind: str
    severity: str
    title: str
    state: str
    created_at: datetime
    layer: str | None
    confidence: float | None
    culprits: list[str]
    fired_at: datetime | None
    detected_at: datetime | None
    diagnosed_at: datetime | None
    acknowledged_at: datetime | None
    acknowledged_by: str | None
    mitigated_at: datetime | None
    resolved_at: datetime | None
    fired_at_corrected_by: str | None


class EventRow(Protocol):
    """What `event_view` reads: the shape of `storage.tables.TimelineEvent`."""

    at: datetime
    kind: str
    actor: str
    summary: str
    payload: dict[str, Any]
    pinned: bool
    run_id: str | None
    step_id: str | None


def incident_view(row: IncidentRow) -> IncidentView:
    """A frozen view of an incident row."""
    if row.id is None:
        raise ValueError("the incident has not been stored yet (no id)")
    return IncidentView(
        id=row.id,
        runbook=row.runbook,
        target=row.target,
        target_kind=row.target_kind,
        severity=row.severity,
        title=row.title,
        state=row.state,
        created_at=row.created_at,
        layer=row.layer,
        confidence=row.confidence,
        culprits=tuple(row.culprits),
        fired_at=row.fired_at,
        detected_at=row.detected_at,
        diagnosed_at=row.diagnosed_at,
        acknowledged_at=row.acknowledged_at,
        acknowledged_by=row.acknowledged_by,
        mitigated_at=row.mitigated_at,
        resolved_at=row.resolved_at,
        fired_at_corrected_by=row.fired_at_corrected_by,
        fired_at_source=getattr(row, "fired_at_source", None),
        kind=getattr(row, "kind", "incident"),
        gpu_hours_lost=getattr(row, "gpu_hours_lost", None),
    )


def event_view(row: EventRow) -> EventView:
    """A frozen view of a timeline event row."""
    return EventView(
        at=row.at,
        kind=row.kind,
        actor=row.actor,
        summary=row.summary,
        payload=dict(row.payload),
        pinned=row.pinned,
        run_id=row.run_id,
        step_id=row.step_id,
        id=getattr(row, "id", None),
        pinned_by=getattr(row, "pinned_by", None),
    )


def event_views(rows: Iterable[EventRow]) -> list[EventView]:
    """Frozen views of timeline event rows, in the given order."""
    return [event_view(row) for row in rows]
