"""Evidence snapshots in storage (storage/snapshots.py), on SQLite and PostgreSQL.

Aspects: a snapshot is stored with its range, onset and series exactly as given (the JSON reads
back equal); a second save of the same run and signal keeps the first one; a save with
`replace` gives that one row the new range and series; another signal of the same run is a row
of its own; a snapshot's anchor is when its incident fired, else when it was detected (in
UTC on both backends), None for no such incident.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy.engine import Engine

from storage import incidents, snapshots
from storage.db import session_scope
from tests.storage.conftest import T0, IncidentFactory

SERIES = [
    {"node": "gpu-node-03", "role": "culprit", "labels": {"gpu": "5"},
     "points": [[1767268800.0, 0.0], [1767268815.125, 3.5]]},
    {"node": "gpu-node-04", "role": "peer", "labels": {}, "points": [[1767268800.0, 0.25]]},
]  # fmt: skip


def save(engine: Engine, incident_id: int, **changes: Any) -> int:
    fields: dict[str, Any] = {
        "incident_id": incident_id,
        "run_id": "run-1",
        "signal": "gpu.ecc.dbe_rate",
        "start": T0 - timedelta(minutes=30),
        "end": T0,
        "step_seconds": 15.0,
        "onset_at": T0 - timedelta(minutes=5),
        "series": SERIES,
        "taken_at": T0,
    } | changes
    with session_scope(engine) as session:
        return snapshots.save_snapshot(session, **fields)


def test_a_snapshot_is_kept_once_per_run_and_signal_and_replaced_on_request(
    engine: Engine, make_incident: IncidentFactory
) -> None:
    incident_id = make_incident()
    first = save(engine, incident_id)
    assert save(engine, incident_id, series=[], end=T0 + timedelta(hours=1)) == first
    with session_scope(engine) as session:
        (kept,) = snapshots.list_snapshots(session, incident_id=incident_id)
    assert (kept.id, kept.series, kept.end, kept.onset_at) == (
        first, SERIES, T0, T0 - timedelta(minutes=5)
    )  # fmt: skip

    later = SERIES[:1]
    replaced = save(engine, incident_id, series=later, end=T0 + timedelta(hours=1),
                    onset_at=None, taken_at=T0 + timedelta(hours=1), replace=True)  # fmt: skip
    other = save(engine, incident_id, signal="gpu.xid")
    with session_scope(engine) as session:
        latest = snapshots.latest_snapshot(session, incident_id=incident_id)
        rows = {r.signal: r for r in snapshots.list_snapshots(session, incident_id=incident_id)}
    assert replaced == first and other != first
    assert latest is not None and latest.id == first
    assert (latest.series, latest.end, latest.onset_at) == (later, T0 + timedelta(hours=1), None)
    assert rows["gpu.xid"].series == SERIES


def test_the_anchor_is_when_the_incident_fired_else_when_it_was_detected(
    engine: Engine, make_incident: IncidentFactory
) -> None:
    fired, detected = make_incident("gpu-node-03"), make_incident("gpu-node-04")
    with session_scope(engine) as session:
        row = incidents.get_incident(session, fired)
        assert row is not None
        row.fired_at = T0 - timedelta(minutes=7)
        unfired = incidents.get_incident(session, detected)
        assert unfired is not None
        unfired.fired_at, unfired.detected_at = None, T0 + timedelta(seconds=3)
    assert snapshots.snapshot_anchor(engine, incident_id=fired) == T0 - timedelta(minutes=7)
    assert snapshots.snapshot_anchor(engine, incident_id=detected) == T0 + timedelta(seconds=3)
    assert snapshots.snapshot_anchor(engine, incident_id=10**6) is None
