"""The records behind an incident's GPU-hours (gpu_hours.py): which nodes it took out of service
and when they came back (its actions), and which jobs the culprit nodes held (the impact its
approval request showed). Reads through `storage`; the arithmetic stays pure in gpu_hours.py
and gpu_records.py (which the CLI's light read shares).
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session

from bot.incidents.gpu_hours import GpuHours
from bot.incidents.gpu_records import gpu_hours_of, jobs_of, removals_of
from bot.incidents.timeline import EventKind
from storage import cost_records as cost_store
from storage.tables import Incident

__all__ = ["jobs_of", "read_gpu_hours", "removals_of"]


def read_gpu_hours(session: Session, incident: Incident, *, now: datetime) -> GpuHours:
    """The incident's GPU-hours from its stored actions and approval requests (read as the
    columns the arithmetic uses: storage/cost_records.py)."""
    incident_id = incident.id or 0
    actions = cost_store.action_facts(session, incident_id=incident_id)
    requests = cost_store.event_facts(
        session, incident_id=incident_id, kind=EventKind.APPROVAL_REQUESTED
    )
    return gpu_hours_of(incident, actions, requests, now=now)
