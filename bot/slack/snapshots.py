"""Read what a triage message shows from the database: incident, run, timeline, approval.

Every update of a live message is rendered from stored state, never from memory, so a restarted
bot (or another replica) renders exactly what the first one would have, and a click that
arrives after a restart finds everything it needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlmodel import Session

from bot.actions.policy import Policy, approvers_of
from bot.engine import deferred
from bot.engine.catalog import RunbookCatalog
from bot.engine.loading import LoadedRunbook
from bot.engine.policies import policy_for
from bot.errors import NotFound
from bot.incidents.reporting import read_incident
from bot.incidents.timeline import EventKind
from bot.incidents.views import incident_view
from bot.slack.blocks import ApprovalState, TriageView
from bot.slack.kit import Line, outcome_icon
from bot.slack.previewing import PREVIEWABLE
from storage import approvals as approval_store
from storage import incidents as incident_store
from storage import runs as run_store
from storage.tables import ApprovalRow, RunbookRun, TimelineEvent

_PROGRESS = {EventKind.STEP_COMPLETED, EventKind.FINDING, EventKind.STEP_FAILED}
_RESULTS = {
    EventKind.ACTION_SUCCEEDED,
    EventKind.ACTION_FAILED,
    EventKind.ACTION_SKIPPED,
    EventKind.ACTION_BLOCKED,
}
_VERIFY = {EventKind.VERIFICATION_PASSED: "+", EventKind.VERIFICATION_FAILED: "x"}
_CHECK_ICONS = {"fired": "!", "unknown": "?", "passed": "+"}


def read_triage(
    session: Session,
    *,
    incident_id: int,
    run_id: str | None,
    catalog: RunbookCatalog,
    policy: Policy,
) -> TriageView:
    """The triage view of an incident's run (its latest run when `run_id` is None)."""
    incident = read_incident(session, incident_id)
    run = (
        run_store.get_run(session, run_id)
        if run_id
        else run_store.latest_run_for_incident(session, incident_id)
    )
    loaded = _runbook(catalog, run.runbook if run else incident.runbook)
    view = incident_view(incident)
    policy = policy_for(policy, loaded)  # the runbook's own policy over the settings'
    base = TriageView(
        incident=view,
        runbook_title=loaded.runbook.metadata.title if loaded else view.runbook,
        requester="alertmanager",
        approvers=tuple(sorted(approvers_of(policy, view.runbook))),
        two_person_risks=tuple(sorted(r.value for r in policy.two_person_risks)),
        policy_overrides=policy.overrides,
        dry_run=policy.dry_run,
        previewable=PREVIEWABLE,
        steps_total=len(loaded.runbook.steps) if loaded else 0,
    )
    if run is None:
        return base
    events = [e for e in incident_store.list_events(session, incident_id) if e.run_id == run.id]
    rows = _approvals(session, run)
    triage = _with_run(base, run, events, rows)
    plan = deferred.waiting_plan(session, run.id)
    if plan is None:
        return triage
    drains = tuple(deferred.scheduled_summary(p) for p in plan.payload.get("plan", []))
    return replace(triage, waiting_drains=drains)


def _with_run(
    base: TriageView,
    run: RunbookRun,
    events: Sequence[TimelineEvent],
    rows: Sequence[ApprovalRow],
) -> TriageView:
    counted = [e for e in events if e.step_id and e.kind != EventKind.APPROVAL_REQUESTED]
    proposals = rows[0].payload.get("proposals", []) if rows else _proposed(events)
    states = _approval_states(rows)
    pending = [s for s in states if s.state == "pending"]
    return replace(
        base,
        requester=str(run.inputs.get("requester", "alertmanager")),
        run_id=run.id,
        run_status=run.status,
        steps_done=len({e.step_id for e in counted}),
        progress=tuple(_progress_line(e) for e in events if e.kind in _PROGRESS),
        verdict=run.verdict,
        proposals=tuple(proposals),
        approval=pending[0] if pending else (states[-1] if states else None),
        approvals=states,
        results=tuple(
            Line(outcome_icon(str(e.payload.get("outcome", "skipped"))), e.summary)
            for e in events
            if e.kind in _RESULTS and "outcome" in e.payload  # one event per action carried out
        ),
        verification=tuple(
            Line(_VERIFY[EventKind(e.kind)], e.summary) for e in events if e.kind in _VERIFY
        ),
    )


def _runbook(catalog: RunbookCatalog, name: str) -> LoadedRunbook | None:
    try:
        return catalog.get(name)
    except NotFound:
        return None  # a runbook removed since: the message still renders from stored data


def _approvals(session: Session, run: RunbookRun) -> list[ApprovalRow]:
    """The run's approvals, oldest first: one, or after a per-action approval (`--only`, a
    per-action button) the approved part followed by the rest, asked again."""
    rows = approval_store.list_approvals(session, incident_id=run.incident_id)
    return [r for r in rows if r.run_id == run.id]


def _approval_states(rows: Sequence[ApprovalRow]) -> tuple[ApprovalState, ...]:
    """Each approval with the actions it decided: an approval's proposals less those asked
    again by the next one (the rest of a per-action approval)."""
    names = [_names(row) for row in rows]
    states = []
    for i, row in enumerate(rows):
        later = set(names[i + 1]) if i + 1 < len(rows) else set()
        states.append(
            ApprovalState(
                state=row.state,
                expires_at=row.expires_at,
                actor=row.actor,
                decided_at=row.decided_at,
                reason=row.reason,
                actions=tuple(n for n in names[i] if n not in later),
            )
        )
    return tuple(states)


def _names(row: ApprovalRow) -> tuple[str, ...]:
    proposals = row.payload.get("proposals", [])
    return tuple(dict.fromkeys(str(p.get("action")) for p in proposals))


def _proposed(events: Sequence[TimelineEvent]) -> list[Mapping[str, Any]]:
    for event in events:
        if event.payload.get("kind") == "propose":
            return list(event.payload.get("proposals", []))
    return []


def _progress_line(event: TimelineEvent) -> Line:
    if event.kind == EventKind.FINDING:
        return Line("!", event.summary)
    if event.kind == EventKind.STEP_FAILED:
        return Line("x", event.summary)
    payload = event.payload
    if payload.get("kind") == "check":
        return Line(_CHECK_ICONS.get(str(payload.get("status")), "."), event.summary)
    if payload.get("kind") == "signal" and payload.get("missing"):
        return Line("?", event.summary)
    return Line(".", event.summary)
