"""The MTTR histograms of `/metrics`, kept up to date in the database as incidents change.

Each incident contributes one observation per known figure (mttr.py: MTTD, MTTA, time to
diagnosis, MTTM, MTTR) to the bucket of its (runbook, layer, severity) series. A transaction
that changes incidents adds, just before it commits, the difference between their
contributions as the transaction found them and as it leaves them to `figure_buckets`
(`storage.figures.add_counts`: one upsert in key order), so a scrape reads a few hundred rows
whatever the number of incidents, and concurrent replicas never lose an increment:

- ORM changes (every `lifecycle` write: open, diagnose, acknowledge, mitigate, resolve, reopen,
  a corrected `fired_at`) are noticed by Session listeners registered when this module is
  imported (`opening` imports it; `lifecycle` imports opening). The first time a transaction
  changes an incident, its row is read as the database holds it, under a row lock (never the
  ORM's possibly stale copy); at commit the rows are read again, after every flush, so a
  rolled-back savepoint or a later change in the same transaction counts as what it left.
- Core bulk inserts (`opening.open_or_attach_many`) call `record_inserted` with the new ids.
- `rebuild` recomputes everything from the incidents (`gpu-oncall db upgrade` and start-up do it
  once, when the table is empty but incidents exist: `ensure_built`).

Bucket rows are locked only by that one upsert at commit, in key order, so two transactions
touching the same series never deadlock on them. An incident whose timestamps are in an
impossible order contributes nothing, as in the postmortem (corrupt history is reported there,
not hidden in a bucket).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta

from sqlalchemy import event, inspect
from sqlalchemy.orm import SessionTransaction, UOWTransaction
from sqlmodel import Session

from bot.incidents.mttr import DEFINITIONS, TimestampOrderError, compute_figures
from storage import figures as store
from storage.figures import STAMP_COLUMNS, BucketKey, Counts
from storage.tables import Incident

#: Bucket bounds in seconds: minutes to a day for the human-paced figures, sub-second to
#: minutes for the bot's own time to diagnosis.
HUMAN_BUCKETS = (30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 86400.0)
BOT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
LOST_GPU_SECONDS = "lost_gpu_seconds"
"""The figure of GPU time lost (bot/incidents/gpu_hours.py), observed at resolution, in
GPU-seconds: Prometheus' base unit (a dashboard divides by 3600 for GPU-hours)."""
LOST_GPU_BUCKETS = tuple(h * 3600.0 for h in (0.5, 1, 4, 8, 32, 128, 512, 2048, 8192))
BOUNDS: dict[str, tuple[float, ...]] = {
    d.name: BOT_BUCKETS if d.name == "time_to_diagnosis" else HUMAN_BUCKETS for d in DEFINITIONS
} | {LOST_GPU_SECONDS: LOST_GPU_BUCKETS}
"""Each figure's bucket bounds (mttr.DEFINITIONS names, in seconds; GPU time in GPU-seconds)."""
STATES = "incidents_by_state"
"""The pseudo-figure whose rows count incidents per state (key: (STATES, state, "", "", 0)),
maintained like the histograms so `/metrics` never scans the incidents (issue 21)."""
UNDIAGNOSED = "undiagnosed"
"""The layer label of an incident no verdict has localized yet."""

_MICRO = timedelta(microseconds=1)
_BOUND_MICROS = {name: [round(b * 1_000_000) for b in bounds] for name, bounds in BOUNDS.items()}
_TRACKED = ("runbook", "layer", "severity", "kind", "state", "gpu_hours_lost", *STAMP_COLUMNS)


def contributions(
    *,
    runbook: str,
    layer: str | None,
    severity: str,
    stamps: Mapping[str, datetime | None],
    gpu_hours: float | None = None,
) -> dict[BucketKey, tuple[int, int]]:
    """One incident's observations: bucket key -> (1, figure in microseconds; GPU time lost in
    micro-GPU-seconds). A naive timestamp contributes nothing (storage refuses to write it)."""
    if any(at is not None and at.utcoffset() is None for at in stamps.values()):
        return {}
    try:
        figures = compute_figures(**stamps)
    except TimestampOrderError:
        return {}
    labels = (runbook, layer or UNDIAGNOSED, severity)
    found: dict[BucketKey, tuple[int, int]] = {}
    for definition in DEFINITIONS:
        value: timedelta | None = getattr(figures, definition.name)
        if value is not None:
            micros = value // _MICRO
            key = (definition.name, *labels, bucket_index(definition.name, micros))
            found[key] = (1, micros)
    if gpu_hours is not None:
        micros = round(gpu_hours * 3600 * 1_000_000)
        found[(LOST_GPU_SECONDS, *labels, bucket_index(LOST_GPU_SECONDS, micros))] = (1, micros)
    return found


def bucket_index(figure: str, micros: int) -> int:
    """The index of the first bound `micros` fits under; the number of bounds for +Inf."""
    bounds = _BOUND_MICROS[figure]
    return next((i for i, bound in enumerate(bounds) if micros <= bound), len(bounds))


def tally(parts: Iterable[Counts], *, sign: int = 1) -> dict[BucketKey, tuple[int, int]]:
    """The sum of many `Counts` (times `sign`)."""
    total: dict[BucketKey, tuple[int, int]] = {}
    for part in parts:
        for key, (n, micros) in part.items():
            have_n, have_micros = total.get(key, (0, 0))
            total[key] = (have_n + sign * n, have_micros + sign * micros)
    return total


def record_inserted(session: Session, ids: Iterable[int]) -> None:
    """Count incidents inserted without the ORM (`storage.incidents.insert_incidents`): call it
    in the inserting transaction with the ids actually inserted; they are counted at commit."""
    touched = _touched(session)
    for incident_id in ids:
        touched.setdefault(incident_id, None)


def read_counts(session: Session) -> dict[BucketKey, tuple[int, int]]:
    """The maintained buckets, for `/metrics`."""
    return store.read_counts(session)


def read_version(session: Session) -> int | None:
    """The buckets' version, bumped by every change (`storage.figures.VERSION`)."""
    return store.read_version(session)


def from_scratch(session: Session) -> dict[BucketKey, tuple[int, int]]:
    """The buckets recomputed from every incident (reads them all)."""
    return tally(_of(columns) for columns in store.iter_incident_columns(session))


def rebuild(session: Session) -> None:
    """Replace the buckets by the ones recomputed from every incident, other writers held off."""
    store.lock_for_rebuild(session)
    store.clear_counts(session)
    store.add_counts(session, from_scratch(session))


def ensure_built(session: Session) -> bool:
    """Rebuild when the table has no state rows but incidents exist (right after the migration
    that created it, or on a database written before state counts were kept). Returns whether it
    rebuilt. Safe when several replicas start together."""
    if store.has_counts(session, figure=STATES) or not store.has_incidents(session):
        return False
    store.lock_for_rebuild(session)
    if store.has_counts(session, figure=STATES):  # another replica rebuilt meanwhile
        return False
    rebuild(session)
    return True


def _of(columns: store.IncidentFigureColumns | None) -> dict[BucketKey, tuple[int, int]]:
    if columns is None:
        return {}
    counted: dict[BucketKey, tuple[int, int]] = {(STATES, columns.state, "", "", 0): (1, 0)}
    if columns.kind != store.COUNTED:  # a check or a failed incident has no MTTR figures
        return counted
    return counted | contributions(
        runbook=columns.runbook,
        layer=columns.layer,
        severity=columns.severity,
        stamps=columns.stamps,
        gpu_hours=columns.gpu_hours,
    )


def state_counts(counts: Counts) -> dict[str, int]:
    """Incidents per state from the maintained rows (states with none are absent)."""
    return {key[1]: n for key, (n, _) in counts.items() if key[0] == STATES and n}


def without_states(counts: Counts) -> dict[BucketKey, tuple[int, int]]:
    """The histogram rows only."""
    return {key: value for key, value in counts.items() if key[0] != STATES}


_TOUCHED = "gpu_oncall.figures.touched"


def _touched(session: Session) -> dict[int, store.IncidentFigureColumns | None]:
    """Incidents this transaction changed -> their row before it (None: inserted by it)."""
    touched: dict[int, store.IncidentFigureColumns | None] = session.info.setdefault(_TOUCHED, {})
    return touched


def _before_flush(session: Session, _context: UOWTransaction, _instances: object) -> None:
    """Snapshot (and lock) the stored row of each incident this flush first changes."""
    touched = _touched(session)
    ids = {
        int(obj.id)
        for obj in [*session.dirty, *session.deleted]
        if isinstance(obj, Incident)
        and obj.id is not None
        and int(obj.id) not in touched
        and (obj in session.deleted or _tracked_change(obj))
    }
    stored = store.incident_columns(session, ids, lock=True)
    for incident_id in ids:
        touched[incident_id] = stored.get(incident_id)


def _after_flush(session: Session, _context: UOWTransaction) -> None:
    """Note the incidents this flush inserted (their ids exist now)."""
    touched = _touched(session)
    for obj in session.new:
        if isinstance(obj, Incident) and obj.id is not None:
            touched.setdefault(int(obj.id), None)


def _before_commit(session: Session) -> None:
    """Add the difference the transaction made to the buckets, in the transaction."""
    if session.in_nested_transaction():
        return  # a savepoint: counted when the whole transaction commits
    session.flush()
    touched = session.info.pop(_TOUCHED, {})
    if not touched:
        return
    now = store.incident_columns(session, touched.keys(), lock=False)
    after = [_of(columns) for columns in now.values()]
    before = [_of(columns) for columns in touched.values()]
    store.add_counts(session, tally([tally(after), tally(before, sign=-1)]))


def _after_transaction_end(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:
        session.info.pop(_TOUCHED, None)  # rolled back, or committed: nothing left to count


def _tracked_change(incident: Incident) -> bool:
    attrs = inspect(incident).attrs
    return any(attrs[name].history.has_changes() for name in _TRACKED)


SESSION_LISTENERS: tuple[tuple[str, Callable[..., None]], ...] = (
    ("before_flush", _before_flush),
    ("after_flush", _after_flush),
    ("before_commit", _before_commit),
    ("after_transaction_end", _after_transaction_end),
)
"""The listeners on sqlmodel's Session (bench/metrics_scrape.py removes them to time them)."""

for _name, _listener in SESSION_LISTENERS:
    if not event.contains(Session, _name, _listener):
        event.listen(Session, _name, _listener)
