"""Incident and timeline queries.

Covers: `get_incident` accepts INC-7, inc-7, 7 and 7 (int) and answers None for unknown or
malformed references; one open incident per group key is enforced by the database, also
across engines, and a resolved incident frees its group; `list_incidents` newest first with
`open_only`; timeline events come back in time order with their JSON payload, optionally
pinned only.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from storage import incidents
from storage.db import session_scope
from storage.errors import IncidentAlreadyOpenError


def test_get_incident_accepts_every_spelling_of_the_reference(
    engine: Engine, incident_id: int
) -> None:
    with session_scope(engine) as session:
        for ref in (f"INC-{incident_id}", f"inc-{incident_id}", str(incident_id), incident_id):
            found = incidents.get_incident(session, ref)
            assert found is not None and found.ref == f"INC-{incident_id}"
        for ref in ("INC-999", "INC-", "node-7", "", 0, -1):
            assert incidents.get_incident(session, ref) is None


def test_a_second_open_incident_for_the_same_group_is_refused(
    make_incident: Callable[..., int], other_engine: Engine, clock: FakeClock
) -> None:
    first = make_incident("gpu-node-03")
    with (
        pytest.raises(IncidentAlreadyOpenError, match=f"INC-{first} is already open"),
        session_scope(other_engine) as session,
    ):
        incidents.create_incident(
            session,
            runbook="ecc-storm",
            target="gpu-node-03",
            target_kind="node",
            severity="critical",
            title="again",
            at=clock.now(),
        )
    assert make_incident("gpu-node-04") != first  # another target is another group


def test_a_resolved_incident_frees_its_group(
    engine: Engine, make_incident: Callable[..., int], clock: FakeClock
) -> None:
    first = make_incident()
    with session_scope(engine) as session:
        incident = incidents.get_incident(session, first)
        assert incident is not None
        incident.state, incident.resolved_at = "resolved", clock.now()
    second = make_incident()
    with session_scope(engine) as session:
        found = incidents.find_open_incident(session, "ecc-storm:gpu-node-03")
        assert found is not None and found.id == second


def test_list_incidents_is_newest_first_and_can_skip_resolved(
    engine: Engine, make_incident: Callable[..., int], clock: FakeClock
) -> None:
    ids = [make_incident(f"gpu-node-0{i}") for i in range(3)]
    with session_scope(engine) as session:
        resolved = incidents.get_incident(session, ids[1])
        assert resolved is not None
        resolved.state, resolved.resolved_at = "resolved", clock.now()
    with session_scope(engine) as session:
        assert [i.id for i in incidents.list_incidents(session)] == ids[::-1]
        assert [i.id for i in incidents.list_incidents(session, open_only=True)] == [ids[2], ids[0]]
        assert len(incidents.list_incidents(session, limit=1)) == 1


def test_events_come_back_in_time_order_with_their_payload(
    engine: Engine, incident_id: int, clock: FakeClock
) -> None:
    later, earlier = clock.now() + timedelta(minutes=2), clock.now() + timedelta(minutes=1)
    with session_scope(engine) as session:
        incidents.append_event(
            session,
            incident_id=incident_id,
            at=later,
            kind="verdict",
            actor="bot",
            summary="gpu_hardware",
            payload={"culprits": ["gpu-node-03"], "confidence": 0.9},
            pinned=True,
            run_id="r1",
            step_id="where",
        )
        incidents.append_event(
            session, incident_id=incident_id, at=earlier, kind="note", actor="U1", summary="on it"
        )
    with session_scope(engine) as session:
        events = incidents.list_events(session, incident_id)
        assert [(e.kind, e.at) for e in events] == [("note", earlier), ("verdict", later)]
        assert events[1].payload == {"culprits": ["gpu-node-03"], "confidence": 0.9}
        assert (events[1].run_id, events[1].step_id) == ("r1", "where")
        pinned = incidents.list_events(session, incident_id, pinned_only=True)
        assert [e.kind for e in pinned] == ["verdict"]
