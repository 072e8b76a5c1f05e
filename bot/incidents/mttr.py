"""Incident timestamps -> MTTD / MTTA / time-to-diagnosis / MTTM / MTTR (pure).

Vendors disagree on where each figure starts; gpu-oncall measures every figure from `fired_at`,
the start of impact (the alert's startsAt, correctable by a human because impact often starts
before the alert), except time-to-diagnosis, which measures the bot's own speed:

| figure            | formula                       | measured from          |
|-------------------|-------------------------------|------------------------|
| MTTD              | detected_at - fired_at        | start of impact        |
| MTTA              | acknowledged_at - fired_at    | start of impact        |
| time to diagnosis | diagnosed_at - detected_at    | detection by the bot   |
| MTTM              | mitigated_at - fired_at       | start of impact        |
| MTTR              | resolved_at - fired_at        | start of impact        |

`acknowledged_at` is the first human action, `mitigated_at` the moment an action was verified.
A figure is None when either of its timestamps is missing (e.g. an incident opened by a slash
command has no `fired_at` until someone sets it). Per incident each figure is one duration; over
many incidents they are summarised as p50/p90 (mttr_groups.py).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime, timedelta

from integrations.durations import format_duration as format_duration


@dataclass(frozen=True)
class MttrFigures:
    mttd: timedelta | None = None
    mtta: timedelta | None = None
    time_to_diagnosis: timedelta | None = None
    mttm: timedelta | None = None
    mttr: timedelta | None = None

    def as_seconds(self) -> dict[str, float | None]:
        """Each figure in seconds (None where unknown), keyed by field name."""
        return {
            f.name: (None if value is None else value.total_seconds())
            for f in fields(self)
            for value in [getattr(self, f.name)]
        }


@dataclass(frozen=True)
class FigureDefinition:
    name: str  # MttrFigures field
    label: str
    formula: str


DEFINITIONS: tuple[FigureDefinition, ...] = (
    FigureDefinition("mttd", "MTTD", "detected_at - fired_at"),
    FigureDefinition("mtta", "MTTA", "acknowledged_at - fired_at"),
    FigureDefinition("time_to_diagnosis", "Time to diagnosis", "diagnosed_at - detected_at"),
    FigureDefinition("mttm", "MTTM", "mitigated_at - fired_at"),
    FigureDefinition("mttr", "MTTR", "resolved_at - fired_at"),
)
"""The published formulas, in display order (used by the postmortem and the docs)."""

# (earlier, later): a pair whose later timestamp precedes the earlier one is corrupt data.
_ORDER: tuple[tuple[str, str], ...] = (
    ("fired_at", "detected_at"),
    ("fired_at", "acknowledged_at"),
    ("fired_at", "diagnosed_at"),
    ("fired_at", "mitigated_at"),
    ("fired_at", "resolved_at"),
    ("detected_at", "acknowledged_at"),
    ("detected_at", "diagnosed_at"),
    ("detected_at", "mitigated_at"),
    ("detected_at", "resolved_at"),
    ("mitigated_at", "resolved_at"),
)


class TimestampOrderError(ValueError):
    """Two incident timestamps are in an impossible order; the message names both."""

    def __init__(self, earlier: str, earlier_at: datetime, later: str, later_at: datetime) -> None:
        super().__init__(
            f"{later} ({_show(later_at)}) is before {earlier} ({_show(earlier_at)}); "
            f"{earlier} must not be later than {later}"
        )
        self.earlier, self.later = earlier, later


def _show(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def check_order(
    *,
    fired_at: datetime | None,
    detected_at: datetime | None,
    acknowledged_at: datetime | None,
    diagnosed_at: datetime | None,
    mitigated_at: datetime | None,
    resolved_at: datetime | None,
) -> None:
    """Raise TimestampOrderError for the first pair of timestamps in an impossible order."""
    stamps = {
        "fired_at": fired_at,
        "detected_at": detected_at,
        "acknowledged_at": acknowledged_at,
        "diagnosed_at": diagnosed_at,
        "mitigated_at": mitigated_at,
        "resolved_at": resolved_at,
    }
    for earlier, later in _ORDER:
        earlier_at, later_at = stamps[earlier], stamps[later]
        if earlier_at is not None and later_at is not None and later_at < earlier_at:
            raise TimestampOrderError(earlier, earlier_at, later, later_at)


def compute_figures(
    *,
    fired_at: datetime | None,
    detected_at: datetime | None,
    acknowledged_at: datetime | None,
    diagnosed_at: datetime | None,
    mitigated_at: datetime | None,
    resolved_at: datetime | None,
) -> MttrFigures:
    """The figures of one incident by the formulas in the module docstring."""
    check_order(
        fired_at=fired_at,
        detected_at=detected_at,
        acknowledged_at=acknowledged_at,
        diagnosed_at=diagnosed_at,
        mitigated_at=mitigated_at,
        resolved_at=resolved_at,
    )
    return MttrFigures(
        mttd=_between(fired_at, detected_at),
        mtta=_between(fired_at, acknowledged_at),
        time_to_diagnosis=_between(detected_at, diagnosed_at),
        mttm=_between(fired_at, mitigated_at),
        mttr=_between(fired_at, resolved_at),
    )


def _between(start: datetime | None, end: datetime | None) -> timedelta | None:
    return None if start is None or end is None else end - start
