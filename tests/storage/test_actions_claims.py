"""Exactly-once action claims through the unique idempotency key.

Covers: claiming the same key twice claims once and returns the same row; a second engine
(another process or replica) on the same file cannot claim it either, even when both claim
from threads at once; a second claim sees the recorded result after finish; finishing twice is
refused; an expired lease lets exactly one new claimer take over while a live lease does not;
integrity errors other than the key (an unknown run) are not mistaken for a duplicate.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from storage import actions
from storage.db import session_scope
from storage.errors import ActionNotRunningError, ConflictError, RecordNotFoundError

KEY = "5d41402abc4b2a76b9719d911017c592"


def _claim(
    engine: Engine, run_id: str, clock: FakeClock, *, lease: timedelta | None = None
) -> tuple[int | None, bool]:
    with session_scope(engine) as session:
        row, claimed = actions.claim_action(
            session,
            key=KEY,
            run_id=run_id,
            step_id="act",
            action="cordon",
            target="gpu-node-03",
            params={"reason": "ecc"},
            at=clock.now(),
            lease=lease,
        )
        return row.id, claimed


def test_claiming_the_same_key_twice_claims_once(
    engine: Engine, run_id: str, clock: FakeClock
) -> None:
    first = _claim(engine, run_id, clock)
    second = _claim(engine, run_id, clock)
    assert first[1] is True and second[1] is False
    assert first[0] == second[0]


def test_a_second_engine_on_the_same_file_cannot_claim_again(
    engine: Engine, other_engine: Engine, run_id: str, clock: FakeClock
) -> None:
    assert _claim(engine, run_id, clock)[1] is True
    assert _claim(other_engine, run_id, clock)[1] is False


def test_concurrent_claims_from_two_engines_claim_once(
    engine: Engine, other_engine: Engine, run_id: str, clock: FakeClock
) -> None:
    results: list[bool] = []
    barrier = threading.Barrier(8)

    def claim(on: Engine) -> None:
        barrier.wait()
        results.append(_claim(on, run_id, clock)[1])

    threads = [threading.Thread(target=claim, args=(e,)) for e in [engine, other_engine] * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False] * 7 + [True]


def test_a_later_claim_sees_the_finished_result(
    engine: Engine, run_id: str, incident_id: int, clock: FakeClock
) -> None:
    _claim(engine, run_id, clock)
    with session_scope(engine) as session:
        actions.finish_action(
            session,
            key=KEY,
            status="succeeded",
            outcome="changed",
            result={"cordoned": True},
            at=clock.now(),
        )
    with session_scope(engine) as session:
        row, claimed = actions.claim_action(
            session,
            key=KEY,
            run_id=run_id,
            step_id="act",
            action="cordon",
            target="gpu-node-03",
            params={},
            at=clock.now(),
        )
        assert claimed is False
        assert (row.status, row.outcome, row.result) == ("succeeded", "changed", {"cordoned": True})
        assert row.incident_id == incident_id  # taken from the run


def test_finishing_an_action_twice_is_refused(
    engine: Engine, run_id: str, clock: FakeClock
) -> None:
    _claim(engine, run_id, clock)
    with session_scope(engine) as session:
        actions.finish_action(session, key=KEY, status="failed", at=clock.now())
    with (
        pytest.raises(ActionNotRunningError, match="already finished as failed"),
        session_scope(engine) as session,
    ):
        actions.finish_action(session, key=KEY, status="succeeded", at=clock.now())


def test_an_expired_lease_lets_one_new_claimer_take_over(
    engine: Engine, other_engine: Engine, run_id: str, clock: FakeClock
) -> None:
    lease = timedelta(minutes=5)
    assert _claim(engine, run_id, clock, lease=lease)[1] is True
    clock.advance(timedelta(minutes=4))
    assert _claim(other_engine, run_id, clock, lease=lease)[1] is False  # still held
    clock.advance(timedelta(minutes=2))
    assert _claim(other_engine, run_id, clock, lease=lease)[1] is True  # worker presumed dead
    assert _claim(engine, run_id, clock, lease=lease)[1] is False  # the new lease holds


def test_an_unknown_run_is_not_mistaken_for_a_duplicate(
    engine: Engine, incident_id: int, clock: FakeClock
) -> None:
    with pytest.raises(RecordNotFoundError, match="no runbook run"), session_scope(engine) as s:
        actions.claim_action(
            s,
            key=KEY,
            run_id="missing",
            step_id="act",
            action="cordon",
            target="n",
            params={},
            at=clock.now(),
        )
    with pytest.raises(ConflictError, match="does not exist"), session_scope(engine) as s:
        actions.claim_action(
            s,
            key=KEY,
            run_id="missing",
            step_id="act",
            action="cordon",
            target="n",
            params={},
            at=clock.now(),
            incident_id=incident_id,
        )
