"""Periodic jobs of `gpu-oncall serve` (APScheduler): approvals past their expiry take the
rejected branch even when nobody clicks, and their incidents' messages are refreshed; and work
nobody holds (new, due, or left by a dead worker or replica) is taken over, once at start-up
and then every `work.takeover_seconds`.

One leader: with several replicas, only the process `Leadership.check()` names (asked again at
every tick, storage/leader.py) runs the jobs; the others skip their ticks until the leader dies
and one of them wins the lock. `on_leadership` is told the answer at every tick (the
`gpu_oncall_leader` gauge). Without a leadership the process always leads (one process).

A boundary: a failing tick is logged with a reference and the next tick runs as usual.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from apscheduler.schedulers.background import BackgroundScheduler

from bot.engine.running import RunEngine
from storage.leader import AlwaysLeader, Leadership

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
        leadership: Leadership | None = None,
        on_leadership: Callable[[bool], None] | None = None,
    ) -> None:
        self._engine, self._on_expired, self._take_over = engine, on_expired, take_over
        self._leadership: Leadership = leadership or AlwaysLeader()
        self._on_leadership = on_leadership
        self._leading: bool | None = None
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

    def leads(self) -> bool:
        """Ask the leadership now; log when the answer changes."""
        leading = self._leadership.check()
        if leading != self._leading:
            if leading:
                logger.info("periodic jobs: this process is the leader; running them")
            else:
                logger.info("periodic jobs: another process leads (or the database is away); "
                            "standing by")  # fmt: skip
            self._leading = leading
        if self._on_leadership is not None:
            self._on_leadership(leading)
        return leading

    def expire_approvals(self) -> int:
        """One tick: expire what is due. Returns how many runs took the rejected branch."""
        try:
            if not self.leads():
                return 0
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
            if not self.leads():
                return 0
            return self._take_over()
        except Exception:  # boundary: a scheduler job must not die with one bad tick
            logger.exception("work takeover tick failed (ref %s)", uuid.uuid4().hex[:6])
            return 0
