"""The serve-time scheduler job: approvals past their expiry take the rejected branch without
anyone clicking, and the incident's presentation is told.

Covers: one tick before the expiry does nothing; one tick after it rejects the run (nothing
executed) and calls back with the incident id; a tick with nothing due returns 0.
"""

from __future__ import annotations

from pathlib import Path

from bot.config import Settings
from bot.work.scheduler import Jobs
from bot.wiring.runtime import open_runtime
from tests.journeys.test_alert_journey_restart import fire


def test_tick_expires_overdue_approvals_and_reports_them(
    settings: Settings, scenario_dir: Path
) -> None:
    with open_runtime(
        settings, scenario_path=scenario_dir / "ecc-dbe-storm.yaml", fresh=True
    ) as rt:
        incident_id = fire(rt)
        rt.engine.start(
            rt.catalog.get("ecc-storm"),
            inputs={"node": "gpu-node-03"},
            incident_id=incident_id,
            requester="alertmanager",
        )
        told: list[int] = []
        jobs = Jobs(rt.engine, interval_seconds=30, on_expired=told.append)
        assert jobs.expire_approvals() == 0
        rt.clock.advance(rt.deps.policy.approval_ttl)  # type: ignore[attr-defined]
        assert jobs.expire_approvals() == 1
        assert told == [incident_id]
        assert rt.fleet.cordon_calls["gpu-node-03"] == 0
        assert jobs.expire_approvals() == 0
