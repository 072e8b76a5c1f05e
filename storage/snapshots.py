"""Evidence snapshots: the series behind a verdict, kept so a postmortem renders offline.

Keyword-only query functions over `EvidenceSnapshot` (storage/tables.py). A snapshot is written
once per (run, signal): a run taken over after a crash that localizes again keeps the first one.
Series are plain data (`[{"node", "role", "labels", "points": [[unix seconds, value]]}]`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, col, select

from storage.db import read_only, translate
from storage.tables import EvidenceSnapshot, Incident

_TABLE = EvidenceSnapshot.__table__  # type: ignore[attr-defined]
_STORED = select(_TABLE.c.id).where(
    _TABLE.c.run_id == bindparam("run_id"), _TABLE.c.signal == bindparam("signal")
)
_INSERT = _TABLE.insert().returning(_TABLE.c.id)
_REPLACE = _TABLE.update().where(_TABLE.c.id == bindparam("stored_id"))


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
) -> int:
    """Store a snapshot, or keep the one this run already stored for `signal` (`replace`:
    give that one the new range and series: the read again after the verification). Returns
    the stored snapshot's id. Core statements on the session's connection: one read of the id,
    one INSERT or UPDATE (the series is encoded once, by the JSON column)."""
    connection = session.connection()
    stored = connection.execute(_STORED, {"run_id": run_id, "signal": signal}).scalar()
    if stored is not None and not replace:
        return int(stored)
    values = {
        "start": start,
        "end": end,
        "step_seconds": step_seconds,
        "onset_at": onset_at,
        "series": list(series),
        "taken_at": taken_at,
    }
    if stored is not None:
        connection.execute(_REPLACE.values(values), {"stored_id": stored})
        return int(stored)
    row = {"incident_id": incident_id, "run_id": run_id, "signal": signal} | values
    return int(connection.execute(_INSERT, row).scalar_one())


_INCIDENTS = Incident.__table__  # type: ignore[attr-defined]
_ANCHOR = select(_INCIDENTS.c.fired_at, _INCIDENTS.c.detected_at).where(
    _INCIDENTS.c.id == bindparam("incident_id")
)


def snapshot_anchor(engine: Engine, *, incident_id: int) -> datetime | None:
    """When the incident fired (else when it was detected): where a snapshot's window starts,
    less its margin; None for no such incident or neither time. One read of one column on a
    connection of its own that commits nothing (before the telemetry read: no lock held)."""
    try:
        with read_only(engine).connect() as connection:
            found = connection.execute(_ANCHOR, {"incident_id": incident_id}).first()
    except SQLAlchemyError as err:
        raise translate(err, engine=engine) from err
    if found is None:
        return None
    fired, detected = found
    anchor: datetime | None = fired or detected
    return anchor


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
