"""The reads behind `/gpu incident`, `/gpu postmortem` and `/gpu mttr`: rows in, views out.

The renderers (`postmortem.py`, Slack blocks, the terminal) only ever see `IncidentView`,
`EventView` and `MttrFigures`; this module fetches the rows and converts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlmodel import Session

from bot.errors import NotFound
from bot.incidents.costing import read_gpu_hours
from bot.incidents.mttr_groups import Group, summarize
from bot.incidents.postmortem import render_postmortem
from bot.incidents.story import ActionView, ApprovalView, ExtraFigure, Story, snapshot_from
from bot.incidents.views import EventView, IncidentView, event_views, incident_view
from storage import actions as action_store
from storage import approvals as approval_store
from storage import incidents as store
from storage import postmortem_notes as notes_store
from storage import runs as run_store
from storage import snapshots as snapshot_store
from storage.tables import Incident


def read_incident(session: Session, ref: str | int) -> Incident:
    """The incident named by `ref` (INC-7, 7); NotFound naming the reference otherwise."""
    incident = store.get_incident(session, ref)
    if incident is None:
        raise NotFound(f"unknown incident '{ref}' (try /gpu incidents to list them)")
    return incident


def read_views(
    session: Session, ref: str | int, *, pinned_only: bool = False
) -> tuple[IncidentView, list[EventView]]:
    """The incident and its timeline as views."""
    incident = read_incident(session, ref)
    events = store.list_events(session, incident.id or 0, pinned_only=pinned_only)
    return incident_view(incident), event_views(events)


def read_postmortem(
    session: Session,
    ref: str | int,
    *,
    fmt: str = "md",
    pinned_only: bool = False,
    page_url: str | None = None,
    refresh_seconds: int | None = None,
    now: datetime | None = None,
) -> str:
    """The rendered postmortem of one incident (see `postmortem.render_postmortem`). `now`
    ends the GPU-hours of an open incident (without it, they are shown once it resolves)."""
    incident, events = read_views(session, ref, pinned_only=pinned_only)
    story = read_story(session, incident.id, now=now)
    return render_postmortem(
        incident,
        events,
        fmt=fmt,
        pinned_only=pinned_only,
        story=story,
        page_url=page_url,
        refresh_seconds=refresh_seconds,
    )


def _awaiting(payload: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(
        f"{p.get('description') or p.get('action')} [risk {p.get('risk')}]"
        for p in payload.get("proposals", []) or []
        if isinstance(p, Mapping)
    )


def who_may_approve(payload: Mapping[str, Any]) -> str:
    """`anyone but cli:alice for high-risk actions` / `U1, S2`: from the policy the approval
    request recorded (its approvers, the two-person risks and the requester)."""
    policy = payload.get("policy") or {}
    approvers = ", ".join(policy.get("approvers") or []) or "anyone"
    requester = str(payload.get("requester") or "")
    proposals = [p for p in payload.get("proposals", []) or [] if isinstance(p, Mapping)]
    risks = {str(p.get("risk")) for p in proposals}
    barred = sorted(risks & set(policy.get("two_person_risks") or []))
    if barred and requester and requester not in ("bot", "alertmanager"):
        return f"{approvers}, except {requester} (two-person rule: {'/'.join(barred)} risk)"
    return approvers


def read_story(session: Session, incident_id: int, *, now: datetime | None = None) -> Story:
    """The verdict of the incident's latest localized run, its approvals, actions, latest
    evidence snapshot (storage/snapshots.py) and GPU-hours lost (bot/incidents/costing.py)."""
    runs = sorted(
        run_store.list_runs_for_incident(session, incident_id),
        key=lambda r: r.started_at,
        reverse=True,
    )
    verdict = next((r.verdict for r in runs if r.verdict), None) or {}
    snapshot = snapshot_store.latest_snapshot(session, incident_id=incident_id)
    written = notes_store.written_sections(session, incident_id=incident_id)
    items = notes_store.list_action_items(session, incident_id=incident_id)
    return Story(
        written={name: row.text for name, row in written.items()},
        action_items=tuple(
            (i.text, i.owner, i.due.isoformat() if i.due else None) for i in items
        ),
        verdict=verdict,
        approvals=tuple(
            ApprovalView(
                step_id=a.step_id,
                state=a.state,
                requested_at=a.requested_at,
                decided_at=a.decided_at,
                actor=a.actor,
                reason=a.reason,
                awaiting=_awaiting(a.payload),
                who_may_approve=who_may_approve(a.payload),
                expires_at=a.expires_at,
            )
            for a in approval_store.list_approvals(session, incident_id=incident_id)
        ),
        actions=tuple(
            ActionView(
                action=a.action,
                target=a.target,
                status=a.status,
                outcome=a.outcome,
                detail=str(a.result.get("detail") or ""),
                started_at=a.started_at,
                finished_at=a.finished_at,
            )
            for a in action_store.list_actions(session, incident_id=incident_id)
        ),
        snapshot=None
        if snapshot is None
        else snapshot_from(
            signal=snapshot.signal,
            start=snapshot.start,
            end=snapshot.end,
            onset_at=snapshot.onset_at,
            series=snapshot.series,
        ),
        extra_figures=_gpu_hours(session, incident_id, now=now),
    )


def _gpu_hours(
    session: Session, incident_id: int, *, now: datetime | None
) -> tuple[ExtraFigure, ...]:
    """GPU-hours lost, then each of its two terms with its formula and worked numbers."""
    row = read_incident(session, incident_id)
    end = now or row.resolved_at
    if end is None:  # open, and no clock to say how long so far
        return ()
    figure = read_gpu_hours(session, row, now=end)
    so_far = " so far (open)" if figure.ongoing else ""
    total = "unknown" if figure.total is None else f"{figure.total:.2f}{so_far}"
    lines = [ExtraFigure("GPU-hours lost", total, "out of service + idle job GPUs")]
    terms = (("out of service", figure.out_of_service), ("idle job GPUs", figure.idle_jobs))
    for label, term in terms:
        hours = "unknown" if term.hours is None else f"{term.hours:.2f}"
        worked = f" ({'; '.join(term.worked)})" if term.worked else ""
        lines.append(ExtraFigure(f"GPU-hours: {label}", hours, term.formula + worked))
    return tuple(lines)


def read_mttr_groups(
    session: Session, *, since: datetime, until: datetime, by: str
) -> list[Group]:
    """p50/p90 of each figure and the GPU-hours lost, over the incidents resolved since `since`,
    grouped `by` runbook, layer or week (checks are not incidents: left out). No upper bound: a
    replica whose clock runs ahead (or the simulator's) may have resolved one "after" `until`.
    GPU-hours are the figure stored at resolution (the one `/metrics` counts); only an incident
    resolved before it was stored has it computed from its records (as of `until`)."""
    rows = store.list_resolved(session, since=since)
    costs = {
        row.id or 0: (
            row.gpu_hours_lost
            if row.gpu_hours_lost is not None
            else read_gpu_hours(session, row, now=until).total
        )
        for row in rows
    }
    return summarize([incident_view(r) for r in rows], by=by, gpu_hours=costs)
