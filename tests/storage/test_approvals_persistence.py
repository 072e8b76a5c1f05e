"""Approvals in the database.

Covers: requesting the same (run, step) approval twice keeps the first request (enforced by
the unique constraint); a pending approval survives a new engine (a restart) and can be
decided there; a decided approval cannot be decided again, and the error says by whom; an
approval past its expiry cannot be approved but can be expired; `expire_approvals` expires
only overdue ones; lookups by run or by incident need exactly one of the two.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from storage import approvals
from storage.db import make_engine, session_scope
from storage.errors import ApprovalExpiredError, ApprovalNotPendingError, InvalidValueError

TTL = timedelta(minutes=30)


def _request(
    engine: Engine, run_id: str, incident_id: int, clock: FakeClock, **payload: str
) -> int:
    with session_scope(engine) as session:
        row = approvals.request_approval(
            session,
            run_id=run_id,
            incident_id=incident_id,
            step_id="fix",
            payload=payload or {"proposals": "cordon"},
            at=clock.now(),
            expires_at=clock.now() + TTL,
        )
        assert row.id is not None
        return row.id


def test_requesting_the_same_step_twice_keeps_the_first_request(
    engine: Engine, run_id: str, incident_id: int, clock: FakeClock
) -> None:
    first = _request(engine, run_id, incident_id, clock)
    clock.advance(timedelta(minutes=1))
    second = _request(engine, run_id, incident_id, clock, proposals="drain")
    assert first == second
    with session_scope(engine) as session:
        pending = approvals.pending_approval_for(session, run_id=run_id)
        assert pending is not None
        assert pending.payload == {"proposals": "cordon"}


def test_a_pending_approval_survives_a_restart_and_is_decided_there(
    engine: Engine, db_url: str, run_id: str, incident_id: int, clock: FakeClock
) -> None:
    _request(engine, run_id, incident_id, clock)
    engine.dispose()
    restarted = make_engine(db_url)
    clock.advance(timedelta(minutes=5))
    with session_scope(restarted) as session:
        pending = approvals.pending_approval_for(session, incident_id=incident_id)
        assert pending is not None and pending.id is not None
        decided = approvals.decide_approval(
            session,
            approval_id=pending.id,
            state="approved",
            actor="U042",
            reason="lgtm",
            at=clock.now(),
        )
        assert (decided.state, decided.actor, decided.decided_at) == (
            "approved",
            "U042",
            clock.now(),
        )
    with session_scope(restarted) as session:
        assert approvals.pending_approval_for(session, run_id=run_id) is None
    restarted.dispose()


def test_a_decided_approval_cannot_be_decided_again(
    engine: Engine, other_engine: Engine, run_id: str, incident_id: int, clock: FakeClock
) -> None:
    approval_id = _request(engine, run_id, incident_id, clock)
    with session_scope(engine) as session:
        approvals.decide_approval(
            session, approval_id=approval_id, state="rejected", actor="U1", at=clock.now()
        )
    with (
        pytest.raises(ApprovalNotPendingError, match="already rejected by U1"),
        session_scope(other_engine) as session,
    ):
        approvals.decide_approval(
            session, approval_id=approval_id, state="approved", actor="U2", at=clock.now()
        )


def test_an_expired_approval_cannot_be_approved_but_can_be_expired(
    engine: Engine, run_id: str, incident_id: int, clock: FakeClock
) -> None:
    approval_id = _request(engine, run_id, incident_id, clock)
    clock.advance(TTL)
    with (
        pytest.raises(ApprovalExpiredError, match="can no\\s+longer be approved"),
        session_scope(engine) as session,
    ):
        approvals.decide_approval(
            session, approval_id=approval_id, state="approved", actor="U1", at=clock.now()
        )
    with session_scope(engine) as session:
        expired = approvals.expire_approvals(session, at=clock.now())
        assert [(a.id, a.state, a.actor) for a in expired] == [(approval_id, "expired", "bot")]


def test_expire_approvals_leaves_approvals_that_are_not_yet_due(
    engine: Engine, run_id: str, incident_id: int, clock: FakeClock
) -> None:
    _request(engine, run_id, incident_id, clock)
    clock.advance(TTL - timedelta(seconds=1))
    with session_scope(engine) as session:
        assert approvals.expire_approvals(session, at=clock.now()) == []
        assert approvals.pending_approval_for(session, run_id=run_id) is not None


def test_an_unknown_decision_lists_the_valid_ones(
    engine: Engine, run_id: str, incident_id: int, clock: FakeClock
) -> None:
    approval_id = _request(engine, run_id, incident_id, clock)
    with (
        pytest.raises(InvalidValueError, match="approved, rejected, expired"),
        session_scope(engine) as session,
    ):
        approvals.decide_approval(
            session, approval_id=approval_id, state="ok", actor="U1", at=clock.now()
        )


def test_pending_lookup_needs_exactly_one_of_run_or_incident(engine: Engine) -> None:
    with session_scope(engine) as session, pytest.raises(TypeError, match="exactly one"):
        approvals.pending_approval_for(session)
