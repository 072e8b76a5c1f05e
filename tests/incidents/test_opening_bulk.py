"""Opening many incidents at once (bot.incidents.opening), as alert intake does under load.

Covers: the bulk path writes the same incident and the same timeline (kinds, times, actors,
summaries, payloads, pinned flags) as `lifecycle.open_incident`; a startsAt after detection is
clamped the same way; a group that already has an open incident is attached, not reopened,
and gets no new events; two requests of one group share one incident; the database skips a
group another replica opened between our lookup and our insert (`insert_incidents` returns no
id for it) and the bulk path then attaches to that incident; `record_many` pins by kind like
`record` and keeps the run and step an event belongs to.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from bot.clock import FakeClock
from bot.incidents import lifecycle
from bot.incidents.opening import OpenRequest, open_or_attach_many, record_many
from bot.incidents.timeline import EventKind
from storage import incidents as store
from storage.db import session_scope


def request(target: str, fired_at: Any) -> OpenRequest:
    return OpenRequest("ecc-storm", target, "node", "critical", f"ECC storm on {target}", fired_at)


def timeline(session: Session, incident_id: int) -> list[tuple[Any, ...]]:
    return [
        (
            e.kind,
            e.at,
            e.actor,
            e.summary.replace(f"INC-{incident_id}", "INC-?"),
            e.payload,
            e.pinned,
        )
        for e in store.list_events(session, incident_id)
    ]


def swap(value: Any) -> Any:
    return value.replace("gpu-node-01", "gpu-node-02") if isinstance(value, str) else value


def test_bulk_opening_writes_what_open_incident_writes(engine: Engine, clock: FakeClock) -> None:
    now = clock.now()
    fired = now - timedelta(minutes=3)
    with session_scope(engine) as session:
        one = lifecycle.open_incident(
            session,
            runbook="ecc-storm",
            target="gpu-node-01",
            target_kind="node",
            severity="critical",
            title="ECC storm on gpu-node-01",
            fired_at=fired,
            detected_at=now,
            actor="alertmanager",
        )
        [(bulk, opened)] = open_or_attach_many(
            session, [request("gpu-node-02", fired)], detected_at=now, actor="alertmanager"
        )
        assert opened
        expected = [
            (k, at, actor, swap(summary), {n: swap(v) for n, v in payload.items()}, pinned)
            for k, at, actor, summary, payload, pinned in timeline(session, int(one.id or 0))
        ]
        assert timeline(session, int(bulk.id or 0)) == expected
        assert (bulk.state, bulk.fired_at, bulk.detected_at, bulk.group_key) == (
            "open",
            fired,
            now,
            "ecc-storm:gpu-node-02",
        )


def test_starts_at_after_detection_is_clamped(engine: Engine, clock: FakeClock) -> None:
    now = clock.now()
    with session_scope(engine) as session:
        [(incident, _)] = open_or_attach_many(
            session,
            [request("gpu-node-04", now + timedelta(seconds=30))],
            detected_at=now,
            actor="alertmanager",
        )
        fired_event = store.list_events(session, int(incident.id or 0))[0]
    assert incident.fired_at == now
    assert fired_event.payload["clamped_to"] == now.isoformat()


def test_open_groups_are_attached_and_one_group_shares_one_incident(
    engine: Engine, clock: FakeClock
) -> None:
    now = clock.now()
    with session_scope(engine) as session:
        [(first, _)] = open_or_attach_many(
            session, [request("gpu-node-05", now)], detected_at=now, actor="alertmanager"
        )
        before = len(store.list_events(session, int(first.id or 0)))
        results = open_or_attach_many(
            session,
            [request("gpu-node-05", now), request("gpu-node-06", now), request("gpu-node-06", now)],
            detected_at=now + timedelta(seconds=5),
            actor="alertmanager",
        )
        assert [(i.id, new) for i, new in results] == [
            (first.id, False),
            (results[1][0].id, True),
            (results[1][0].id, True),
        ]
        assert len(store.list_events(session, int(first.id or 0))) == before


def test_a_group_opened_by_another_replica_meanwhile_is_attached(
    engine: Engine, clock: FakeClock
) -> None:
    now = clock.now()
    with session_scope(engine) as session:
        theirs = store.create_incident(
            session,
            runbook="ecc-storm",
            target="gpu-node-07",
            target_kind="node",
            severity="critical",
            title="theirs",
            at=now,
        )
        row = {
            "runbook": "ecc-storm",
            "target": "gpu-node-07",
            "target_kind": "node",
            "severity": "critical",
            "title": "ours",
            "group_key": "ecc-storm:gpu-node-07",
            "created_at": now,
        }
        assert store.insert_incidents(session, [row]) == {}
        [(incident, opened)] = open_or_attach_many(
            session, [request("gpu-node-07", now)], detected_at=now, actor="alertmanager"
        )
    assert (incident.id, opened) == (theirs.id, False)


def test_record_many_pins_by_kind_like_record(engine: Engine, clock: FakeClock) -> None:
    now = clock.now()
    with session_scope(engine) as session:
        [(incident, _)] = open_or_attach_many(
            session, [request("gpu-node-08", now)], detected_at=now, actor="alertmanager"
        )
        incident_id = int(incident.id or 0)
        record_many(
            session,
            events=[
                {"incident_id": incident_id, "kind": EventKind.NOTE, "at": now,
                 "actor": "alertmanager", "summary": "fired again"},
                {"incident_id": incident_id, "kind": EventKind.VERDICT, "at": now,
                 "actor": "bot", "summary": "Localized", "run_id": "r1", "step_id": "where"},
            ],
        )  # fmt: skip
        events = store.list_events(session, incident_id)[-2:]
    assert [(e.kind, e.pinned, e.run_id, e.step_id) for e in events] == [
        ("note", False, None, None),
        ("verdict", True, "r1", "where"),
    ]
