"""Fault history per GPU: findings and actions keyed by the GPU's UUID, kept across incidents
(keyword-only queries, one session passed in, no commits here).

Written by the run recorder when a verdict names a GPU and when an action touches one; read
before proposing, so the third XID 48 on a GPU in a month is not answered with a third reset.
Re-recording the same fact of the same run is a no-op (unique per run, GPU, kind and what).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlmodel import Session, col, select

from storage.db import translate
from storage.errors import InvalidValueError
from storage.tables import GpuHistoryRow

KINDS = frozenset({"finding", "action"})


def record_facts(session: Session, facts: Sequence[Mapping[str, Any]]) -> int:
    """Store facts shaped like GpuHistoryRow's fields; a fact already stored for the same run
    is skipped. Returns how many were new."""
    added = 0
    for fact in facts:
        if fact.get("kind") not in KINDS:
            kind = fact.get("kind")
            raise InvalidValueError(f"unknown GPU history kind '{kind}' (finding, action)")
        exists = session.exec(
            select(GpuHistoryRow.id).where(
                GpuHistoryRow.run_id == fact["run_id"],
                GpuHistoryRow.gpu_key == fact["gpu_key"],
                GpuHistoryRow.kind == fact["kind"],
                GpuHistoryRow.what == fact["what"],
            )
        ).first()
        if exists is not None:
            continue
        try:
            with session.begin_nested():
                session.add(GpuHistoryRow(**fact))
        except IntegrityError:  # a replica recorded the same fact first: that is the same fact
            continue
        added += 1
    return added


def read_history(
    session: Session, *, keys: Collection[str], since: datetime
) -> list[GpuHistoryRow]:
    """Every fact about the GPUs `keys` at or after `since`, oldest first."""
    if not keys:
        return []
    statement = (
        select(GpuHistoryRow)
        .where(col(GpuHistoryRow.gpu_key).in_(sorted(keys)), GpuHistoryRow.at >= since)
        .order_by(col(GpuHistoryRow.at), col(GpuHistoryRow.id))
    )
    return list(session.exec(statement))


def read_history_uncommitted(
    engine: Engine, *, keys: Collection[str], since: datetime
) -> list[GpuHistoryRow]:
    """`read_history` in a session of its own that only reads: it never commits, so a run's
    look back costs no write transaction."""
    try:
        with Session(engine, expire_on_commit=False) as session:
            return read_history(session, keys=keys, since=since)
    except SQLAlchemyError as err:
        raise translate(err, engine=engine) from err
