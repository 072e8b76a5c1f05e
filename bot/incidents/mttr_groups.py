"""MTTR people can read (pure): each figure's p50 and p90 over the incidents resolved in a window,
grouped by runbook, fault layer or ISO week, with the GPU-hours they cost.

Percentiles, not means: one incident left open over a weekend moves a mean by hours while the
typical incident did not change. p50 and p90 use the nearest-rank method (the value below which
that share of the incidents fall, always an observed value). A figure an incident lacks (no
`fired_at`, never acknowledged) leaves that incident out of that figure's count only. Checks
(a diagnosis that found nothing) are not incidents and never reach this module.
Shared by `gpu-oncall mttr` and `/gpu mttr`; the formulas are mttr.py's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.incidents.mttr import DEFINITIONS, MttrFigures, TimestampOrderError, format_duration
from bot.incidents.views import IncidentView

GROUPINGS = ("runbook", "layer", "week")
ALL = "all"


@dataclass(frozen=True)
class Percentiles:
    count: int  # incidents where the figure is known
    p50: timedelta | None
    p90: timedelta | None


@dataclass(frozen=True)
class Group:
    """One row of the table: a runbook, layer or week (or `all`)."""

    key: str
    incidents: int
    figures: Mapping[str, Percentiles]  # keyed by MttrFigures field name
    gpu_hours: float | None  # the sum; None when some incident's figure is unknown

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "incidents": self.incidents,
            "gpu_hours": self.gpu_hours,
            "figures": {
                name: {
                    "count": p.count,
                    "p50_seconds": _seconds(p.p50),
                    "p90_seconds": _seconds(p.p90),
                }
                for name, p in self.figures.items()
            },
        }


def group_key(view: IncidentView, by: str) -> str:
    """The incident's row: its runbook, its layer (`undiagnosed` without a verdict), or the ISO
    week it was resolved in (`2026-W47`)."""
    if by == "runbook":
        return view.runbook
    if by == "layer":
        return view.layer or "undiagnosed"
    if by == "week":
        stamp = view.resolved_at or view.created_at
        year, week, _ = stamp.isocalendar()
        return f"{year}-W{week:02d}"
    raise ValueError(f"unknown grouping '{by}' (groupings: {', '.join(GROUPINGS)})")


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile of `values` (q in (0, 1]); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)), 1) - 1]


def summarize(
    views: Iterable[IncidentView], *, by: str, gpu_hours: Mapping[int, float | None]
) -> list[Group]:
    """One group per key in key order, then `all` when there is more than one group.
    Incidents with corrupt timestamps (refused by lifecycle; only a hand-edited row has them)
    are left out rather than failing the whole table."""
    members: dict[str, list[tuple[IncidentView, MttrFigures]]] = {}
    for view in views:
        try:
            figures = view.figures()
        except TimestampOrderError:
            continue
        members.setdefault(group_key(view, by), []).append((view, figures))
    groups = [_group(key, rows, gpu_hours) for key, rows in sorted(members.items())]
    if len(groups) > 1:
        every = [row for rows in members.values() for row in rows]
        groups.append(_group(ALL, every, gpu_hours))
    return groups


def _group(
    key: str,
    rows: Sequence[tuple[IncidentView, MttrFigures]],
    gpu_hours: Mapping[int, float | None],
) -> Group:
    figures: dict[str, Percentiles] = {}
    for definition in DEFINITIONS:
        known = [
            value.total_seconds()
            for _, item in rows
            if (value := getattr(item, definition.name)) is not None
        ]
        figures[definition.name] = Percentiles(
            len(known), _delta(percentile(known, 0.5)), _delta(percentile(known, 0.9))
        )
    costs = [gpu_hours.get(view.id) for view, _ in rows]
    total = None if any(c is None for c in costs) else round(sum(c or 0.0 for c in costs), 2)
    return Group(key, len(rows), figures, total)


def render_table(groups: Sequence[Group], *, by: str) -> list[str]:
    """A fixed-width table: per figure `p50/p90`, then GPU-hours."""
    names = [d.label for d in DEFINITIONS]
    width = max([len(by), *(len(g.key) for g in groups)]) + 2
    header = f"{by.upper():<{width}}{'N':>4}" + "".join(f"{n:>20}" for n in names)
    lines = [header + f"{'GPU-HOURS':>11}"]
    for group in groups:
        cells = "".join(
            f"{_pair(group.figures[d.name]):>20}" for d in DEFINITIONS
        )
        cost = "unknown" if group.gpu_hours is None else f"{group.gpu_hours:.2f}"
        lines.append(f"{group.key:<{width}}{group.incidents:>4}{cells}{cost:>11}")
    return lines


def formulas() -> list[str]:
    """The formula of each figure, for under the table."""
    return [f"{d.label} = {d.formula}" for d in DEFINITIONS]


def to_json(
    groups: Sequence[Group], *, by: str, since: datetime, until: datetime
) -> dict[str, Any]:
    return {
        "by": by,
        "since": since.isoformat(),
        "until": until.isoformat(),
        "percentiles": "nearest-rank",
        "formulas": {d.name: d.formula for d in DEFINITIONS},
        "groups": [g.to_dict() for g in groups],
    }


def _pair(p: Percentiles) -> str:
    if p.count == 0:
        return "-"
    return f"{format_duration(p.p50)} / {format_duration(p.p90)}"


def _delta(seconds: float | None) -> timedelta | None:
    return None if seconds is None else timedelta(seconds=seconds)


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()
