"""Resolution order across replicas (issue 20): whether an incident still has a firing alert
is decided by the alerts' own times, not by the receiving replica's clock.

Covers: a firing alert received by a replica whose clock runs ten minutes ahead, then its
resolution received by a replica whose clock is behind, leaves nothing firing (ordering by
receive time said "still firing" and the incident never resolved); a re-fire that starts after
the resolution's end is firing again; equal own times fall back to the receive order.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from storage import alerts as alert_store
from storage.db import create_schema, make_engine, session_scope
from tests.incidents.incident_helpers import open_ecc_storm

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'oncall.db'}")
    create_schema(engine)
    with session_scope(engine) as session:
        open_ecc_storm(session, FakeClock(T0), fired=None)
    yield engine
    engine.dispose()


def store(
    engine: Engine, status: str, *, starts: datetime, ends: datetime | None, received: datetime
) -> None:
    new = alert_store.NewAlert(
        fingerprint="f1", status=status, starts_at=starts, ends_at=ends, alertname="GPUEccStorm"
    )
    with session_scope(engine) as session:
        (row,) = alert_store.record_alerts(session, [new], received_at=received)
        alert_store.attach_alerts(session, alert_ids=[row.id], incident_id=1, runbook="ecc-storm")


def firing(engine: Engine) -> bool:
    with session_scope(engine) as session:
        return alert_store.has_firing_alerts(session, 1)


def test_a_resolution_received_by_a_replica_behind_still_resolves(engine: Engine) -> None:
    store(engine, "firing", starts=T0, ends=None, received=T0 + timedelta(minutes=10))
    store(
        engine,
        "resolved",
        starts=T0,
        ends=T0 + timedelta(minutes=5),
        received=T0 + timedelta(minutes=1),
    )
    assert not firing(engine)


def test_a_re_fire_after_the_resolution_is_firing(engine: Engine) -> None:
    store(engine, "firing", starts=T0, ends=None, received=T0)
    store(
        engine,
        "resolved",
        starts=T0,
        ends=T0 + timedelta(minutes=5),
        received=T0 + timedelta(minutes=6),
    )
    store(
        engine,
        "firing",
        starts=T0 + timedelta(minutes=7),
        ends=None,
        received=T0 + timedelta(minutes=2),
    )
    assert firing(engine)


def test_equal_own_times_fall_back_to_the_receive_order(engine: Engine) -> None:
    store(engine, "resolved", starts=T0 - timedelta(minutes=1), ends=T0, received=T0)
    store(engine, "firing", starts=T0, ends=None, received=T0 + timedelta(seconds=1))
    assert firing(engine)
