"""Chat message coordinates (storage.messages): where a live triage message was posted.

Covers: a saved message reads back by (channel, ts), by run and by incident; saving the same
(channel, ts) twice, also from a second engine (another replica), keeps one row; binding a run
to a message makes it findable by run id; an unknown message binds nothing; a message must
belong to an existing incident.
"""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from storage import messages
from storage.db import session_scope
from storage.errors import ConflictError


def test_saved_message_reads_back_every_way(
    engine: Engine, incident_id: int, run_id: str, clock: FakeClock
) -> None:
    with session_scope(engine) as session:
        messages.save_message(
            session, incident_id=incident_id, channel="C1", ts="1.000001", at=clock.now()
        )
    with session_scope(engine) as session:
        found = messages.find_message(session, channel="C1", ts="1.000001")
        assert found is not None and found.incident_id == incident_id and found.run_id is None
        assert [m.ts for m in messages.messages_for_incident(session, incident_id)] == ["1.000001"]
        assert messages.message_for_run(session, run_id) is None


def test_saving_twice_keeps_one_row_across_replicas(
    engine: Engine, other_engine: Engine, incident_id: int, clock: FakeClock
) -> None:
    for db in (engine, other_engine, engine):
        with session_scope(db) as session:
            messages.save_message(
                session, incident_id=incident_id, channel="C1", ts="1.000001", at=clock.now()
            )
    with session_scope(engine) as session:
        assert len(messages.messages_for_incident(session, incident_id)) == 1


def test_binding_a_run_makes_the_message_findable_by_run(
    engine: Engine, other_engine: Engine, incident_id: int, run_id: str, clock: FakeClock
) -> None:
    with session_scope(engine) as session:
        messages.save_message(
            session, incident_id=incident_id, channel="C1", ts="1.000002", at=clock.now()
        )
        assert messages.bind_run(session, channel="C9", ts="9.9", run_id=run_id) is None
    with session_scope(other_engine) as session:  # a restarted process
        bound = messages.bind_run(session, channel="C1", ts="1.000002", run_id=run_id)
        assert bound is not None and bound.run_id == run_id
    with session_scope(engine) as session:
        found = messages.message_for_run(session, run_id)
        assert found is not None and found.ts == "1.000002"


def test_a_message_needs_an_existing_incident(engine: Engine, clock: FakeClock) -> None:
    with pytest.raises(ConflictError, match="refers to an incident"), session_scope(engine) as s:
        messages.save_message(s, incident_id=999, channel="C1", ts="1.1", at=clock.now())
