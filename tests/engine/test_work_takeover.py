"""Durable work taken over from a dead worker (in one process: the dead worker is a lease that
was never finished, the live one a second RunEngine whose lease clock is past the expiry; the
SIGKILL tests in tests/journeys/test_crash_*.py do the same with real processes).

Covers: a triage nobody finished is started by the next worker and noted on the timeline; a run
that died after a super-step continues from its checkpoint without recording a step twice; a
decided approval whose resumption died is completed by the next `approve` (refused, naming the
worker, while that worker's lease runs), each action once; an action left `running` by a dead
worker is reconciled under the same idempotency key (already done, not repeated); a run that
cannot start (unknown node) or raises ends its incident `failed`, with the reason on the
timeline, and the next run for the same target opens a fresh incident; work whose workers keep
dying is given up after `max_attempts` and its incident ends `failed`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from servers.oncall import alert, webhook
from sqlmodel import select

from bot.actions.executing import idempotency_key
from bot.actions.types import ActionContext
from bot.clock import FakeClock, SystemClock
from bot.config import Settings
from bot.engine.leases import LeaseKeeper, LeaseTerms
from bot.engine.running import RunEngine, RunOutcome
from bot.engine.targets import UnknownNodeError
from bot.errors import NotFound, RunStateError
from bot.incidents import lifecycle
from bot.intake.alerts import parse_webhook
from bot.intake.receiving import receive_webhook
from bot.wiring.runtime import Runtime, open_runtime
from storage import actions as action_store
from storage import approvals as approval_store
from storage import incidents as incident_store
from storage import runs as run_store
from storage import work as work_store
from storage.db import session_scope
from storage.tables import ActionRow, TimelineEvent, WorkItem

NODE = "gpu-node-03"
TERMS = LeaseTerms(lease=timedelta(seconds=60), heartbeat=timedelta(seconds=600), max_attempts=3)


class Killed(BaseException):
    """Stands in for SIGKILL in-process: nothing below the engine's boundary catches it."""


@pytest.fixture
def rt(settings: Settings, scenario_dir: Path) -> Iterator[Runtime]:
    scenario = scenario_dir / "ecc-dbe-storm.yaml"
    with open_runtime(settings, scenario_path=scenario, fresh=True) as runtime:
        runtime.engine.work.leases = LeaseKeeper(runtime.db, owner="worker-a", terms=TERMS)
        yield runtime


def replica(rt: Runtime, *, later: timedelta = TERMS.lease) -> RunEngine:
    """Another worker on the same database whose lease clock reads `later` from now."""
    clock = FakeClock(SystemClock().now() + later)
    leases = LeaseKeeper(rt.db, owner="worker-b", terms=TERMS, clock=clock)
    return RunEngine(
        deps=rt.deps,
        db=rt.db,
        checkpointer=rt.engine.checkpointer,
        catalog=rt.catalog,
        leases=leases,
    )


def fire(rt: Runtime) -> int:
    assert rt.fleet is not None and rt.scenario is not None
    starts = rt.fleet.t0 + rt.scenario.faults[0].start
    body = webhook([alert("GPUEccStorm", {"Hostname": NODE}, starts_at=starts)])
    with session_scope(rt.db) as session:
        received = receive_webhook(
            session, parse_webhook(body), routes=rt.catalog.alert_routes(), at=rt.clock.now()
        )
    incident_id = received[0].incident_id
    assert incident_id is not None
    return incident_id


def triage_work(rt: Runtime, incident_id: int, *, run_id: str = "a" * 32) -> int:
    """The triage row the webhook records, claimed by worker-a (which then dies)."""
    with session_scope(rt.db) as session:
        item = rt.engine.work.record_work(
            session,
            kind="triage",
            key=f"triage:{run_id}",
            incident_id=incident_id,
            run_id=run_id,
            payload={"runbook": "ecc-storm", "inputs": {"node": NODE}},
            claim=True,
        )
    assert item.id is not None and item.owner == "worker-a"
    return item.id


def events(rt: Runtime, incident_id: int) -> list[TimelineEvent]:
    with session_scope(rt.db) as session:
        return incident_store.list_events(session, incident_id)


def state_of(rt: Runtime, incident_id: int) -> str:
    with session_scope(rt.db) as session:
        incident = incident_store.get_incident(session, incident_id)
        assert incident is not None
        return incident.state


def die_after_first_step(step_id: str, output: Mapping[str, Any]) -> None:
    raise Killed


def approved_then_killed(rt: Runtime) -> RunOutcome:
    """An alert's run waits for approval; cli:alice approves; her worker dies right after the
    resumption's first step (the decision committed, no action carried out)."""
    incident_id = fire(rt)
    started = rt.engine.start(
        rt.catalog.get("ecc-storm"),
        inputs={"node": NODE},
        incident_id=incident_id,
        requester="alertmanager",
    )
    with pytest.raises(Killed):
        rt.engine.resume(
            started.run_id, decision="approve", actor="cli:alice", on_step=die_after_first_step
        )
    return started


def test_a_triage_nobody_finished_is_started_by_the_next_worker(rt: Runtime) -> None:
    incident_id = fire(rt)
    work_id = triage_work(rt, incident_id)
    assert replica(rt, later=timedelta(seconds=1)).work.due_work() == []  # worker-a's lease runs
    b = replica(rt)
    assert b.work.due_work() == [work_id]
    outcome = b.work.perform(work_id)
    assert outcome is not None and outcome.status == "awaiting_approval"
    assert outcome.verdict["culprits"] == [NODE]
    notes = [e.summary for e in events(rt, incident_id) if "taken over" in e.summary]
    assert notes and "worker-b" in notes[0] and "attempt 2 of 3" in notes[0]
    assert state_of(rt, incident_id) == "awaiting_approval"
    assert b.work.perform(work_id) is None  # done: nobody does it again


def test_a_triage_left_unfinished_after_its_run_moved_on_is_not_run_again(rt: Runtime) -> None:
    """Issue 24: worker-a triaged to the approval and died before marking its triage done; the
    run was approved and completed since. Taking the triage over must not drive the run again."""
    assert rt.fleet is not None
    incident_id = fire(rt)
    work_id = triage_work(rt, incident_id)
    started = rt.engine.start(
        rt.catalog.get("ecc-storm"),
        inputs={"node": NODE},
        incident_id=incident_id,
        requester="alertmanager",
        run_id="a" * 32,
    )
    assert started.status == "awaiting_approval"
    done = replica(rt).resume(started.run_id, decision="approve", actor="cli:bob")
    assert done.status == "completed"
    state, recorded = state_of(rt, incident_id), len(events(rt, incident_id))
    assert replica(rt).work.perform(work_id) is None
    assert (state_of(rt, incident_id), len(events(rt, incident_id))) == (state, recorded)
    assert rt.fleet.cordon_calls[NODE] == 1
    with session_scope(rt.db) as session:
        row = session.get(WorkItem, work_id)
        (run,) = run_store.list_runs_for_incident(session, incident_id)
    assert row is not None and row.state == "done"
    assert run.status == "completed"


def test_a_run_killed_after_a_super_step_continues_from_its_checkpoint(rt: Runtime) -> None:
    incident_id = fire(rt)
    work_id = triage_work(rt, incident_id)
    with pytest.raises(Killed):
        rt.engine.start(
            rt.catalog.get("ecc-storm"),
            inputs={"node": NODE},
            incident_id=incident_id,
            requester="alertmanager",
            run_id="a" * 32,
            on_step=die_after_first_step,
        )
    recorded_before = {e.step_id for e in events(rt, incident_id) if e.step_id}
    assert recorded_before  # the first super-step was recorded before the "kill"
    outcome = replica(rt).work.perform(work_id)
    assert outcome is not None and outcome.status == "awaiting_approval"
    with session_scope(rt.db) as session:
        assert len(run_store.list_runs_for_incident(session, incident_id)) == 1
        findings = run_store.list_findings(session, run_id="a" * 32)
    step_events = [
        (e.step_id, e.kind) for e in events(rt, incident_id) if e.step_id and e.kind != "note"
    ]
    assert len(step_events) == len(set(step_events))  # no step recorded twice
    assert len({f.check_id for f in findings}) == len(findings)


def test_a_decided_approval_whose_worker_died_is_completed_by_the_next_approve(
    rt: Runtime,
) -> None:
    assert rt.fleet is not None
    started = approved_then_killed(rt)
    assert rt.fleet.cordon_calls[NODE] == 0
    with pytest.raises(RunStateError, match="already being resumed by worker worker-a"):
        replica(rt, later=timedelta(seconds=1)).resume(
            started.run_id, decision="approve", actor="cli:bob"
        )
    done = replica(rt).resume(started.run_id, decision="approve", actor="cli:bob")
    assert done.status == "completed"
    assert rt.fleet.cordon_calls[NODE] == 1 and rt.fleet.drain_calls[NODE] == 1
    with session_scope(rt.db) as session:
        actions = list(session.exec(select(ActionRow)))
        approval = approval_store.get_approval_for_step(
            session, run_id=started.run_id, step_id="approval"
        )
    assert sorted(a.action for a in actions) == ["cordon", "drain", "open_ticket"]
    assert {a.status for a in actions} == {"succeeded"}
    assert approval is not None and approval.actor == "cli:alice"  # the decision that counted
    with pytest.raises(RunStateError):
        replica(rt).resume(started.run_id, decision="approve", actor="cli:carol")


def test_an_action_left_running_by_a_dead_worker_is_reconciled_not_repeated(
    rt: Runtime,
) -> None:
    assert rt.fleet is not None
    started = approved_then_killed(rt)
    # What the dead worker got to: it claimed the cordon and cordoned the node, then died.
    key = idempotency_key(run_id=started.run_id, step_id="execute", action="cordon", target=NODE)
    with session_scope(rt.db) as session:
        action_store.claim_action(
            session,
            key=key,
            run_id=started.run_id,
            step_id="execute",
            action="cordon",
            target=NODE,
            params={},
            at=rt.clock.now(),
            lease=timedelta(minutes=10),
        )
    ctx = ActionContext(
        cluster=rt.deps.cluster,
        clock=rt.deps.clock,
        tickets=rt.deps.tickets,
        run_id=started.run_id,
        incident=started.incident,
        idempotency_key=key,
        verdict=started.verdict,
    )
    assert rt.deps.actions.get("cordon").run(ctx, NODE, {}).outcome == "changed"
    done = replica(rt).resume(started.run_id, decision="approve", actor="cli:bob")
    assert done.status == "completed"
    cordon = next(r for r in done.steps["execute"]["results"] if r["action"] == "cordon")
    assert cordon["outcome"] == "already_done"  # the node was read: nothing changed twice
    assert rt.fleet.cordon_calls[NODE] == 1 and rt.fleet.drain_calls[NODE] == 1
    assert [r["outcome"] for r in done.steps["execute"]["results"]].count("changed") == 2
    with session_scope(rt.db) as session:
        row = action_store.get_action(session, key)
    assert row is not None and (row.status, row.outcome) == ("succeeded", "already_done")


def test_an_unknown_node_opens_no_incident(rt: Runtime) -> None:
    loaded = rt.catalog.get("ecc-storm")
    with pytest.raises(UnknownNodeError, match="unknown node 'gpu-node-999'"):
        rt.engine.open_incident(loaded, {"node": "gpu-node-999"}, actor="cli:alice")
    with session_scope(rt.db) as session:
        assert incident_store.find_open_incident(session, "ecc-storm:gpu-node-999") is None


def test_an_unknown_node_fails_the_incident_and_frees_its_target(rt: Runtime) -> None:
    """An incident opened about a node the cluster does not have (an alert's) fails at start."""
    loaded = rt.catalog.get("ecc-storm")
    with session_scope(rt.db) as session:
        incident, _ = lifecycle.open_or_attach(
            session,
            runbook="ecc-storm",
            target="gpu-node-999",
            target_kind="node",
            severity="critical",
            title="ECC storm on gpu-node-999",
            fired_at=None,
            detected_at=rt.clock.now(),
            actor="alertmanager",
        )
        incident_id = int(incident.id or 0)
    with pytest.raises(NotFound):
        rt.engine.start(
            loaded, inputs={"node": "gpu-node-999"}, incident_id=incident_id, requester="cli:alice"
        )
    assert state_of(rt, incident_id) == "failed"
    reasons = [e.summary for e in events(rt, incident_id) if e.kind == "step_failed"]
    assert any("could not start" in r and "gpu-node-999" in r for r in reasons)
    with session_scope(rt.db) as session:
        assert incident_store.find_open_incident(session, "ecc-storm:gpu-node-999") is None


def test_a_run_that_raises_ends_its_incident_failed(rt: Runtime) -> None:
    incident_id = fire(rt)

    def broken(step_id: str, output: Mapping[str, Any]) -> None:
        raise RuntimeError("listener bug")

    with pytest.raises(RuntimeError):
        rt.engine.start(
            rt.catalog.get("ecc-storm"),
            inputs={"node": NODE},
            incident_id=incident_id,
            requester="alertmanager",
            on_step=broken,
        )
    assert state_of(rt, incident_id) == "failed"
    kinds = [e.kind for e in events(rt, incident_id)]
    assert "step_failed" in kinds and kinds[-1] == "state_changed"


def test_work_whose_workers_keep_dying_is_given_up_and_its_incident_fails(rt: Runtime) -> None:
    incident_id = fire(rt)
    work_id = triage_work(rt, incident_id)
    later = SystemClock().now()
    for attempt in (2, 3):
        later += TERMS.lease
        with session_scope(rt.db) as session:
            claimed = work_store.claim_work(
                session, work_id=work_id, owner=f"dies-{attempt}", at=later, lease=TERMS.lease
            )
            assert claimed is not None and claimed.attempts == attempt
    b = replica(rt, later=TERMS.lease * 3)
    assert b.work.give_up_exhausted() == [incident_id]
    assert state_of(rt, incident_id) == "failed"
    reasons = [e.summary for e in events(rt, incident_id) if e.kind == "step_failed"]
    assert any("started 3 times" in r for r in reasons)
    assert b.work.due_work() == []
