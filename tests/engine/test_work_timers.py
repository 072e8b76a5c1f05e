"""Verification as a durable timer: on wall-clock time (a RunEngine that neither passes timers
at once nor follows them), a verification that must poll again checkpoints and leaves a `timer`
work row; the run is resumed when the row is due.

Covers: the resumption returns at once with status `waiting` and a timer row due one interval
later, not claimable before; a due timer resumes the run, which polls again and ends with the
verification passed and the incident mitigated, every timer row done; a timer claimed by a
worker that died is taken over by another worker once its lease expired.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from engine.test_work_takeover import NODE, events, fire, state_of

from bot.clock import FakeClock, SystemClock
from bot.config import Settings
from bot.engine.leases import LeaseKeeper, LeaseTerms
from bot.engine.running import RunEngine, RunOutcome
from bot.engine.state import PlanTerms
from bot.wiring.runtime import Runtime, open_runtime
from storage import work as work_store
from storage.db import session_scope

TERMS = LeaseTerms(lease=timedelta(seconds=60), heartbeat=timedelta(seconds=600))
INTERVAL = timedelta(minutes=1)  # ecc-storm's verify interval


@pytest.fixture
def rt(settings: Settings, scenario_dir: Path) -> Iterator[Runtime]:
    scenario = scenario_dir / "ecc-dbe-storm.yaml"
    with open_runtime(settings, scenario_path=scenario, fresh=True) as runtime:
        yield runtime


def wall_engine(
    rt: Runtime, *, owner: str = "worker-a", later: timedelta = timedelta(0)
) -> RunEngine:
    leases = LeaseKeeper(
        rt.db, owner=owner, terms=TERMS, clock=FakeClock(SystemClock().now() + later)
    )
    engine = RunEngine(
        deps=replace(rt.deps, plan=PlanTerms(deadline=timedelta(0))),  # the drain runs at once
        db=rt.db,
        checkpointer=rt.engine.checkpointer,
        catalog=rt.catalog,
        leases=leases,
        inline_timers=False,
    )
    engine.follow_timers = False
    return engine


def approved(rt: Runtime, engine: RunEngine) -> tuple[int, RunOutcome]:
    incident_id = fire(rt)
    started = engine.start(
        rt.catalog.get("ecc-storm"),
        inputs={"node": NODE},
        incident_id=incident_id,
        requester="alertmanager",
    )
    return incident_id, engine.resume(started.run_id, decision="approve", actor="cli:alice")


def timers(rt: Runtime, incident_id: int) -> list[tuple[str, str]]:
    with session_scope(rt.db) as session:
        rows = work_store.list_work(session, incident_id=incident_id)
        return [(row.kind, row.state) for row in rows if row.kind == "timer"]


def test_a_verification_that_must_wait_leaves_a_timer_and_returns(rt: Runtime) -> None:
    engine = wall_engine(rt)
    incident_id, outcome = approved(rt, engine)
    assert outcome.status == "waiting"
    assert "confirm" not in outcome.steps  # the verification has not ended
    assert timers(rt, incident_id) == [("timer", "pending")]
    assert engine.work.due_work() == []  # not due before its interval has passed
    rt.clock.advance(INTERVAL)  # type: ignore[attr-defined]
    assert len(engine.work.due_work()) == 1


def test_due_timers_resume_the_run_until_the_verification_passes(rt: Runtime) -> None:
    engine = wall_engine(rt)
    incident_id, outcome = approved(rt, engine)
    for _ in range(10):
        if outcome.status != "waiting":
            break
        rt.clock.advance(INTERVAL)  # type: ignore[attr-defined]
        (due,) = engine.work.due_work()
        resumed = engine.work.perform(due)
        assert resumed is not None
        outcome = resumed
    assert outcome.status == "completed"
    assert outcome.steps["confirm"]["status"] == "passed"
    assert "verification_passed" in [e.kind for e in events(rt, incident_id)]
    assert state_of(rt, incident_id) == "monitoring"  # the alert still fires
    assert {state for _, state in timers(rt, incident_id)} == {"done"}


def test_a_timer_left_by_a_dead_worker_is_taken_over(rt: Runtime) -> None:
    dead = wall_engine(rt)
    incident_id, outcome = approved(rt, dead)
    assert outcome.status == "waiting"
    rt.clock.advance(INTERVAL * 6)  # type: ignore[attr-defined]
    (due,) = dead.work.due_work()
    with session_scope(rt.db) as session:  # claimed, then the worker died
        claimed = work_store.claim_work(
            session,
            work_id=due,
            owner="worker-a",
            at=dead.work.leases.now(),
            lease=TERMS.lease,
            due_by=rt.clock.now(),
        )
        assert claimed is not None
    alive = wall_engine(rt, owner="worker-b", later=TERMS.lease)
    assert alive.work.due_work() == [due]
    resumed = alive.work.perform(due)
    assert resumed is not None and resumed.status == "completed"
    assert resumed.steps["confirm"]["status"] == "passed"
