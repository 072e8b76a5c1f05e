"""Views built from rows.

Covers: `incident_view`/`event_views` copy every field of the storage rows (read back from the
database, so datetimes are aware UTC); `timestamps()` feeds `compute_figures` directly;
`to_dict()` is JSON-safe with the INC ref as `id`; an unsaved incident (no id) is refused.
"""

from __future__ import annotations

import json
from datetime import UTC, timedelta

import pytest
from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from bot.incidents import lifecycle
from bot.incidents.mttr import compute_figures
from bot.incidents.views import event_views, incident_view
from storage import incidents as store
from storage.db import session_scope
from storage.tables import Incident


def test_views_copy_the_rows_and_serialise_to_json(engine: Engine, clock: FakeClock) -> None:
    with session_scope(engine) as session:
        incident = lifecycle.open_incident(
            session,
            runbook="nccl-hang",
            target="llm-pretrain",
            target_kind="job",
            severity="warning",
            title="NCCL hang",
            fired_at=clock.now() - timedelta(minutes=5),
            detected_at=clock.now(),
            actor="bot",
        )
        lifecycle.mark_diagnosed(
            session,
            incident,
            at=clock.now(),
            layer="fabric",
            confidence=0.8,
            culprits=["gpu-node-05"],
        )
    with session_scope(engine) as session:
        row = store.get_incident(session, incident.id or 0)
        assert row is not None
        view = incident_view(row)
        events = event_views(store.list_events(session, row.id or 0))
    assert (view.ref, view.target_kind, view.culprits, view.layer) == (
        row.ref,
        "job",
        ("gpu-node-05",),
        "fabric",
    )
    assert view.fired_at is not None and view.fired_at.tzinfo is UTC
    assert compute_figures(**view.timestamps()) == view.figures()
    assert view.figures().mttd == timedelta(minutes=5)
    data = json.loads(json.dumps(view.to_dict()))
    assert (data["id"], data["number"], data["culprits"]) == (row.ref, row.id, ["gpu-node-05"])
    assert data["detected_at"] == clock.now().isoformat()
    assert [e.kind for e in events] == ["alert_fired", "incident_opened", "verdict"]
    assert json.loads(json.dumps(events[-1].to_dict()))["payload"]["layer"] == "fabric"


def test_an_unsaved_incident_has_no_view(clock: FakeClock) -> None:
    unsaved = Incident(
        runbook="r",
        target="t",
        target_kind="node",
        severity="info",
        title="x",
        group_key="r:t",
        created_at=clock.now(),
    )
    with pytest.raises(ValueError, match="not been stored"):
        incident_view(unsaved)
