"""`serve`'s triage workers over the durable work queue (bot/work/dispatching.py), in one process.

Covers: the webhook's transaction records the triage with the alert, so a process that answers
and then never submits it loses nothing: `take_over` (start-up, scheduler tick) finds it and a
worker runs it to its approval; work queued in this process is not queued twice; `shutdown`
hands a lease this worker holds back to the database, where the next worker claims it at once;
a triage this process recorded and claims first records its run without looking for one (only
a claimer records a run), and runs it to its approval.
"""

from __future__ import annotations

from typing import Any

from engine.test_work_takeover import NODE, state_of
from servers.oncall import alert, webhook
from sqlalchemy import event

from bot.intake.alerts import parse_webhook
from bot.intake.counters import IntakeCounters
from bot.intake.receiving import Received, receive_webhook
from bot.wiring.runtime import Runtime
from bot.work.dispatching import TriageWorkers
from storage import work as work_store
from storage.db import session_scope


def triage_workers(rt: Runtime, *, workers: int) -> TriageWorkers:
    """The pool as `create_app` builds it: the runtime's ports, not the runtime."""
    return TriageWorkers(
        rt.engine,
        db=rt.db,
        catalog=rt.catalog,
        clock=rt.clock,
        silences=rt.deps.silences,
        workers=workers,
        queue_limit=10,
        counters=IntakeCounters(),
    )


def received(rt: Runtime, workers: TriageWorkers) -> Received:
    """What `POST /alerts` does before it answers: store the alert and record its triage."""
    assert rt.fleet is not None and rt.scenario is not None
    starts = rt.fleet.t0 + rt.scenario.faults[0].start
    body = webhook([alert("GPUEccStorm", {"Hostname": NODE}, starts_at=starts)])
    with session_scope(rt.db) as session:
        got = receive_webhook(
            session, parse_webhook(body), routes=rt.catalog.alert_routes(), at=rt.clock.now()
        )
        assert workers.record_triage(session, got) == 1
    return got[0]


def receive(rt: Runtime, workers: TriageWorkers) -> int:
    """`received`: the incident it opened."""
    incident_id = received(rt, workers).incident_id
    assert incident_id is not None
    return incident_id


def test_a_recorded_triage_nobody_submitted_is_taken_over_and_run(rt: Runtime) -> None:
    workers = triage_workers(rt, workers=2)
    try:
        incident_id = receive(rt, workers)  # ... and the process "died" before submitting it
        assert state_of(rt, incident_id) == "open"
        assert workers.take_over() == 1
        assert workers.wait_idle(60)
        assert state_of(rt, incident_id) == "awaiting_approval"
        assert workers.take_over() == 0  # done: nothing left to take
    finally:
        workers.shutdown()


def test_shutdown_hands_held_work_back_for_the_next_worker(rt: Runtime) -> None:
    workers = triage_workers(rt, workers=1)
    incident_id = receive(rt, workers)
    with session_scope(rt.db) as session:
        (row,) = work_store.list_work(session, incident_id=incident_id)
        assert row.id is not None
        held = work_store.claim_work(
            session,
            work_id=row.id,
            owner=rt.engine.work.leases.owner,
            at=rt.engine.work.leases.now(),
            lease=rt.engine.work.leases.terms.lease,
        )
        assert held is not None
    workers.shutdown()
    with session_scope(rt.db) as session:
        claimable = work_store.list_claimable(session, at=rt.engine.work.leases.now())
        assert [(r.id, r.owner, r.attempts) for r in claimable] == [(row.id, None, 0)]


def test_a_triage_recorded_here_and_claimed_first_records_its_run_without_looking(
    rt: Runtime,
) -> None:
    workers = triage_workers(rt, workers=1)
    statements: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(" ".join(statement.split()))

    try:
        got = received(rt, workers)
        event.listen(rt.db, "before_cursor_execute", seen)
        try:
            assert workers.submit_run(got)
            assert workers.wait_idle(60)
        finally:
            event.remove(rt.db, "before_cursor_execute", seen)
        assert got.incident_id is not None
        assert state_of(rt, got.incident_id) == "awaiting_approval"
        claim = next(i for i, s in enumerate(statements) if s.startswith("UPDATE work_items"))
        recorded = next(
            i for i, s in enumerate(statements) if s.startswith("INSERT INTO runbook_runs")
        )
        looked = [s for s in statements[claim:recorded] if "FROM runbook_runs" in s]
        assert looked == []
    finally:
        workers.shutdown()
