"""Evidence snapshots: the series behind a verdict, kept so a postmortem renders offline.

Keyword-only query functions over `EvidenceSnapshot` (storage/tables.py). A snapshot is written
once per (run, signal): a run taken over after a crash that localizes again keeps the first one.
Series are plain data (`[{"node", "role", "labels", "points": [[unix seconds, value]]}]`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from storage.tables import EvidenceSnapshot


def save_snapshot(
    session: Session,
    *,
    incident_id: int,
    run_id: str,
    signal: str,
    start: datetime,
    end: datetime,
    step_seconds: float,
    onset_at: datetime | None,
    series: Sequence[dict[str, Any]],
    taken_at: datetime,
    replace: bool = False,
) -> EvidenceSnapshot:
    """Store a snapshot, or return the one this run already stored for `signal` (`replace`:
    give that one the new range and series: the read again after the verification)."""
    existing = session.exec(
        select(EvidenceSnapshot).where(
            EvidenceSnapshot.run_id == run_id, EvidenceSnapshot.signal == signal
        )
    ).first()
    if existing is not None and not replace:
        return existing
    if existing is not None:
        existing.start, existing.end, existing.step_seconds = start, end, step_seconds
        existing.onset_at, existing.series = onset_at, [dict(s) for s in series]
        existing.taken_at = taken_at
        session.add(existing)
        session.flush()
        return existing
    row = EvidenceSnapshot(
        incident_id=incident_id,
        run_id=run_id,
        signal=signal,
        start=start,
        end=end,
        step_seconds=step_seconds,
        onset_at=onset_at,
        series=[dict(s) for s in series],
        taken_at=taken_at,
    )
    session.add(row)
    session.flush()
    return row


def list_snapshots(session: Session, *, incident_id: int) -> list[EvidenceSnapshot]:
    """The incident's snapshots, newest first."""
    statement = (
        select(EvidenceSnapshot)
        .where(EvidenceSnapshot.incident_id == incident_id)
        .order_by(col(EvidenceSnapshot.taken_at).desc(), col(EvidenceSnapshot.id).desc())
    )
    return list(session.exec(statement).all())


def latest_snapshot(session: Session, *, incident_id: int) -> EvidenceSnapshot | None:
    """The snapshot a postmortem draws: the most recent one of the incident."""
    found = list_snapshots(session, incident_id=incident_id)
    return found[0] if found else None
