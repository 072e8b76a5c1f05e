"""What a postmortem tells beyond the timeline: the verdict's evidence, approvals, actions, the
evidence snapshot and the follow-ups (pure: plain frozen data, no I/O imports).

`reporting.read_story` builds a `Story` from the database; `postmortem.py` (Markdown, JSON) and
`html_page.py` render it. Every part is optional: an incident with no run has an empty story.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bot.incidents.views import EventView, IncidentView

VERIFICATION_KINDS = ("verification_passed", "verification_failed")
MAX_CITED = 4
"""Evidence items shown per finding (the timeline keeps them all)."""
MAX_VALUE_CHARS = 80


@dataclass(frozen=True)
class ApprovalView:
    step_id: str
    state: str  # pending | approved | rejected | expired
    requested_at: datetime
    decided_at: datetime | None = None
    actor: str | None = None
    reason: str | None = None
    awaiting: tuple[str, ...] = ()
    """What the approval would let run: each proposal's description and risk."""
    who_may_approve: str = ""
    """Who may approve, in words (the policy's approvers and the two-person rule)."""
    expires_at: datetime | None = None


@dataclass(frozen=True)
class ActionView:
    action: str
    target: str
    status: str  # running | succeeded | failed | skipped | dry_run
    outcome: str | None = None
    detail: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True)
class SeriesView:
    """One snapshot series: `role` is culprit or peer; points are (time, value), oldest first."""

    node: str
    role: str
    labels: Mapping[str, str]
    points: tuple[tuple[datetime, float], ...]

    @property
    def name(self) -> str:
        """`gpu-node-03 GPU 5` (or the node alone)."""
        gpu = self.labels.get("gpu")
        return f"{self.node} GPU {gpu}" if gpu not in (None, "") else self.node


@dataclass(frozen=True)
class SnapshotView:
    signal: str
    start: datetime
    end: datetime
    onset_at: datetime | None
    series: tuple[SeriesView, ...]


@dataclass(frozen=True)
class ExtraFigure:
    """A figure beyond MTTx (e.g. GPU-hours lost), stated with its formula."""

    label: str
    value: str
    formula: str


@dataclass(frozen=True)
class Story:
    verdict: Mapping[str, Any] = field(default_factory=dict)
    approvals: tuple[ApprovalView, ...] = ()
    actions: tuple[ActionView, ...] = ()
    snapshot: SnapshotView | None = None
    extra_figures: tuple[ExtraFigure, ...] = ()
    written: Mapping[str, str] = field(default_factory=dict)
    """Postmortem sections people wrote (section name -> text): drafts never replace them."""
    action_items: tuple[tuple[str, str, str | None], ...] = ()
    """Action items people recorded: (text, owner, due date ISO or None)."""

    def evidence(self) -> list[tuple[str, str, str]]:
        """(layer/severity, summary, cited evidence) per finding of the verdict."""
        rows = []
        for f in self.verdict.get("findings") or ():
            items = list(dict.fromkeys(_cite(e) for e in f.get("evidence") or ()))
            more = f"; +{len(items) - MAX_CITED} more" if len(items) > MAX_CITED else ""
            cited = "; ".join(items[:MAX_CITED]) + more
            rows.append((f"{f.get('severity')}/{f.get('layer')}", str(f.get("summary")), cited))
        return rows

    def ruled_out(self) -> list[str]:
        return [str(x) for x in self.verdict.get("ruled_out") or ()]

    def missing_signals(self) -> list[str]:
        return [str(x) for x in self.verdict.get("missing_signals") or ()]

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: the verdict, approvals, actions, snapshot and extra figures."""
        return {
            "verdict": dict(self.verdict),
            "approvals": [_plain(a.__dict__) for a in self.approvals],
            "actions": [_plain(a.__dict__) for a in self.actions],
            "snapshot": None if self.snapshot is None else snapshot_dict(self.snapshot),
            "extra_figures": [a.__dict__ for a in self.extra_figures],
        }


def snapshot_dict(snapshot: SnapshotView) -> dict[str, Any]:
    return {
        "signal": snapshot.signal,
        "start": _iso(snapshot.start),
        "end": _iso(snapshot.end),
        "onset_at": _iso(snapshot.onset_at),
        "series": [
            {
                "node": s.node,
                "role": s.role,
                "labels": dict(s.labels),
                "points": [[_iso(at), value] for at, value in s.points],
            }
            for s in snapshot.series
        ],
    }


def snapshot_from(
    *,
    signal: str,
    start: datetime,
    end: datetime,
    onset_at: datetime | None,
    series: Sequence[Mapping[str, Any]],
) -> SnapshotView:
    """A view of a stored snapshot (points as [unix seconds, value])."""
    return SnapshotView(
        signal=signal,
        start=start,
        end=end,
        onset_at=onset_at,
        series=tuple(
            SeriesView(
                node=str(s["node"]),
                role=str(s["role"]),
                labels=dict(s.get("labels") or {}),
                points=tuple(
                    (datetime.fromtimestamp(float(t), tz=UTC), float(v)) for t, v in s["points"]
                ),
            )
            for s in series
        ),
    )


def verifications(events: Sequence[EventView]) -> list[EventView]:
    return [e for e in events if e.kind in VERIFICATION_KINDS]


def follow_ups(incident: IncidentView, story: Story, events: Sequence[EventView]) -> list[str]:
    """What is left to do, derived from the record (never invented)."""
    items: list[str] = []
    if incident.state not in ("resolved", "failed"):
        items.append(f"The incident is still {incident.state}: resolve it when the fault is gone.")
    for signal in story.missing_signals():
        items.append(f"Restore or enable the signal `{signal}`: it was missing during diagnosis.")
    for action in story.actions:
        if action.action == "open_ticket" and action.detail:
            items.append(f"Follow the ticket: {action.detail}.")
        if action.action == "cordon" and action.status == "succeeded":
            items.append(f"Return {action.target} to service (uncordon) once it is repaired.")
        if action.status == "failed":
            items.append(f"Action {action.action} on {action.target} failed: {action.detail}.")
    if any(e.kind == "verification_failed" for e in verifications(events)):
        items.append("A verification failed: check the fix held.")
    if incident.fired_at is None:
        items.append("Set fired_at (the start of impact): MTTD, MTTA, MTTM and MTTR need it.")
    return items


def _cite(evidence: Mapping[str, Any]) -> str:
    labels = evidence.get("labels") or {}
    where = ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k in ("gpu", "port", "pod"))
    value = evidence.get("value")
    shown = str(value)
    if len(shown) > MAX_VALUE_CHARS:  # a log line: its start says what it is
        shown = shown[: MAX_VALUE_CHARS - 1] + "…"
    return f"{evidence.get('what')}" + (f"[{where}]" if where else "") + (
        f" = {shown}" if value is not None else ""
    )


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat()


def _plain(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _iso(v) if isinstance(v, datetime) else v for k, v in data.items()}
