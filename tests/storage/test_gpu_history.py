"""Fault history per GPU (issue 14, part 3), on SQLite and PostgreSQL.

Aspects: facts about a GPU are read back by its key, oldest first, only since the given time,
never another GPU's; the same fact of the same run is stored once (a re-recorded step, or two
replicas racing, cannot double-count a reset); an unknown kind is refused with the valid ones;
the engine adapter hands back facts with their incident reference.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from bot.diagnosis.history import GpuFact
from bot.engine.gpu_records import StoredGpuHistory
from storage import gpu_history
from storage.db import session_scope
from storage.errors import InvalidValueError
from tests.storage.conftest import T0

UUID = "GPU-5f3c0b8e-1d2a-4c6b-9e7f-0a1b2c3d4e5f"


def fact(
    what: str, *, at: datetime, run: str = "run-1", kind: str = "finding", **extra: Any
) -> dict[str, Any]:
    return {
        "gpu_key": UUID,
        "uuid": UUID,
        "node": "gpu-node-03",
        "gpu": "5",
        "kind": kind,
        "what": what,
        "run_id": run,
        "at": at,
    } | extra


def test_facts_are_read_back_by_gpu_since_a_time_oldest_first(engine: Engine) -> None:
    with session_scope(engine) as session:
        added = gpu_history.record_facts(
            session,
            [
                fact("xid 48", at=T0 - timedelta(days=40), run="r0"),
                fact("xid 48", at=T0 - timedelta(days=9), run="r2"),
                fact("gpu_reset", at=T0 - timedelta(days=9), run="r2", kind="action"),
                fact("xid 48", at=T0 - timedelta(days=20), run="r1"),
                fact("xid 48", at=T0, run="r3", gpu_key="GPU-other"),
            ],
        )
    assert added == 5
    with session_scope(engine) as session:
        rows = gpu_history.read_history(session, keys=[UUID], since=T0 - timedelta(days=30))
        seen = [(r.run_id, r.kind, r.what) for r in rows]
    assert seen == [
        ("r1", "finding", "xid 48"),
        ("r2", "finding", "xid 48"),
        ("r2", "action", "gpu_reset"),
    ]


def test_the_same_fact_of_the_same_run_is_stored_once(
    engine: Engine, other_engine: Engine
) -> None:
    reset = fact("gpu_reset", at=T0, kind="action")
    with session_scope(engine) as session:
        assert gpu_history.record_facts(session, [reset]) == 1
    with session_scope(other_engine) as session:
        assert gpu_history.record_facts(session, [reset, reset | {"run_id": "run-2"}]) == 1
    with session_scope(engine) as session:
        rows = gpu_history.read_history(session, keys=[UUID], since=T0 - timedelta(days=1))
    assert sorted(r.run_id for r in rows) == ["run-1", "run-2"]


def test_an_unknown_kind_is_refused_naming_the_valid_ones(engine: Engine) -> None:
    rumour = fact("xid 48", at=T0, kind="rumour")
    refused = pytest.raises(InvalidValueError, match="finding, action")
    with session_scope(engine) as session, refused:
        gpu_history.record_facts(session, [rumour])


def test_the_engine_adapter_reads_facts_with_their_incident(
    engine: Engine, incident_id: int
) -> None:
    with session_scope(engine) as session:
        gpu_history.record_facts(session, [fact("xid 79", at=T0, incident_id=incident_id)])
    facts = StoredGpuHistory(engine).read([UUID], since=T0 - timedelta(hours=1))
    assert facts == [GpuFact(UUID, "finding", "xid 79", T0, incident=f"INC-{incident_id}")]
    assert StoredGpuHistory(engine).read([], since=T0) == []
