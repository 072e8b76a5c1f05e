"""Integrals of piecewise-constant rates: how the simulated workloads turn rates into counters.

A training job's steps/s or a vLLM replica's requests/s only change when a fault window opens or
closes (or a periodic checkpoint starts or ends), so a counter's value at `t` is its value at
t0 plus the exact integral of its rate, evaluated once per constant segment. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from simulator.tracks import FaultWindow


def integrate(
    rate: Callable[[float], float], *, start: float, end: float, breaks: Iterable[float]
) -> float:
    """The integral of `rate` from `start` to `end` (negative when end < start), for a rate that
    is constant between consecutive `breaks`: each segment is evaluated at its midpoint."""
    if end == start:
        return 0.0
    lo, hi = (start, end) if start < end else (end, start)
    points = sorted({lo, hi, *(b for b in breaks if lo < b < hi)})
    total = sum((b - a) * rate((a + b) / 2.0) for a, b in zip(points, points[1:], strict=False))
    return total if end > start else -total


def window_breaks(windows: Iterable[FaultWindow]) -> list[float]:
    """Where the windows open and close (the open end of a running window is not a break)."""
    out: list[float] = []
    for window in windows:
        out.append(window.start)
        if window.end is not None:
            out.append(window.end)
    return out


@dataclass(frozen=True)
class Periodic:
    """Something that happens every `every_s` for `length_s` while `window` is open, the first
    time at the window's start (checkpoint saves)."""

    window: FaultWindow
    every_s: float
    length_s: float

    def phase(self, t: float) -> float | None:
        """Seconds since the latest occurrence began, or None outside the window."""
        if not self.window.active(t):
            return None
        return (t - self.window.start) % self.every_s

    def during(self, t: float) -> bool:
        phase = self.phase(t)
        return phase is not None and phase < self.length_s

    def breaks(self, lo: float, hi: float) -> list[float]:
        """Starts and ends of the occurrences that fall in `[lo, hi]`."""
        start = self.window.start
        stop = self.window.clip(hi)
        out: list[float] = []
        k = max(0, int((lo - start) // self.every_s))
        while start + k * self.every_s <= stop:
            begin = start + k * self.every_s
            out.extend((begin, begin + self.length_s))
            k += 1
        return out


def windows_key() -> int:
    """A cache key that changes whenever any fault window is closed (drain, repair)."""
    return FaultWindow.closed
