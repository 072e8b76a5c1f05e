"""Periodic jobs of `gpu-oncall serve` (APScheduler): approvals past their expiry take the
rejected branch even when nobody clicks, and their incidents' messages are refreshed; and work
nobody holds (new, due, or left by a dead worker or replica) is taken over, once at start-up
and then every `work.takeover_seconds`.

A boundary: a failing tick is logged with a reference and the next tick runs as usual.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from apscheduler.schedulers.background import BackgroundScheduler

from bot.engine.running import RunEngine

logger = logging.getLogger(__name__)

IncidentCallback = Callable[[int], None]


class Jobs:
    def __init__(
        self,
        engine: RunEngine,
        *,
        interval_seconds: float,
        on_expired: IncidentCallback | None = None,
        take_over: Callable[[], int] | None = None,
        takeover_seconds: float = 15.0,
    ) -> None:
        self._engine, self._on_expired, self._take_over = engine, on_expired, take_over
        self._scheduler = BackgroundScheduler(timezone="UTC")
        self._scheduler.add_job(
            self.expire_approvals,
            "interval",
            seconds=interval_seconds,
            id="expire-approvals",
            max_instances=1,
            coalesce=True,
        )
        if take_over is not None:
            self._scheduler.add_job(
                self.take_over,
                "interval",
                seconds=takeover_seconds,
                id="take-over-work",
                max_instances=1,
                coalesce=True,
                next_run_time=datetime.now(UTC),  # at start-up: what a dead process left
            )

    def start(self) -> Jobs:
        self._scheduler.start()
        return self

    def shutdown(self) -> None:
        self._scheduler.shutdown(wait=True)

    def expire_approvals(self) -> int:
        """One tick: expire what is due. Returns how many runs took the rejected branch."""
        try:
            outcomes = self._engine.expire_due()
            for outcome in outcomes:
                if self._on_expired is not None:
                    self._on_expired(int(outcome.incident.removeprefix("INC-")))
        except Exception:  # boundary: a scheduler job must not die with one bad tick
            logger.exception("approval expiry tick failed (ref %s)", uuid.uuid4().hex[:6])
            return 0
        return len(outcomes)

    def take_over(self) -> int:
        """One tick: queue the work nobody holds. Returns how many rows were queued."""
        if self._take_over is None:
            return 0
        try:
            return self._take_over()
        except Exception:  # boundary: a scheduler job must not die with one bad tick
            logger.exception("work takeover tick failed (ref %s)", uuid.uuid4().hex[:6])
            return 0
