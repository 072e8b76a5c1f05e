"""A webhook's writes in few statements (issue 21): alerts stored after an earlier read, the
open incidents found by (group key, id), the triage work rows inserted at once.

Covers, on SQLite and PostgreSQL: `record_alerts` given what an earlier read found inserts only
the rest, and an alert another replica stored after that read is reported as its row, not new,
with the incident it was linked to; `find_open_incident_ids` skips closed incidents;
`add_works` stores every row with its payload and due time in one call, skips a key recorded
before (another replica) and refuses an unknown kind before writing anything.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from storage import alerts, incidents, work
from storage.db import session_scope
from storage.errors import InvalidValueError


def new_alert(clock: FakeClock, fingerprint: str) -> alerts.NewAlert:
    return alerts.NewAlert(
        fingerprint=fingerprint,
        status="firing",
        starts_at=clock.now() - timedelta(minutes=5),
        ends_at=None,
        alertname="GPUEccStorm",
        labels={"alertname": "GPUEccStorm", "Hostname": fingerprint},
    )


def test_an_alert_stored_after_the_read_is_not_new(
    engine: Engine, other_engine: Engine, clock: FakeClock, make_incident: object
) -> None:
    incident = make_incident("gpu-node-03")  # type: ignore[operator]
    batch = [new_alert(clock, "a"), new_alert(clock, "b"), new_alert(clock, "c")]
    with session_scope(engine) as session:
        (first,) = alerts.record_alerts(session, batch[:1], received_at=clock.now())
        read = alerts.existing_alerts(session, [a.identity for a in batch])
    assert list(read) == [batch[0].identity]
    with session_scope(other_engine) as session:  # another replica, between our read and write
        (raced,) = alerts.record_alerts(session, batch[1:2], received_at=clock.now())
        alerts.link_alerts(session, [(raced.id, incident, "ecc-storm")])
    with session_scope(engine) as session:
        rows = alerts.record_alerts(session, batch, received_at=clock.now(), looked_up=read)
        stored = alerts.list_alerts(session)
    assert [(r.id, r.is_new, r.incident_id) for r in rows[:2]] == [
        (first.id, False, None),
        (raced.id, False, incident),
    ]
    assert rows[2].is_new and rows[2].id not in (first.id, raced.id)
    assert sorted(s.fingerprint for s in stored) == ["a", "b", "c"]


def test_open_incident_ids_skip_closed_ones(
    engine: Engine, clock: FakeClock, make_incident: object
) -> None:
    open_id = make_incident("gpu-node-03")  # type: ignore[operator]
    closed_id = make_incident("gpu-node-04")  # type: ignore[operator]
    with session_scope(engine) as session:
        closed = incidents.get_incident(session, closed_id)
        assert closed is not None
        closed.state = "resolved"
        session.add(closed)
    keys = [incidents.group_key(runbook="ecc-storm", target=t) for t in ("gpu-node-03",
            "gpu-node-04", "gpu-node-05")]  # fmt: skip
    with session_scope(engine) as session:
        assert incidents.find_open_incident_ids(session, keys) == {keys[0]: open_id}
        assert incidents.find_open_incident_ids(session, []) == {}


def _work(key: str, incident_id: int) -> dict[str, object]:
    return {"key": key, "kind": "triage", "incident_id": incident_id, "run_id": key[-2:],
            "payload": {"runbook": "ecc-storm", "inputs": {"node": key}}}  # fmt: skip


def test_work_rows_added_at_once_and_a_recorded_key_skipped(
    engine: Engine, other_engine: Engine, clock: FakeClock, make_incident: object
) -> None:
    incident = make_incident("gpu-node-03")  # type: ignore[operator]
    with session_scope(other_engine) as session:  # another replica recorded one already
        earlier, _ = work.add_work(
            session, key="triage:r2", kind="triage", incident_id=incident, run_id="r2",
            at=clock.now(),
        )  # fmt: skip
    later = clock.now() + timedelta(minutes=1)
    works = [_work(f"triage:r{i}", incident) for i in (1, 2, 3)]
    works[2]["due_at"] = later
    with session_scope(engine) as session:
        added = work.add_works(session, works, at=clock.now())
    assert sorted(added) == ["triage:r1", "triage:r3"]
    with session_scope(engine) as session:
        rows = {key: work.get_work(session, key) for key in ("triage:r1", "triage:r2", "triage:r3")}
    first, kept, third = rows["triage:r1"], rows["triage:r2"], rows["triage:r3"]
    assert first is not None and kept is not None and third is not None
    assert (first.id, third.id) == (added["triage:r1"], added["triage:r3"])
    assert kept.id == earlier.id and kept.payload == {}  # the earlier row is left as it was
    assert first.payload == {"runbook": "ecc-storm", "inputs": {"node": "triage:r1"}}
    assert (first.state, first.owner, first.attempts) == (work.PENDING, None, 0)
    assert (first.due_at, third.due_at, first.created_at) == (clock.now(), later, clock.now())


def test_an_unknown_work_kind_writes_nothing(
    engine: Engine, clock: FakeClock, make_incident: object
) -> None:
    incident = make_incident("gpu-node-03")  # type: ignore[operator]
    works = [_work("triage:r1", incident), {**_work("triage:r2", incident), "kind": "tirage"}]
    refused = pytest.raises(InvalidValueError, match="unknown work kind 'tirage'")
    with refused, session_scope(engine) as session:
        work.add_works(session, works, at=clock.now())
    with session_scope(engine) as session:
        assert work.get_work(session, "triage:r1") is None
