"""Evidence snapshots: when a run localizes, keep the series behind its verdict.

The culprit's signal (the first signal a finding cites) for the culprit and up to `PEERS` peer
nodes, over the incident window plus a margin, is read with one `Telemetry.read_range` and stored
(storage/snapshots.py), so the postmortem's metric chart renders after the backend has forgotten.
Each point is read with the window of the step that gathered the cited evidence, so the chart
shows the very aggregation the finding states (a rate over 15m, not over 1m). When the run's
verification ends, the snapshot is read again up to that moment: the chart covers the fix.
A boundary like running.py: a snapshot that cannot be taken never fails the run; it becomes a
timeline note and a logged ref. Planning (`plan_snapshot`, `find_onset`) is pure.
"""

from __future__ import annotations

import logging
import statistics
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.engine import Engine

from bot.engine.recording import StepDone
from bot.engine.state import Deps
from bot.incidents import lifecycle
from bot.incidents.timeline import EventKind
from integrations.durations import parse_duration
from integrations.signals import SignalCatalog
from integrations.telemetry import SeriesPoints, SignalQuery
from storage import snapshots as snapshot_store
from storage.db import session_scope

logger = logging.getLogger(__name__)

PEERS = 3
"""Peer nodes drawn beside the culprit, for contrast."""
MAX_CULPRIT_SERIES = 4
MAX_SIBLINGS = 2
"""Other GPUs of the culprit node drawn as peers when the verdict names one GPU."""
MARGIN = timedelta(minutes=10)
"""Read from this long before the incident fired (the healthy baseline) up to the verdict."""
MIN_SPAN = timedelta(minutes=30)
POINTS = 120
"""About this many points per series: the step is the span / POINTS, at least MIN_STEP."""
MIN_STEP = timedelta(seconds=15)
POINT_WINDOW = timedelta(minutes=1)
_NOT_LOCALIZED = frozenset({"none", "unknown", ""})
VERIFIED = frozenset({"passed", "failed"})


@dataclass(frozen=True)
class SnapshotPlan:
    """What to read: one signal, the culprit nodes (and GPU, when named) and peer nodes."""

    signal: str
    culprits: tuple[str, ...]
    peers: tuple[str, ...]
    gpu: str | None = None
    window: timedelta = timedelta(minutes=1)
    """Each point's window: the gathering step's, so a point is what the finding computed."""


def plan_snapshot(
    verdict: Mapping[str, Any], steps: Mapping[str, Any], signals: SignalCatalog
) -> SnapshotPlan | None:
    """The snapshot a localized verdict calls for; None when it names no node or no signal."""
    if str(verdict.get("layer", "")) in _NOT_LOCALIZED:
        return None
    culprits = tuple(str(n) for n in verdict.get("culprit_nodes") or ())
    cited = [
        (str(e.get("what", "")), str(e.get("source", "")))
        for f in verdict.get("findings") or ()
        for e in f.get("evidence") or ()
    ]
    signal, source = next(((w, s) for w, s in cited if w in signals), ("", ""))
    if not culprits or not signal:
        return None
    gathered = steps.get(source) or {}
    present = [str(n) for n in gathered.get("present_nodes") or () if n not in culprits]
    details = verdict.get("culprit_details") or [{}]
    gpu = details[0].get("gpu") if isinstance(details[0], Mapping) else None
    window = gathered.get("window")
    return SnapshotPlan(
        signal=signal,
        culprits=culprits,
        peers=tuple(present[:PEERS]),
        gpu=gpu or None,
        window=parse_duration(str(window)) if window else POINT_WINDOW,
    )


def window_for(*, anchor: datetime, until: datetime) -> tuple[datetime, datetime, timedelta]:
    """(start, end, step) of the read: MARGIN before `anchor` (when the incident fired) to
    `until`, at least MIN_SPAN long, about POINTS steps."""
    start = min(anchor - MARGIN, until - MIN_SPAN)
    step = max(MIN_STEP, timedelta(seconds=round((until - start).total_seconds() / POINTS)))
    return start, until, step


def select_series(plan: SnapshotPlan, found: Sequence[SeriesPoints]) -> list[dict[str, Any]]:
    """The stored series: the culprit's (only its GPU when one is named, then up to
    MAX_SIBLINGS other GPUs of the node as peers), then one series per peer node. One pass over
    `found`; a step's time is converted once however many series share it."""
    culprits, peers, gpu = frozenset(plan.culprits), frozenset(plan.peers), plan.gpu
    named: list[SeriesPoints] = []  # the culprit's series (its named GPU's, when one is named)
    others: list[SeriesPoints] = []  # the culprit's other GPUs, when one is named
    by_peer: dict[str, SeriesPoints] = {}  # each peer node's first series
    for s in found:
        if not s.points:
            continue
        if s.node in culprits:
            (named if gpu is None or s.labels.get("gpu") == gpu else others).append(s)
        if s.node in peers and s.node not in by_peer:
            by_peer[s.node] = s
    if gpu is None:
        chosen = [(s, "culprit") for s in named[:MAX_CULPRIT_SERIES]]
    elif named:
        chosen = [(s, "culprit") for s in named[:MAX_CULPRIT_SERIES]]
        chosen += [(s, "peer") for s in others[:MAX_SIBLINGS]]
    else:
        chosen = [(s, "culprit") for s in others[:1]]
    chosen += [(s, "peer") for s in by_peer.values()]
    stamps: dict[datetime, float] = {}
    return [
        {
            "node": s.node,
            "role": role,
            "labels": dict(s.labels),
            "points": [[_stamp(stamps, at), value] for at, value in s.points],
        }
        for s, role in chosen
    ]


def _stamp(known: dict[datetime, float], at: datetime) -> float:
    """`at` as Unix seconds rounded to the millisecond, converted once per distinct time."""
    stamp = known.get(at)
    if stamp is None:
        stamp = known[at] = round(at.timestamp(), 3)
    return stamp


def nearest_peers(culprits: Sequence[str], names: Sequence[str], *, count: int) -> list[str]:
    """Up to `count` nodes that are not culprits, nearest to the first culprit in name order
    (neighbours share a rack more often than not)."""
    ordered = sorted(names)
    others = [n for n in ordered if n not in culprits]
    if not culprits or culprits[0] not in ordered:
        return others[:count]
    position = {name: i for i, name in enumerate(ordered)}
    pivot = position[culprits[0]]
    return sorted(others, key=lambda n: abs(position[n] - pivot))[:count]


def find_onset(series: Sequence[Mapping[str, Any]]) -> float | None:
    """Unix time of the first point where the culprit leaves its own starting baseline by more
    than the peers vary (at least 10% of the baseline); None when it never does."""
    culprit = next((s for s in series if s["role"] == "culprit"), None)
    if culprit is None or len(culprit["points"]) < 2:
        return None
    base = culprit["points"][0][1]
    floor = max(0.1 * abs(base), 1e-9)
    if all(abs(v - base) <= floor for _, v in culprit["points"]):
        return None  # within the floor the threshold never goes below: no spread needed
    peer_values = [p[1] for s in series if s["role"] == "peer" for p in s["points"]]
    threshold = max(3 * _spread(peer_values), floor)
    return next((t for t, v in culprit["points"] if abs(v - base) > threshold), None)


def _spread(values: Sequence[float]) -> float:
    """statistics.pstdev of `values` (0.0 for fewer than two); a constant list is 0.0 without
    pstdev's exact arithmetic (what pstdev returns for it too)."""
    if len(values) < 2 or all(v == values[0] for v in values):
        return 0.0
    return statistics.pstdev(values)


def snapshot_verdicts(
    *, deps: Deps, db: Engine, done: Sequence[StepDone], steps: Mapping[str, Any]
) -> None:
    """Take the snapshot of each localize step in `done` (the steps of one super-step), and
    read it again up to a verification that ended (passed or failed) among them."""
    for step in done:
        if step.output.get("kind") == "localize":
            take_snapshot(deps=deps, db=db, done=step, steps=steps)
        elif step.output.get("kind") == "verify" and step.output.get("status") in VERIFIED:
            verdict = next((o for o in steps.values() if o.get("kind") == "localize"), None)
            if verdict is not None:
                take_snapshot(deps=deps, db=db, done=replace(step, output=verdict),
                              steps=steps, refresh=True)  # fmt: skip


def take_snapshot(
    *,
    deps: Deps,
    db: Engine,
    done: StepDone,
    steps: Mapping[str, Any],
    refresh: bool = False,
) -> None:
    """Read and store the snapshot of one verdict (`refresh`: again, up to `done.at`, over the
    one stored); any failure becomes a timeline note."""
    try:
        plan = plan_snapshot(done.output, steps, deps.signals)
        if plan is not None:
            _read_and_store(deps=deps, db=db, done=done, plan=plan, refresh=refresh)
    except Exception as exc:  # boundary: a snapshot is a convenience, never a run failure
        ref = uuid.uuid4().hex[:6]
        logger.exception(
            "evidence snapshot failed",
            extra={"incident_id": done.incident_id, "run_id": done.run_id, "ref": ref},
        )
        _note_failure(deps=deps, db=db, done=done, reason=f"{type(exc).__name__}, ref {ref}")


def _pool_names(deps: Deps, culprits: Sequence[str], *, count: int) -> list[str]:
    """Up to `count` names of the first culprit's pool, the first in name order: one bounded
    read by label (`Cluster.first_nodes`), never the pool or the fleet."""
    if not culprits:
        return []
    (node,) = deps.cluster.nodes(culprits[:1])
    pool = {deps.pool_label: node.labels.get(deps.pool_label)}
    return [n.name for n in deps.cluster.first_nodes(pool, limit=count).nodes]


def _read_and_store(
    *, deps: Deps, db: Engine, done: StepDone, plan: SnapshotPlan, refresh: bool = False
) -> None:
    # a read of two columns: nothing to commit (one commit per snapshot, below)
    anchor = snapshot_store.snapshot_anchor(db, incident_id=done.incident_id)
    if len(plan.peers) < PEERS:  # the runbook read only the target: borrow pool members
        taken = plan.culprits + plan.peers  # read enough that PEERS remain without them
        names = _pool_names(deps, plan.culprits, count=PEERS + len(taken))
        extra = nearest_peers(taken, names, count=PEERS - len(plan.peers))
        plan = replace(plan, peers=plan.peers + tuple(extra))
    start, end, step = window_for(anchor=anchor or done.at, until=done.at)
    query = SignalQuery(signal=plan.signal, nodes=plan.culprits + plan.peers, window=plan.window)
    series = select_series(
        plan, deps.telemetry.read_range(query, start=start, end=end, step=step)
    )
    onset = find_onset(series)
    with session_scope(db) as session:
        snapshot_store.save_snapshot(
            session,
            incident_id=done.incident_id,
            run_id=done.run_id,
            signal=plan.signal,
            start=start,
            end=end,
            step_seconds=step.total_seconds(),
            onset_at=None if onset is None else datetime.fromtimestamp(onset, tz=start.tzinfo),
            series=series,
            taken_at=deps.clock.now(),
            replace=refresh,
        )


def _note_failure(*, deps: Deps, db: Engine, done: StepDone, reason: str) -> None:
    with session_scope(db) as session:
        lifecycle.record(
            session,
            incident_id=done.incident_id,
            kind=EventKind.NOTE,
            at=deps.clock.now(),
            actor="bot",
            summary=f"Evidence snapshot not stored ({reason}); the postmortem has no metric chart",
            run_id=done.run_id,
            step_id=done.step_id,
        )
