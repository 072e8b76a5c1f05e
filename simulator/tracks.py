"""Time series of the simulated fleet: a baseline plus fault effects, readable at any time.

Time here is float seconds since the fleet was built (t0); negative is the past. A `Track` is
one series (one metric of one GPU, HCA or node). Range functions mirror PromQL and sample at
the dcgm-exporter scrape interval. Healthy tracks (no effects) take closed-form fast paths so a
4,096-node read stays cheap. Pure: no fleet, no Kubernetes, no wall clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

#: dcgm-exporter's default collect interval (30 s): range functions sample at this step.
SCRAPE_INTERVAL_S = 30.0


class FaultWindow:
    """When a fault acts: from `start` until `end` (None = still acting).

    Mutable on purpose: a drain or a repair sets `end`, and every effect that shares the
    window stops at that moment without rebuilding any track. `closed` counts closes across
    every window, so a model can key its caches on it instead of re-reading its windows.
    """

    __slots__ = ("end", "start")
    closed: ClassVar[int] = 0

    def __init__(self, start: float, end: float | None = None) -> None:
        self.start = start
        self.end = end

    def active(self, t: float) -> bool:
        return self.start <= t and (self.end is None or t < self.end)

    def clip(self, t: float) -> float:
        """`t`, but no later than the end of the window."""
        return t if self.end is None else min(t, self.end)

    def close(self, at: float) -> bool:
        """End the window at `at` if it has begun and not ended yet (a transient fault's or an
        episode's planned end may still be ahead); True if it changed."""
        if at < self.start or (self.end is not None and self.end <= at):
            return False
        self.end = at
        FaultWindow.closed += 1
        return True

    def cancel(self, at: float) -> bool:
        """Call off a window that has not begun by `at` (a later episode of a flapping fault
        on a node being repaired); True if it changed."""
        if at >= self.start or self.end == self.start:
            return False
        self.end = self.start
        FaultWindow.closed += 1
        return True


class Effect(Protocol):
    """How a fault changes one track's value at time t. `None` means the series is absent."""

    removes: ClassVar[bool]
    """Absence effects run after value effects, so a gone series stays gone."""

    def apply(self, value: float | None, t: float) -> float | None: ...


@dataclass(frozen=True)
class Ramp:
    """A counter climbs `per_second` (whole counts) from the window's start until its end."""

    window: FaultWindow
    per_second: float
    removes: ClassVar[bool] = False

    def apply(self, value: float | None, t: float) -> float | None:
        if value is None or t < self.window.start:
            return value
        return value + math.floor(self.per_second * (self.window.clip(t) - self.window.start))


@dataclass(frozen=True)
class Step:
    """Add `delta` from the window's start; `persist` keeps it after the window ends."""

    window: FaultWindow
    delta: float
    persist: bool = True
    removes: ClassVar[bool] = False

    def apply(self, value: float | None, t: float) -> float | None:
        if value is None or t < self.window.start:
            return value
        if self.persist or self.window.active(t):
            return value + self.delta
        return value


@dataclass(frozen=True)
class Hold:
    """A gauge reads `value` while the window is open; `persist` keeps it afterwards."""

    window: FaultWindow
    value: float
    persist: bool = False
    removes: ClassVar[bool] = False

    def apply(self, value: float | None, t: float) -> float | None:
        if value is None or t < self.window.start:
            return value
        if self.persist or self.window.active(t):
            return self.value
        return value


@dataclass(frozen=True)
class Scale:
    """A gauge is multiplied by `factor` while the window is open (clocks, bandwidth)."""

    window: FaultWindow
    factor: float
    removes: ClassVar[bool] = False

    def apply(self, value: float | None, t: float) -> float | None:
        if value is None or not self.window.active(t):
            return value
        return value * self.factor


@dataclass(frozen=True)
class Flap:
    """A gauge drops to `low` for `down_s` out of every `period_s` while the window is open."""

    window: FaultWindow
    low: float
    period_s: float
    down_s: float
    removes: ClassVar[bool] = False

    def apply(self, value: float | None, t: float) -> float | None:
        if value is None or not self.window.active(t):
            return value
        phase = (t - self.window.start) % self.period_s
        return self.low if phase < self.down_s else value


@dataclass(frozen=True)
class Gone:
    """The series is absent while the window is open (exporter, kubelet or GPU gone)."""

    window: FaultWindow
    removes: ClassVar[bool] = True

    def apply(self, value: float | None, t: float) -> float | None:
        return None if self.window.active(t) else value


@dataclass(frozen=True)
class Freeze:
    """A lying detector: while the window is open the series keeps reporting the value it had
    when the window opened (a stuck exporter, a DCGM field cache that stopped updating). The
    scrape still succeeds (`up` stays 1); only the values stop moving."""

    window: FaultWindow
    removes: ClassVar[bool] = False

    def apply(self, value: float | None, t: float) -> float | None:
        return value  # Track.value reads the series at the window's start instead

    def frozen_at(self, t: float) -> float | None:
        """The time whose value the series shows at `t`, or None when not frozen."""
        return self.window.start if self.window.active(t) else None


@dataclass(frozen=True)
class Computed:
    """The value comes from live fleet state (e.g. the cordon flag) or a workload model, not
    from a fault. `monotonic`: a counter that never resets (rate/increase need two reads)."""

    read: Callable[[float], float]
    monotonic: bool = False
    removes: ClassVar[bool] = False

    def apply(self, value: float | None, t: float) -> float | None:
        return None if value is None else self.read(t)


def order_effects(effects: Sequence[Effect]) -> tuple[Effect, ...]:
    """Value effects first, absence last."""
    return tuple(sorted(effects, key=lambda e: e.removes))


@dataclass(eq=False, slots=True)
class Track:
    """One series: fixed labels, a linear baseline `base + slope·t`, and fault effects.

    `labels` may be shared between tracks of the same GPU/HCA: treat it as read-only.
    """

    node: str
    labels: dict[str, str]
    base: float
    slope: float = 0.0
    effects: tuple[Effect, ...] = ()
    entity: tuple[str, ...] = ()
    value_labels: Callable[[float], dict[str, str]] | None = field(default=None, repr=False)
    group: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)
    """Reads' memo (simulator/selection.py): for the last two ways it was grouped (the
    identity labels and, for `value_labels`, the value), flat pairs of that key and the sample
    identity then, newest first, so a cached track is grouped once, not on every read."""

    def value(self, t: float) -> float | None:
        for effect in self.effects:
            if isinstance(effect, Freeze) and (at := effect.frozen_at(t)) is not None:
                t = at
        value: float | None = self.base + self.slope * t
        for effect in self.effects:
            value = effect.apply(value, t)
        return value

    def labels_for(self, value: float) -> dict[str, str]:
        """Labels as exported with this value (the XID gauge carries `err_code`)."""
        if self.value_labels is None:
            return self.labels
        return {**self.labels, **self.value_labels(value)}


class SampleGrid:
    """Sample times for a range `[start, end]`: `end`, `end − step`, ... and `start` itself.
    The times are laid out when first asked for (a healthy track's closed form never does)."""

    __slots__ = ("_mean", "_points", "end", "start", "step")

    def __init__(self, *, start: float, end: float, step: float = SCRAPE_INTERVAL_S) -> None:
        self.start = start
        self.end = end
        self.step = step
        self._points: tuple[float, ...] | None = None
        self._mean: float | None = None

    @classmethod
    def over(cls, *, start: float, end: float, step: float = SCRAPE_INTERVAL_S) -> SampleGrid:
        return cls(start=start, end=end, step=step)

    @property
    def points(self) -> tuple[float, ...]:
        if self._points is None:
            start, end, step = self.start, self.end, self.step
            points = [end - k * step for k in range(int((end - start) // step), -1, -1)]
            if points[0] > start:
                points.insert(0, start)
            self._points = tuple(points)
        return self._points

    @property
    def mean(self) -> float:
        """Mean of the sample times (avg_over_time of a linear track is its value there)."""
        if self._mean is None:
            self._mean = sum(self.points) / len(self.points)
        return self._mean

    @property
    def seconds(self) -> float:
        return self.end - self.start


def evaluate(
    track: Track,
    fn: str,
    *,
    grid: SampleGrid,
    value: Callable[[float], float | None] | None = None,
) -> tuple[float, float] | None:
    """Apply a range function to a track. Returns (result, last value seen) or None if absent.

    `rate` and `increase` follow counter semantics (a drop is a reset); `changes`, `*_over_time`
    use the samples on the grid; `last` is the value at the end of the range. `value` reads the
    track at a time (default `track.value`): a memo of it lets many grids share their samples.
    """
    if not track.effects:
        return _evaluate_linear(track, fn, grid=grid)
    read = track.value if value is None else value
    if fn in ("rate", "increase") and _is_monotonic(track.effects):
        return _evaluate_counter(track, fn, grid=grid, read=read)
    if fn == "last":
        last = read(grid.end)
        return None if last is None else (last, last)
    present = [v for v in map(read, grid.points) if v is not None]
    if not present:
        return None
    return _reduce(fn, present, seconds=grid.seconds)


def _is_monotonic(effects: tuple[Effect, ...]) -> bool:
    """Only a never-resetting model counter, plus absence: its values need not be sampled."""
    return any(isinstance(e, Computed) and e.monotonic for e in effects) and all(
        e.removes or (isinstance(e, Computed) and e.monotonic) for e in effects
    )


def _evaluate_counter(
    track: Track, fn: str, *, grid: SampleGrid, read: Callable[[float], float | None]
) -> tuple[float, float] | None:
    """rate/increase of a monotonic counter: the same result as sampling every grid point,
    from the first and last points where the series is present."""
    gaps = [e for e in track.effects if e.removes]
    present = [p for p in grid.points if all(g.apply(0.0, p) is not None for g in gaps)]
    if len(present) < 2:
        return None
    first, last = read(present[0]), read(present[-1])
    if first is None or last is None:
        return None
    increase = last - first
    return (increase if fn == "increase" else increase / grid.seconds), last


def _reduce(fn: str, values: list[float], *, seconds: float) -> tuple[float, float] | None:
    last = values[-1]
    if fn == "max_over_time":
        return max(values), last
    if fn == "min_over_time":
        return min(values), last
    if fn == "avg_over_time":
        return sum(values) / len(values), last
    if fn == "changes":
        return float(sum(1 for a, b in zip(values, values[1:], strict=False) if a != b)), last
    if len(values) < 2:
        return None
    increase = sum(b - a if b >= a else b for a, b in zip(values, values[1:], strict=False))
    if fn == "increase":
        return increase, last
    if fn == "rate":
        return increase / seconds, last
    raise ValueError(f"unknown range function '{fn}'")


def _evaluate_linear(track: Track, fn: str, *, grid: SampleGrid) -> tuple[float, float]:
    """Closed forms for a track with no effects (the healthy majority)."""
    base, slope = track.base, track.slope
    last = base + slope * grid.end
    if fn == "rate":  # the common cases, without a list (the same arithmetic as below)
        return slope, last
    if fn == "last":
        return last, last
    if fn == "max_over_time":
        return max(base + slope * grid.start, last), last
    if fn == "min_over_time":
        return min(base + slope * grid.start, last), last
    return evaluate_linear(track, fn, grids=(grid,))[0]


def evaluate_linear(
    track: Track, fn: str, *, grids: Sequence[SampleGrid]
) -> list[tuple[float, float]]:
    """`evaluate` of a track with no effects over each of `grids`, in closed form (one pass
    per track, not one call per grid: a range read's points)."""
    base, slope = track.base, track.slope
    if fn == "last":
        return [(last, last) for last in [base + slope * g.end for g in grids]]
    if fn == "max_over_time":
        return [
            (max(base + slope * g.start, last), last)
            for g, last in [(g, base + slope * g.end) for g in grids]
        ]
    if fn == "min_over_time":
        return [
            (min(base + slope * g.start, last), last)
            for g, last in [(g, base + slope * g.end) for g in grids]
        ]
    if fn == "avg_over_time":
        return [(base + slope * g.mean, base + slope * g.end) for g in grids]
    if fn == "changes":
        return [
            (0.0 if slope == 0 else float(len(g.points) - 1), base + slope * g.end) for g in grids
        ]
    if fn == "increase":
        return [(slope * g.seconds, base + slope * g.end) for g in grids]
    if fn == "rate":
        return [(slope, base + slope * g.end) for g in grids]
    raise ValueError(f"unknown range function '{fn}'")
