"""Chart geometry for the HTML postmortem: the timeline swimlanes and the key metric chart on one
shared time axis (pure: numbers in, coordinates out; `templates/postmortem.html.j2` draws them).

Both charts map time with the same `TimeAxis`, so a marker (fired, detected, ...) sits at the
same x in both. Marker labels never overlap (`place_labels`): each takes the first row above the
chart where it clears the labels already placed, and the chart grows a row when it needs one.
Nothing here knows HTML; everything is plain frozen data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from bot.incidents.story import SnapshotView
from bot.incidents.timeline import is_human_actor
from bot.incidents.views import EventView, IncidentView
from bot.limits import CHART_MAX_POINTS, CHART_MAX_TICKS

WIDTH = 960
LEFT = 120  # room for lane and value labels
RIGHT = 24
LANE_HEIGHT = 34
TOP = 34  # room for two rows of marker labels (more rows push the chart down)
LABEL_ROW = 15
"""Height of one row of marker labels: an 11 px text box is ~13 units tall."""
LABEL_BASELINE = 12
"""The first label row's baseline."""
CHAR_PX = 7.0
"""Widest average advance of an 11 px system-ui lowercase label, rounded up (measured in
chromium: 'acknowledged' is ~70 px): label boxes are estimated from it."""
LABEL_GAP = 6.0
METRIC_HEIGHT = 220
LANES = ("alert", "bot", "humans", "actions")
MARKERS = (
    ("fired", "fired_at"),
    ("detected", "detected_at"),
    ("diagnosed", "diagnosed_at"),
    ("acknowledged", "acknowledged_at"),
    ("mitigated", "mitigated_at"),
    ("resolved", "resolved_at"),
)
_DAY = 86400
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)


@dataclass(frozen=True)
class TimeAxis:
    start: datetime
    end: datetime

    def x(self, at: datetime) -> float:
        span = (self.end - self.start).total_seconds() or 1.0
        share = (at - self.start).total_seconds() / span
        return round(LEFT + max(0.0, min(1.0, share)) * (WIDTH - LEFT - RIGHT), 1)

    def ticks(self, count: int = 6) -> list[tuple[float, str]]:
        """Round tick times (x, HH:MM[:SS] UTC, or the date past a day) across the axis: at
        most CHART_MAX_TICKS whatever span the data covers."""
        span = (self.end - self.start).total_seconds()
        step = next((s for s in _STEPS if span / s <= count), 0)
        step = step or math.ceil(span / count / _DAY) * _DAY
        offset = (self.start - _EPOCH).total_seconds()
        at = self.start + timedelta(seconds=math.ceil(offset / step) * step - offset)
        fmt = "%H:%M:%S" if step < 60 else "%H:%M" if step < _DAY else "%Y-%m-%d"
        out: list[tuple[float, str]] = []
        while at <= self.end and len(out) < CHART_MAX_TICKS:
            out.append((self.x(at), at.strftime(fmt)))
            try:
                at += timedelta(seconds=step)
            except OverflowError:
                break
        return out


@dataclass(frozen=True)
class Marker:
    name: str  # fired | detected | ... | onset
    at: datetime
    x: float
    label: str
    text: str = ""
    """The words drawn above the chart (the name; "fault onset")."""
    text_x: float = 0.0
    """The text's centre: at the marker, moved inwards only to stay inside the chart."""
    text_y: float = 0.0
    """The text's baseline: its row."""


def label_width(text: str) -> float:
    return len(text) * CHAR_PX


def place_labels(markers: Sequence[Marker], *, top: float = 0.0) -> tuple[list[Marker], int]:
    """The markers with their text placed so no two label boxes meet, and the rows used.
    Left to right, each label takes the first row whose last label ends (plus LABEL_GAP)
    before it starts; its centre is the marker's x, kept inside [LEFT, WIDTH - RIGHT]."""
    ends: list[float] = []  # per row: where its rightmost label ends
    placed: list[Marker] = []
    for marker in sorted(markers, key=lambda m: (m.x, m.name)):
        text = marker.text or marker.name
        half = label_width(text) / 2
        centre = min(max(marker.x, LEFT + half), WIDTH - RIGHT - half)
        row = next((i for i, end in enumerate(ends) if end + LABEL_GAP <= centre - half), None)
        if row is None:
            ends.append(0.0)
            row = len(ends) - 1
        ends[row] = centre + half
        y = top + LABEL_BASELINE + row * LABEL_ROW
        placed.append(replace(marker, text=text, text_x=round(centre, 1), text_y=y))
    return placed, len(ends)


def label_room(rows: int) -> float:
    """Height above a chart for `rows` rows of labels (at least TOP)."""
    return max(float(TOP), LABEL_BASELINE + rows * LABEL_ROW + 8.0)


@dataclass(frozen=True)
class Dot:
    lane: str
    x: float
    y: float
    kind: str
    pinned: bool
    title: str


@dataclass(frozen=True)
class TimelineChart:
    height: int
    lanes: tuple[tuple[str, float], ...]  # (name, y of the lane's centre)
    dots: tuple[Dot, ...]
    markers: tuple[Marker, ...]
    ticks: tuple[tuple[float, str], ...]
    top: float = TOP
    """Where the lanes start: below the marker labels' rows."""


@dataclass(frozen=True)
class Line:
    name: str
    node: str
    role: str
    points: str  # the SVG polyline `points` attribute
    last: float


@dataclass(frozen=True)
class MetricChart:
    signal: str
    height: int
    lines: tuple[Line, ...]
    markers: tuple[Marker, ...]
    ticks: tuple[tuple[float, str], ...]
    y_ticks: tuple[tuple[float, str], ...]
    top: float
    bottom: float


def make_axis(
    incident: IncidentView, events: Sequence[EventView], snapshot: SnapshotView | None
) -> TimeAxis:
    """From the earliest to the latest of: the events, the incident's timestamps and the
    snapshot's range, with 2% padding either side."""
    times = [e.at for e in events] + [t for t in incident.timestamps().values() if t]
    times.append(incident.created_at)
    if snapshot is not None:
        times += [snapshot.start, snapshot.end]
    start, end = min(times), max(times)
    if end - start < timedelta(minutes=1):
        end = start + timedelta(minutes=1)
    pad = (end - start) * 0.02
    return TimeAxis(start=_shifted(start, -pad), end=_shifted(end, pad))


def _shifted(at: datetime, by: timedelta) -> datetime:
    """`at + by`, or `at` where that would leave the calendar (a year-1 timestamp)."""
    try:
        return at + by
    except OverflowError:
        return at


def lane_of(event: EventView) -> str:
    """Which swimlane an event belongs to."""
    if event.kind.startswith("alert_") or event.actor == "alertmanager":
        return "alert"
    if event.kind.startswith(("action_", "verification_")):
        return "actions"
    if is_human_actor(event.actor):
        return "humans"
    return "bot"


def incident_markers(incident: IncidentView, axis: TimeAxis) -> list[Marker]:
    stamps = incident.timestamps()
    return [
        Marker(name, at, axis.x(at), f"{name} {at:%H:%M:%S}")
        for name, field in MARKERS
        if (at := stamps[field]) is not None
    ]


def timeline_chart(
    incident: IncidentView, events: Sequence[EventView], axis: TimeAxis
) -> TimelineChart:
    markers, rows = place_labels(incident_markers(incident, axis))
    top = label_room(rows)
    lanes = tuple((name, top + LANE_HEIGHT * (i + 0.5)) for i, name in enumerate(LANES))
    y_of = dict(lanes)
    dots = tuple(
        Dot(
            lane=lane,
            x=axis.x(e.at),
            y=y_of[lane],
            kind=e.kind,
            pinned=e.pinned,
            title=f"{e.at:%H:%M:%S} {e.actor}: {e.summary}",
        )
        for e in events
        for lane in [lane_of(e)]
    )
    return TimelineChart(
        height=int(top + LANE_HEIGHT * len(LANES) + 24),
        lanes=lanes,
        dots=dots,
        markers=tuple(markers),
        ticks=tuple(axis.ticks()),
        top=top,
    )


def metric_chart(
    incident: IncidentView, snapshot: SnapshotView, axis: TimeAxis
) -> MetricChart | None:
    """The snapshot's series as polylines, the onset and the incident's markers; None when the
    snapshot holds no points."""
    values = [v for s in snapshot.series for _, v in s.points if math.isfinite(v)]
    if not values:
        return None
    low, high = min(min(values), 0.0), max(values)
    if high == low:
        high = low + 1.0
    markers = incident_markers(incident, axis)
    if snapshot.onset_at is not None:
        at = snapshot.onset_at
        markers.append(Marker("onset", at, axis.x(at), f"fault onset {at:%H:%M:%S}", "fault onset"))
    markers, rows = place_labels(markers)
    top = label_room(rows)
    bottom = top + METRIC_HEIGHT

    def y(value: float) -> float:
        return round(bottom - (value - low) / (high - low) * (bottom - top), 1)

    lines = tuple(
        Line(
            name=s.name,
            node=s.node,
            role=s.role,
            points=" ".join(f"{axis.x(at)},{y(v)}" for at, v in _thinned(s.points)),
            last=s.points[-1][1],
        )
        for s in sorted(snapshot.series, key=lambda s: s.role != "peer")  # culprit on top
        if s.points
    )
    y_ticks = tuple((y(v), f"{v:g}") for v in _nice_values(low, high))
    return MetricChart(
        signal=snapshot.signal,
        height=int(bottom) + 24,
        lines=lines,
        markers=tuple(markers),
        ticks=tuple(axis.ticks()),
        y_ticks=y_ticks,
        top=top,
        bottom=bottom,
    )


def _thinned(points: Sequence[tuple[datetime, float]]) -> Sequence[tuple[datetime, float]]:
    """At most CHART_MAX_POINTS finite points, evenly spaced through the series."""
    finite = [(at, v) for at, v in points if math.isfinite(v)]
    stride = max(1, math.ceil(len(finite) / CHART_MAX_POINTS))
    return finite[::stride]


def _nice_values(low: float, high: float, count: int = 4) -> list[float]:
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    out, v = [], first
    while v <= high + 1e-9:
        out.append(round(v, 10))
        v += step
    return out
