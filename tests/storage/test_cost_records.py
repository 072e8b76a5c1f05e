"""The GPU-hours' column reads (storage/cost_records.py) against the entity reads they replace,
on SQLite and PostgreSQL.

Aspects: an incident's actions read as five columns are its `list_actions` rows in claim order,
field for field, read in the session that wrote them; its events of one kind are its
`list_events` rows of that kind in time order, payload for payload, and no other incident's.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.engine import Engine

from storage import actions, cost_records, incidents
from storage.db import session_scope
from tests.storage.conftest import T0, IncidentFactory

REQUESTED = "approval_requested"


def test_the_column_reads_are_the_entity_reads_projected(
    engine: Engine, make_incident: IncidentFactory, run_id: str, incident_id: int
) -> None:
    other = make_incident("gpu-node-09")
    with session_scope(engine) as session:
        for n, (action, target) in enumerate(
            [
                ("cordon", "gpu-node-03"),
                ("drain", "gpu-node-03"),
                ("uncordon", "gpu-node-03"),
                ("cordon", "n4"),
            ]
        ):
            key = f"k{n}"
            actions.claim_action(
                session,
                key=key,
                run_id=run_id,
                step_id="act",
                action=action,
                target=target,
                params={},
                at=T0,
                incident_id=incident_id,
            )
            if n != 3:
                actions.finish_action(
                    session,
                    key=key,
                    status="succeeded",
                    result={"data": {"gpus": 8 - n}},
                    at=T0 + timedelta(minutes=n),
                )
        for n, (kind, owner) in enumerate(
            [
                (REQUESTED, incident_id),
                ("note", incident_id),
                (REQUESTED, other),
                (REQUESTED, incident_id),
            ]
        ):
            payload = {"proposals": [{"impact": {"jobs": [{"job": f"j{n}", "gpus_total": n}]}}]}
            incidents.append_event(
                session,
                incident_id=owner,
                at=T0 - timedelta(minutes=n),
                kind=kind,
                actor="bot",
                summary=f"e{n}",
                payload=payload,
            )

        facts = cost_records.action_facts(session, incident_id=incident_id)
        rows = actions.list_actions(session, incident_id=incident_id)
        assert facts == [(r.action, r.target, r.status, r.result, r.finished_at) for r in rows]
        assert [f.status for f in facts] == ["succeeded"] * 3 + ["running"]

    with session_scope(engine) as session:
        requests = cost_records.event_facts(session, incident_id=incident_id, kind=REQUESTED)
        events = incidents.list_events(session, incident_id)
        assert requests == [(e.kind, e.payload) for e in events if e.kind == REQUESTED]
        assert [r.payload["proposals"][0]["impact"]["jobs"][0]["job"] for r in requests] == [
            "j3",
            "j0",
        ]
