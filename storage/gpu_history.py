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

from sqlalchemy import bindparam
from sqlalchemy import select as core_select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, col, select

from storage.db import read_only, translate
from storage.errors import InvalidValueError
from storage.tables import GpuHistoryRow

KINDS = frozenset({"finding", "action"})


_TABLE = GpuHistoryRow.__table__  # type: ignore[attr-defined]
_FACT = ("run_id", "gpu_key", "kind", "what")
"""The unique fact (uq_gpu_history_run_fact): a second recording of it is the same fact."""
_DEFAULTS: dict[str, Any] = {
    "uuid": None, "serial": None, "gpu": None, "incident_id": None, "detail": ""
}  # fmt: skip
_INSERT_NEW = {
    name: dialect.insert(_TABLE).on_conflict_do_nothing(index_elements=_FACT).returning(_TABLE.c.id)
    for name, dialect in (("sqlite", sqlite), ("postgresql", postgresql))
}
"""Per dialect: RETURNING the new row's id, so a skipped fact returns no row."""


def record_facts(session: Session, facts: Sequence[Mapping[str, Any]]) -> int:
    """Store facts shaped like GpuHistoryRow's fields; a fact already stored for the same run
    (or by a replica racing this one) is skipped. Returns how many were new. One INSERT ... ON
    CONFLICT DO NOTHING per fact: no read first, no savepoint."""
    insert_new = _INSERT_NEW[session.get_bind().dialect.name]
    added = 0
    for fact in facts:
        if fact.get("kind") not in KINDS:
            kind = fact.get("kind")
            raise InvalidValueError(f"unknown GPU history kind '{kind}' (finding, action)")
        added += len(session.execute(insert_new, _DEFAULTS | dict(fact)).all())
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


_FACTS_SINCE = (
    core_select(_TABLE.c.gpu_key, _TABLE.c.kind, _TABLE.c.what, _TABLE.c.at, _TABLE.c.incident_id)
    .where(
        _TABLE.c.gpu_key.in_(bindparam("keys", expanding=True)), _TABLE.c.at >= bindparam("since")
    )
    .order_by(_TABLE.c.at, _TABLE.c.id)
)


def read_history_uncommitted(
    engine: Engine, *, keys: Collection[str], since: datetime
) -> list[tuple[Any, ...]]:
    """`read_history`'s facts as (gpu_key, kind, what, at, incident_id): what a look back counts,
    on a connection of its own that only reads: it never commits, so a run's look back costs no
    write transaction. One prepared Core statement, no ORM objects."""
    if not keys:
        return []
    try:
        with read_only(engine).connect() as connection:
            found = connection.execute(_FACTS_SINCE, {"keys": sorted(keys), "since": since})
            return [tuple(row) for row in found]
    except SQLAlchemyError as err:
        raise translate(err, engine=engine) from err
