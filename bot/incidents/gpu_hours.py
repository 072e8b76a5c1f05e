"""GPU-hours lost per incident (pure): two terms, each stated with its formula and its worked
numbers, so a reader can check the figure instead of trusting it.

| term           | formula                                                  |
|----------------|----------------------------------------------------------|
| out of service | Σ nodes taken out: node GPUs × (back_at − removed_at)     |
| idle job GPUs  | Σ jobs on the culprit nodes: job GPUs × (end − start)     |

- A node is *taken out* when a cordon or drain of it succeeded (`removed_at`, the action's end);
  it is *back* when an uncordon succeeded, else it still is out at `end`.
- `start` is `fired_at` (the start of impact), else `detected_at` when no one said when impact
  began; `end` is `resolved_at`, else now for an incident still open (the figure then grows).
- A job's GPUs are all of its ranks' GPUs, not only those on the node: a gang job (all ranks or
  none) with a broken rank leaves every one of its GPUs idle. The jobs come from the impact the
  approval showed (bot/actions/impact.py); an incident with no proposal names none.
- A term whose inputs were not recorded (a node's GPU count) is None, not 0: absence is data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.incidents.mttr import format_duration

OUT_OF_SERVICE_FORMULA = "Σ nodes taken out: node GPUs × (back_at − removed_at)"
IDLE_JOBS_FORMULA = "Σ jobs on the culprit nodes: job GPUs × (end − start)"


@dataclass(frozen=True)
class Removal:
    """A node the incident took out of service."""

    node: str
    gpus: int | None  # None: the GPU count was not recorded
    removed_at: datetime
    back_at: datetime | None = None  # an uncordon that succeeded


@dataclass(frozen=True)
class IdleJob:
    job: str
    gpus: int


@dataclass(frozen=True)
class Term:
    """One term of the sum: its hours (None: not computable), formula and worked lines."""

    name: str
    hours: float | None
    formula: str
    worked: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "hours": self.hours,
            "formula": self.formula,
            "worked": list(self.worked),
        }


@dataclass(frozen=True)
class GpuHours:
    out_of_service: Term
    idle_jobs: Term
    start: datetime | None
    end: datetime
    ongoing: bool  # the incident is open: `end` is now and the figure still grows

    @property
    def total(self) -> float | None:
        """Both terms added; None when either is unknown (a partial sum would understate)."""
        if self.out_of_service.hours is None or self.idle_jobs.hours is None:
            return None
        return round(self.out_of_service.hours + self.idle_jobs.hours, 2)

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "out_of_service": self.out_of_service.to_dict(),
            "idle_jobs": self.idle_jobs.to_dict(),
            "start": self.start.isoformat() if self.start else None,
            "end": self.end.isoformat(),
            "ongoing": self.ongoing,
        }


def compute_gpu_hours(
    *,
    fired_at: datetime | None,
    detected_at: datetime | None,
    resolved_at: datetime | None,
    now: datetime,
    removals: Sequence[Removal],
    jobs: Sequence[IdleJob],
) -> GpuHours:
    """The GPU-hours an incident cost, by the formulas in the module docstring."""
    end = resolved_at or now
    start = fired_at or detected_at
    return GpuHours(
        out_of_service=_out_of_service(removals, end=end),
        idle_jobs=_idle(jobs, start=start, end=end),
        start=start,
        end=end,
        ongoing=resolved_at is None,
    )


def _out_of_service(removals: Sequence[Removal], *, end: datetime) -> Term:
    hours: float | None = 0.0
    worked: list[str] = []
    for removal in removals:
        back = removal.back_at or end
        span = max(back - removal.removed_at, timedelta(0))
        if removal.gpus is None:
            hours = None
            worked.append(f"{removal.node}: GPU count not recorded × {format_duration(span)}")
            continue
        part = removal.gpus * _hours(span)
        hours = None if hours is None else hours + part
        until = "back" if removal.back_at else "end"
        worked.append(
            f"{removal.node}: {removal.gpus} GPUs × {format_duration(span)} "
            f"({removal.removed_at:%H:%M:%S} → {until} {back:%H:%M:%S}) = {part:.2f}"
        )
    return Term("out_of_service", _round(hours), OUT_OF_SERVICE_FORMULA, tuple(worked))


def _idle(jobs: Sequence[IdleJob], *, start: datetime | None, end: datetime) -> Term:
    if start is None:
        worked = ("no start: neither fired_at nor detected_at is known",) if jobs else ()
        return Term("idle_jobs", None if jobs else 0.0, IDLE_JOBS_FORMULA, worked)
    span = max(end - start, timedelta(0))
    lines = []
    hours = 0.0
    for job in jobs:
        part = job.gpus * _hours(span)
        hours += part
        lines.append(f"{job.job}: {job.gpus} GPUs × {format_duration(span)} = {part:.2f}")
    return Term("idle_jobs", _round(hours), IDLE_JOBS_FORMULA, tuple(lines))


def _hours(span: timedelta) -> float:
    return span.total_seconds() / 3600


def _round(hours: float | None) -> float | None:
    return None if hours is None else round(hours, 2)


def render_gpu_hours(figure: GpuHours) -> list[str]:
    """Plain-text lines: the total, then each term with its formula and worked numbers."""
    total = "unknown" if figure.total is None else f"{figure.total:.2f}"
    so_far = " so far (open)" if figure.ongoing else ""
    lines = [f"GPU-hours lost: {total}{so_far}"]
    for term, label in ((figure.out_of_service, "out of service"), (figure.idle_jobs, "idle jobs")):
        shown = "unknown" if term.hours is None else f"{term.hours:.2f}"
        lines.append(f"  {label}: {shown}   [{term.formula}]")
        lines += [f"    {line}" for line in term.worked]
    return lines
