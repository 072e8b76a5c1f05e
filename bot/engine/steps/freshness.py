"""Held gauges are judged by when they changed, not by their value.

dcgm-exporter's `DCGM_FI_DEV_XID_ERRORS` keeps the last XID code after the fault is gone: a node
repaired days ago still reads 48. A signal whose catalog entry names `changed_by` (a `changes`
signal over the same metric) is read a second time, for the nodes with a non-zero sample only,
over `changed_within`: a sample whose series did not change in that time is a *held* value. It
is taken out of the reading (so no check fires on it) and reported as a stale detector reading,
never as a broken GPU. A sample whose change history cannot be read is kept: absence of proof
of staleness is not proof of it.

"Not changed in 24h" needs 24 h of data: on a Prometheus started a minute ago every gauge looks
unchanged. Given the time, the held samples' history is measured (one range query, a point
every 1/48 of the window) and, when it is shorter than the window, the samples are kept and
reported as *unknown* ("only 12 min of history"), never as held.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.diagnosis.units import format_plain
from bot.engine.steps.common import parse_duration
from integrations.signals import SignalCatalog
from integrations.telemetry import Sample, SignalQuery, SignalResult, Telemetry


@dataclass(frozen=True)
class Freshened:
    """A reading with its held samples taken out, and those samples for the report."""

    result: SignalResult
    stale: tuple[Sample, ...]
    within: str
    unproven: tuple[Sample, ...] = ()
    """Samples that did not change, on a backend holding less history than `within`."""
    history: timedelta | None = None
    """How much history the backend holds for the held samples, when it was measured."""


#: The history depth is read at this many points over the held window.
HISTORY_POINTS = 48


def drop_held_values(
    result: SignalResult,
    *,
    telemetry: Telemetry,
    signals: SignalCatalog,
    now: datetime | None = None,
) -> Freshened:
    """`result` without the samples of a held gauge that did not change within its window.

    Issues one more query (for every node with a non-zero sample at once) only when the signal
    declares `changed_by` and some sample is non-zero. TelemetryUnavailable propagates: the
    gather step records it like any backend failure.
    """
    spec = signals.get(result.signal) if result.signal in signals else None
    if spec is None or spec.changed_by is None:
        return Freshened(result=result, stale=(), within="")
    suspects = [s for s in result.samples if s.value != 0]
    if not suspects:
        return Freshened(result=result, stale=(), within=spec.changed_within)
    nodes = tuple(sorted({s.node for s in suspects}))
    window = parse_duration(spec.changed_within)
    history = telemetry.read(SignalQuery(signal=spec.changed_by, nodes=nodes, window=window))
    changed = {_identity(s): s.value for s in history.samples}
    stale = tuple(s for s in suspects if changed.get(_identity(s)) == 0)
    queries = result.queries + history.queries
    if stale and now is not None:
        depth = history_depth(telemetry, result.signal, stale, now=now, window=window)
        queries += 1
        if depth + window / HISTORY_POINTS < window:  # too short to say "not changed"
            kept_all = SignalResult(
                signal=result.signal,
                samples=result.samples,
                missing_nodes=result.missing_nodes,
                queries=queries,
            )
            return Freshened(
                result=kept_all, stale=(), within=spec.changed_within, unproven=stale,
                history=depth,
            )
    kept = tuple(s for s in result.samples if s not in stale)
    fresh = SignalResult(
        signal=result.signal,
        samples=kept,
        missing_nodes=result.missing_nodes,
        queries=queries,
    )
    return Freshened(result=fresh, stale=stale, within=spec.changed_within)


def history_depth(
    telemetry: Telemetry,
    signal: str,
    samples: tuple[Sample, ...],
    *,
    now: datetime,
    window: timedelta,
) -> timedelta:
    """How far back the backend holds `signal` for the samples' nodes (at most `window`): the
    age of the earliest point of a range read at HISTORY_POINTS points; none at all is 0."""
    nodes = tuple(sorted({s.node for s in samples}))
    series = telemetry.read_range(
        SignalQuery(signal=signal, nodes=nodes, window=window / HISTORY_POINTS),
        start=now - window,
        end=now,
        step=window / HISTORY_POINTS,
    )
    wanted = {_identity(s) for s in samples}
    firsts = [
        s.points[0][0]
        for s in series
        if s.points and (s.node, s.labels.get("gpu", ""), s.labels.get("UUID", "")) in wanted
    ]
    return now - min(firsts) if firsts else timedelta(0)


def _identity(sample: Sample) -> tuple[str, str, str]:
    """A GPU across the two readings: its node and `gpu` index (or `UUID`)."""
    return sample.node, sample.labels.get("gpu", ""), sample.labels.get("UUID", "")


def stale_summary(freshened: Freshened) -> dict[str, Any]:
    """The summary keys for a held reading: `stale` samples and their nodes, or the `unproven`
    ones with the history measured (empty when none)."""
    if freshened.unproven:
        minutes = int((freshened.history or timedelta(0)).total_seconds() // 60)
        return {
            "unproven": [
                {"node": s.node, "value": s.value, **s.labels} for s in freshened.unproven
            ],
            "history_minutes": minutes,
            "stale_within": freshened.within,
        }
    if not freshened.stale:
        return {}
    return {
        "stale": [
            {"node": s.node, "value": s.value, **s.labels} for s in freshened.stale
        ],
        "stale_nodes": sorted({s.node for s in freshened.stale}),
        "stale_within": freshened.within,
    }


def held_notes(steps: Mapping[str, Any]) -> tuple[str, ...]:
    """One line per held (stale) sample in the run's signal steps, for the verdict."""
    notes: list[str] = []
    for data in steps.values():
        if not isinstance(data, Mapping) or data.get("kind") != "signal":
            continue
        for sample in data.get("stale", []):
            where = sample["node"] + (f" GPU {sample['gpu']}" if "gpu" in sample else "")
            value = format_plain(float(sample["value"]))
            notes.append(
                f"{data['signal']} on {where} still reads {value} but has not changed in "
                f"{data.get('stale_within')}: the exporter holds its last value; not counted"
            )
        for sample in data.get("unproven", []):
            where = sample["node"] + (f" GPU {sample['gpu']}" if "gpu" in sample else "")
            value = format_plain(float(sample["value"]))
            notes.append(
                f"{data['signal']} on {where} reads {value}; whether it changed in "
                f"{data.get('stale_within')} is unknown: only {data.get('history_minutes')} min "
                "of history; counted as current"
            )
    return tuple(dict.fromkeys(notes))
