"""Client-side pacing for API adapters: a QPS token bucket and exponential backoff.

Pure timing logic over an injected monotonic clock and sleep, so tests drive it with a fake
clock and never sleep. Used by `integrations.k8s`; knows nothing about HTTP.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class TokenBucket:
    """At most `qps` requests a second on average, bursts of up to `burst` (client-go's
    flowcontrol.NewTokenBucketRateLimiter). `take()` waits for a token."""

    def __init__(
        self,
        *,
        qps: float,
        burst: int,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("the request rate needs qps > 0 and burst >= 1")
        self.qps, self.burst = qps, burst
        self._clock, self._sleep = clock, sleep
        self._tokens = float(burst)
        self._at = clock()
        self._lock = threading.Lock()

    def take(self) -> float:
        """Take one token, waiting for it if needed; returns the seconds waited."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.qps)
            self._at = now
            self._tokens -= 1.0
            wait = 0.0 if self._tokens >= 0 else -self._tokens / self.qps
        if wait:
            self._sleep(wait)
        return wait


def backoff_delay(attempt: int, *, base: float, cap: float = 30.0) -> float:
    """Seconds before retry number `attempt` (0-based): base, 2*base, 4*base ... up to `cap`."""
    return float(min(cap, base * (2**attempt)))
