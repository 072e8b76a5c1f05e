"""Members that join an alert storm after its run started are triaged too (issue 21).

A storm's parent incident starts one run over the members known when it opened (intake,
bot/intake/storms.py). A member that joins later goes into the `nodes` input of the storm's
next run, never only onto the timeline:
- a triage row nobody has claimed yet (its run has not started gathering) takes it at once;
- while a run of the storm is in flight, a follow-up run over every member so far is recorded
  parked (storage/work.PARKED) and becomes due when the run in flight finishes
  (`WorkQueue` unparks it), so members arriving meanwhile join it instead of starting runs.

One run at a time per storm, each over all its members: the latest verdict covers the whole
storm, and no two runs race to set the incident's verdict. Re-running over the earlier members
rather than merging per-batch verdicts keeps the correlation whole (a shared rack, leaf switch or
driver is visible only across all members), and costs little: a run reads each signal once for
all its nodes, so the earlier members add no queries.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from bot.engine.working import WorkQueue
from bot.incidents import lifecycle
from bot.incidents.timeline import BOT, EventKind
from bot.intake.storms import storm_inputs
from storage import work as work_store
from storage.tables import WorkItem


def join_storm_run(
    queue: WorkQueue,
    session: Any,
    *,
    incident_id: int,
    runbook: str,
    runbook_inputs: Sequence[str],
    members: Sequence[str],
    at: datetime,
) -> WorkItem | None:
    """Put `members` (just attached to the storm's parent incident) into the storm's next run,
    in the caller's transaction. Returns a new row that is due now, for the caller to hand to a
    worker; None when the members joined a waiting row (or the runbook takes no `nodes`)."""
    waiting = work_store.open_triage(session, incident_id=incident_id)
    for row in reversed([w for w in waiting if w.owner is None]):
        payload = _with_members(row.payload, members, runbook_inputs)
        if payload is None or payload == row.payload:
            return None
        if row.id is not None and work_store.replace_unclaimed_payload(
            session, work_id=row.id, payload=payload
        ):
            return None
    last = work_store.last_triage(session, incident_id=incident_id)
    before = _nodes(last.payload) if last is not None else []
    inputs = storm_inputs([*before, *members], runbook_inputs)
    if inputs is None or (last is not None and set(_split(inputs)) <= set(before)):
        return None  # no `nodes` input, or nothing new (a redelivery)
    in_flight = any(w.owner is not None for w in waiting)
    run_id = uuid.uuid4().hex
    item = queue.record_work(
        session,
        kind="triage",
        key=f"triage:{run_id}",
        incident_id=incident_id,
        run_id=run_id,
        payload={"runbook": runbook, "inputs": inputs, "requester": "alertmanager"},
        due_at=work_store.PARKED if in_flight else at,
    )
    new = len(set(_split(inputs)) - set(before))
    when = "when the run in flight finishes" if in_flight else "now"
    lifecycle.record(
        session,
        incident_id=incident_id,
        kind=EventKind.NOTE,
        at=at,
        actor=BOT,
        summary=(
            f"{new} member(s) joined the storm after its last run started; run {run_id[:8]} "
            f"triages all {len(_split(inputs))} members {when}"
        ),
        payload={"run_id": run_id, "members": len(_split(inputs)), "new": new},
        run_id=run_id,
    )
    return None if in_flight else item


def _with_members(
    payload: dict[str, Any], members: Sequence[str], runbook_inputs: Sequence[str]
) -> dict[str, Any] | None:
    inputs = storm_inputs([*_nodes(payload), *members], runbook_inputs)
    if inputs is None:
        return None
    return {**payload, "inputs": {**dict(payload.get("inputs", {})), **inputs}}


def _nodes(payload: dict[str, Any]) -> list[str]:
    return _split(dict(payload.get("inputs", {})))


def _split(inputs: dict[str, Any]) -> list[str]:
    nodes = str(inputs.get("nodes", ""))
    return [n for n in nodes.split(",") if n]
