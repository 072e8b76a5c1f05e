"""Time for everything in the bot: a Clock protocol, the system clock and a fake one.

All datetimes are timezone-aware UTC. Nothing else in the bot calls `datetime.now` directly.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Tells the time and waits. `sleep` on a fake clock advances time instead of blocking."""

    def now(self) -> datetime: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Wall-clock time."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class FakeClock:
    """A clock that only moves when told to (or when something sleeps on it).

    Used by the simulated fleet, the demo and the tests so that a 10-minute verification
    window passes instantly and deterministically.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        if self._now.tzinfo is None:
            raise ValueError("FakeClock needs a timezone-aware start time")

    def now(self) -> datetime:
        return self._now

    def sleep(self, seconds: float) -> None:
        self.advance(timedelta(seconds=seconds))

    def advance(self, delta: timedelta) -> None:
        self._now += delta


class SimulatedClock(FakeClock):
    """Real elapsed time plus whatever was slept: the simulated fleet's clock.

    Work takes the time it really takes (so time to diagnosis is measured honestly), while a
    verification window that sleeps passes at once.
    """

    def __init__(self, start: datetime | None = None) -> None:
        super().__init__(start)
        self._origin = time.monotonic()

    def now(self) -> datetime:
        return self._now + timedelta(seconds=time.monotonic() - self._origin)
