"""Rows of `figure_buckets` (the MTTR histograms of `/metrics`) and the incident columns they
are computed from. Keyword-only, one session passed in, no commits here.

What an incident contributes (the formulas) is decided in `bot.incidents.figures`; this module
only adds counts with upserts that two replicas can run at once without losing an increment,
reads them back, and gives the rebuild its lock and its incident stream.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import bindparam, delete, exists, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session

from storage.errors import StorageError
from storage.tables import FigureBucket, Incident

BucketKey = tuple[str, str, str, str, int]
"""(figure, runbook, layer, severity, bucket index)."""
Counts = Mapping[BucketKey, tuple[int, int]]
"""Bucket key -> (observations, sum of the figures in microseconds)."""

_BUCKETS: Any = FigureBucket.__table__  # type: ignore[attr-defined]
_INCIDENTS: Any = Incident.__table__  # type: ignore[attr-defined]
_IDS_PER_QUERY = 5000
_KEY_COLUMNS = ("figure", "runbook", "layer", "severity", "bucket")
STAMP_COLUMNS = (
    "fired_at",
    "detected_at",
    "acknowledged_at",
    "diagnosed_at",
    "mitigated_at",
    "resolved_at",
)
"""The incident timestamps the figures are computed from (`mttr.compute_figures` arguments)."""
CHECK = "check"
"""`incidents.kind` of a diagnosis that found nothing: left out of every MTTR figure."""
FAILED = "failed"
"""`incidents.kind` of an incident whose run could not start or never finished (state `failed`,
and still after someone resolves it by hand): left out of every MTTR figure."""
COUNTED = "incident"
"""The only `incidents.kind` that has MTTR figures."""
VERSION: BucketKey = ("_version", "", "", "", 0)
"""The row whose `observations` is bumped by every `add_counts` that changes something, in the
same upsert: a reader that saw version N and sees N again knows no bucket changed (a scrape then
reads one row, not every bucket). Never cleared, so it only grows."""


@dataclass(frozen=True)
class IncidentFigureColumns:
    """The columns of one incident that decide its figures and their labels."""

    id: int
    runbook: str
    layer: str | None
    severity: str
    stamps: Mapping[str, datetime | None]
    gpu_hours: float | None = None  # `gpu_hours_lost`, known once resolved
    state: str = ""
    kind: str = ""  # `check`: a diagnosis that found nothing (counted by state only)


def add_counts(session: Session, counts: Counts) -> None:
    """Add `counts` (positive or negative) to the buckets in one upsert; zero changes are
    skipped. Rows are written in key order, so two transactions never deadlock on them."""
    values = [
        dict(zip(_KEY_COLUMNS, key, strict=True)) | {"observations": n, "micros": micros}
        for key, (n, micros) in sorted(counts.items())
        if n or micros
    ]
    if not values:
        return
    bump = dict(zip(_KEY_COLUMNS, VERSION, strict=True)) | {"observations": 1, "micros": 0}
    values = sorted([*values, bump], key=lambda row: tuple(row[k] for k in _KEY_COLUMNS))
    session.connection().execute(_upsert(session.get_bind().dialect.name), values)


@cache
def _upsert(dialect: str) -> Any:
    """`INSERT ... ON CONFLICT (key) DO UPDATE SET n = n + excluded.n` (built once per dialect)."""
    if dialect == "sqlite":
        statement: Any = sqlite.insert(_BUCKETS)
    elif dialect == "postgresql":
        statement = postgresql.insert(_BUCKETS)
    else:
        raise StorageError(f"figure_buckets needs SQLite or PostgreSQL, not {dialect}")
    return statement.on_conflict_do_update(
        index_elements=list(_KEY_COLUMNS),
        set_={
            "observations": _BUCKETS.c.observations + statement.excluded.observations,
            "micros": _BUCKETS.c.micros + statement.excluded.micros,
        },
    )


def read_counts(session: Session) -> dict[BucketKey, tuple[int, int]]:
    """Every bucket row (including emptied ones, not the version row), as `Counts`."""
    columns = [_BUCKETS.c[name] for name in _KEY_COLUMNS]
    statement = select(*columns, _BUCKETS.c.observations, _BUCKETS.c.micros).where(
        _BUCKETS.c.figure != VERSION[0]
    )
    return {
        (str(row.figure), str(row.runbook), str(row.layer), str(row.severity), int(row.bucket)): (
            int(row.observations),
            int(row.micros),
        )
        for row in session.connection().execute(statement)
    }


def read_version(session: Session) -> int | None:
    """The buckets' version (`VERSION`): None on a database whose buckets were last written
    before versions were kept."""
    key = (_BUCKETS.c[name] == value for name, value in zip(_KEY_COLUMNS, VERSION, strict=True))
    statement = select(_BUCKETS.c.observations).where(*key)
    found = session.connection().execute(statement).scalar()
    return None if found is None else int(found)


def incident_columns(
    session: Session, ids: Collection[int], *, lock: bool
) -> dict[int, IncidentFigureColumns]:
    """The figure columns of these incidents as the database holds them; `lock`: row-locked
    until the transaction ends (PostgreSQL `FOR UPDATE`; SQLite's write transaction already
    excludes other writers), so no other replica changes them between this read and our write."""
    found: dict[int, IncidentFigureColumns] = {}
    ordered = sorted(ids)
    for start in range(0, len(ordered), _IDS_PER_QUERY):
        chunk = ordered[start : start + _IDS_PER_QUERY]
        found.update((row.id, row) for row in _rows(session, _by_ids(lock), {"ids": chunk}))
    return found


@cache
def _by_ids(lock: bool) -> Any:
    """`incident_columns`' query, built once: a transaction that changes an incident runs it
    twice (its row before, at the first flush, and after, at commit)."""
    ids: Any = bindparam("ids", expanding=True)
    statement = _columns_query().where(_INCIDENTS.c.id.in_(ids)).order_by(_INCIDENTS.c.id)
    return statement.with_for_update() if lock else statement


def iter_incident_columns(
    session: Session, *, batch: int = 10_000
) -> Iterator[IncidentFigureColumns]:
    """The figure columns of every incident, in id order, `batch` rows per query."""
    after = 0
    while True:
        statement = (
            _columns_query()
            .where(_INCIDENTS.c.id > after)
            .order_by(_INCIDENTS.c.id)
            .limit(batch)
        )
        rows = list(_rows(session, statement))
        yield from rows
        if len(rows) < batch:
            return
        after = rows[-1].id


def lock_for_rebuild(session: Session) -> None:
    """Block every other writer of the buckets until this transaction ends (PostgreSQL: a table
    lock that waits for transactions already holding deltas; SQLite: the write transaction)."""
    if session.get_bind().dialect.name == "postgresql":
        session.connection().exec_driver_sql("LOCK TABLE figure_buckets IN EXCLUSIVE MODE")


def clear_counts(session: Session) -> None:
    """Delete every bucket row but the version (before a rebuild, which bumps it)."""
    session.connection().execute(delete(_BUCKETS).where(_BUCKETS.c.figure != VERSION[0]))


def has_counts(session: Session, *, figure: str | None = None) -> bool:
    """Whether any bucket row exists (of `figure`, when given; the version row is none)."""
    query = exists().select_from(_BUCKETS).where(_BUCKETS.c.figure != VERSION[0])
    if figure is not None:
        query = query.where(_BUCKETS.c.figure == figure)
    return bool(session.connection().execute(select(query)).scalar())


def has_incidents(session: Session) -> bool:
    return bool(session.connection().execute(select(exists().select_from(_INCIDENTS))).scalar())


@cache
def _columns_query() -> Any:
    c = _INCIDENTS.c
    stamps = (c[name] for name in STAMP_COLUMNS)
    return select(c.id, c.runbook, c.layer, c.severity, c.gpu_hours_lost, c.state, c.kind, *stamps)


def _rows(
    session: Session, statement: Any, params: Mapping[str, Any] | None = None
) -> Iterator[IncidentFigureColumns]:
    for row in session.connection().execute(statement, params):
        yield IncidentFigureColumns(
            id=int(row.id),
            runbook=row.runbook,
            layer=row.layer,
            severity=row.severity,
            stamps={name: getattr(row, name) for name in STAMP_COLUMNS},
            gpu_hours=row.gpu_hours_lost,
            state=row.state,
            kind=row.kind,
        )
