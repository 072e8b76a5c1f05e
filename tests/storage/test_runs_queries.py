"""Runbook runs and findings.

Covers: a created run reads back with its inputs and status `running`; `update_run` changes
only the fields given and refuses an unknown status or run; `latest_run_for_incident` picks the
most recently started run; findings shaped like `Finding.to_dict()` are stored with their
evidence and culprit; `insert_findings` stores many in one statement, read back in the order
given, the same as `add_findings` would.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from storage import runs
from storage.db import session_scope
from storage.errors import InvalidValueError, RecordNotFoundError


def test_a_created_run_reads_back_running_with_its_inputs(engine: Engine, run_id: str) -> None:
    with session_scope(engine) as session:
        run = runs.get_run(session, run_id)
        assert run is not None
        assert (run.status, run.inputs, run.queries, run.verdict) == (
            "running",
            {"node": "gpu-node-03"},
            0,
            None,
        )


def test_update_run_changes_only_the_given_fields(
    engine: Engine, run_id: str, clock: FakeClock
) -> None:
    with session_scope(engine) as session:
        runs.update_run(session, run_id, queries=7)
    with session_scope(engine) as session:
        runs.update_run(
            session,
            run_id,
            status="completed",
            finished_at=clock.now(),
            verdict={"layer": "gpu_hardware", "culprits": ["gpu-node-03"]},
        )
    with session_scope(engine) as session:
        run = runs.get_run(session, run_id)
        assert run is not None
        assert (run.status, run.queries, run.finished_at) == ("completed", 7, clock.now())
        assert run.verdict == {"layer": "gpu_hardware", "culprits": ["gpu-node-03"]}


def test_update_run_refuses_unknown_statuses_and_runs(engine: Engine, run_id: str) -> None:
    with (
        pytest.raises(InvalidValueError, match="statuses: awaiting_approval, completed"),
        session_scope(engine) as session,
    ):
        runs.update_run(session, run_id, status="done")
    with pytest.raises(RecordNotFoundError), session_scope(engine) as session:
        runs.update_run(session, "nope", status="failed")


def test_latest_run_is_the_most_recently_started(
    engine: Engine, run_id: str, incident_id: int, clock: FakeClock
) -> None:
    with session_scope(engine) as session:
        runs.create_run(
            session,
            run_id="aaaa",
            incident_id=incident_id,
            runbook="node-diagnose",
            inputs={},
            at=clock.now() + timedelta(minutes=3),
        )
    with session_scope(engine) as session:
        latest = runs.latest_run_for_incident(session, incident_id)
        assert latest is not None and latest.id == "aaaa"
        assert [r.id for r in runs.list_runs_for_incident(session, incident_id)] == [run_id, "aaaa"]
        assert runs.latest_run_for_incident(session, 999) is None


def test_findings_are_stored_with_evidence_and_culprit(
    engine: Engine, run_id: str, incident_id: int, clock: FakeClock
) -> None:
    finding = {
        "check_id": "hw",
        "layer": "gpu_hardware",
        "severity": "critical",
        "summary": "GPU 5 on gpu-node-03: 12 DBE/min",
        "culprit": {"node": "gpu-node-03", "gpu": "5"},
        "evidence": [
            {"source": "dbe", "what": "gpu.ecc.dbe_rate", "value": 12.0, "labels": {"gpu": "5"}}
        ],
    }
    with session_scope(engine) as session:
        runs.add_findings(
            session, run_id=run_id, incident_id=incident_id, findings=[finding], at=clock.now()
        )
    with session_scope(engine) as session:
        (row,) = runs.list_findings(session, run_id=run_id)
        assert (row.check_id, row.layer, row.culprit) == (
            "hw",
            "gpu_hardware",
            {"node": "gpu-node-03", "gpu": "5"},
        )
        assert row.evidence == finding["evidence"]


def test_insert_findings_stores_many_in_order_like_add_findings(
    engine: Engine, run_id: str, incident_id: int, clock: FakeClock
) -> None:
    findings = [
        {"check_id": check, "layer": "gpu_hardware", "severity": "critical", "summary": check}
        for check in ("dbe_storm", "ecc_xid", "remap_failed")
    ]
    values = [
        runs.finding_values(run_id=run_id, incident_id=incident_id, finding=f, at=clock.now())
        for f in findings
    ]
    with session_scope(engine) as session:
        runs.insert_findings(session, values)
        runs.insert_findings(session, [])
    with session_scope(engine) as session:
        rows = runs.list_findings(session, run_id=run_id)
    assert [(r.check_id, r.evidence, r.culprit, r.at) for r in rows] == [
        (check, [], {}, clock.now()) for check in ("dbe_storm", "ecc_xid", "remap_failed")
    ]
