"""The durable work queue: leases decided by the database.

Covers: the same key is recorded once; of eight claimers on two engines (two processes) racing
for one row exactly one wins, on SQLite and on PostgreSQL; a live lease cannot be claimed, an
expired one is taken over by exactly one new claimer and counts an attempt; a heartbeat keeps
a lease alive; a worker whose lease was taken over cannot finish the row; released rows are
claimable at once without counting the attempt; work due later is not claimable before it is
due; rows claimed `max_attempts` times are listed as exhausted and can be given up once.
"""

from __future__ import annotations

import threading
from datetime import timedelta

from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from storage import incidents, work
from storage.db import create_schema, make_engine, session_scope

LEASE = timedelta(seconds=30)


def _add(engine: Engine, incident_id: int, clock: FakeClock, *, key: str = "triage:r1") -> int:
    with session_scope(engine) as session:
        row, added = work.add_work(
            session,
            key=key,
            kind="triage",
            incident_id=incident_id,
            run_id="r1",
            at=clock.now(),
            payload={"runbook": "ecc-storm"},
        )
        assert row.id is not None
        return row.id


def _claim(engine: Engine, work_id: int, owner: str, clock: FakeClock) -> bool:
    with session_scope(engine) as session:
        row = work.claim_work(session, work_id=work_id, owner=owner, at=clock.now(), lease=LEASE)
        return row is not None


def test_the_same_key_is_recorded_once(engine: Engine, incident_id: int, clock: FakeClock) -> None:
    first = _add(engine, incident_id, clock)
    assert _add(engine, incident_id, clock) == first
    with session_scope(engine) as session:
        assert len(work.list_work(session, incident_id=incident_id)) == 1


def test_one_of_eight_concurrent_claimers_on_two_engines_wins(
    engine: Engine, other_engine: Engine, incident_id: int, clock: FakeClock
) -> None:
    _race(engine, other_engine, incident_id, clock)


def test_one_of_eight_concurrent_claimers_on_postgres_wins(
    postgres_url: str, clock: FakeClock
) -> None:
    engine, other_engine = make_engine(postgres_url), make_engine(postgres_url)
    create_schema(engine)
    with session_scope(engine) as session:
        incident = incidents.create_incident(
            session,
            runbook="ecc-storm",
            target="gpu-node-03",
            target_kind="node",
            severity="critical",
            title="ECC error storm on gpu-node-03",
            at=clock.now(),
        )
        assert incident.id is not None
    try:
        _race(engine, other_engine, incident.id, clock)
    finally:
        engine.dispose()
        other_engine.dispose()


def _race(engine: Engine, other_engine: Engine, incident_id: int, clock: FakeClock) -> None:
    work_id = _add(engine, incident_id, clock)
    barrier = threading.Barrier(8)
    wins: list[str] = []

    def claim(db: Engine, owner: str) -> None:
        barrier.wait()
        if _claim(db, work_id, owner, clock):
            wins.append(owner)

    threads = [
        threading.Thread(target=claim, args=(db, f"w{i}"))
        for i, db in enumerate([engine, other_engine] * 4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(wins) == 1
    with session_scope(engine) as session:
        row = work.get_work(session, "triage:r1")
        assert row is not None and row.owner == wins[0] and row.attempts == 1


def test_an_expired_lease_is_taken_over_once_and_counts_an_attempt(
    engine: Engine, other_engine: Engine, incident_id: int, clock: FakeClock
) -> None:
    work_id = _add(engine, incident_id, clock)
    assert _claim(engine, work_id, "dead", clock)
    assert not _claim(other_engine, work_id, "alive", clock)  # the lease still runs
    clock.advance(LEASE)
    assert _claim(other_engine, work_id, "alive", clock)
    assert not _claim(engine, work_id, "third", clock)
    with session_scope(engine) as session:
        row = work.get_work(session, "triage:r1")
        assert row is not None and (row.owner, row.attempts) == ("alive", 2)
        # the dead worker's late finish is refused: the new owner's result stands
        done = work.finish_work(session, work_id=work_id, owner="dead", at=clock.now())
        assert not done
        assert work.finish_work(session, work_id=work_id, owner="alive", at=clock.now())
        assert work.list_claimable(session, at=clock.now() + LEASE * 10) == []


def test_a_heartbeat_keeps_the_lease_alive(
    engine: Engine, incident_id: int, clock: FakeClock
) -> None:
    work_id = _add(engine, incident_id, clock)
    assert _claim(engine, work_id, "busy", clock)
    clock.advance(LEASE * 0.8)
    with session_scope(engine) as session:
        assert work.heartbeat(session, owner="busy", at=clock.now(), lease=LEASE) == 1
    clock.advance(LEASE * 0.8)
    assert not _claim(engine, work_id, "other", clock)


def test_released_work_is_claimable_at_once_without_counting_the_attempt(
    engine: Engine, incident_id: int, clock: FakeClock
) -> None:
    work_id = _add(engine, incident_id, clock)
    assert _claim(engine, work_id, "stopping", clock)
    with session_scope(engine) as session:
        assert work.release(session, owner="stopping") == 1
    assert _claim(engine, work_id, "next", clock)
    with session_scope(engine) as session:
        row = work.get_work(session, "triage:r1")
        assert row is not None and row.attempts == 1


def test_work_due_later_waits_until_it_is_due(
    engine: Engine, incident_id: int, clock: FakeClock
) -> None:
    with session_scope(engine) as session:
        row, _ = work.add_work(
            session,
            key="timer:r1:verify:1",
            kind="timer",
            incident_id=incident_id,
            run_id="r1",
            at=clock.now(),
            due_at=clock.now() + timedelta(minutes=5),
        )
        work_id = row.id
    assert work_id is not None
    assert not _claim(engine, work_id, "early", clock)
    clock.advance(timedelta(minutes=5))
    assert _claim(engine, work_id, "on-time", clock)


def test_work_claimed_max_attempts_times_is_exhausted_and_given_up_once(
    engine: Engine, incident_id: int, clock: FakeClock
) -> None:
    work_id = _add(engine, incident_id, clock)
    for attempt in range(3):
        assert _claim(engine, work_id, f"dies-{attempt}", clock)
        clock.advance(LEASE)
    with session_scope(engine) as session:
        rows = work.exhausted(session, at=clock.now(), max_attempts=3)
        assert [r.id for r in rows] == [work_id]
        assert work.give_up(session, work_id=work_id, at=clock.now(), error="gave up")
        assert not work.give_up(session, work_id=work_id, at=clock.now(), error="again")
        row = work.get_work(session, "triage:r1")
        assert row is not None and (row.state, row.last_error) == ("failed", "gave up")
