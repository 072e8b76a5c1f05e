"""A resolved alert whose end is earlier than the incident's own history, through the running
server: the conflict is recorded on the timeline, never a 500 (which Alertmanager retries forever).

Covers: in sim mode, approving as `gpu-oncall approve` does (a second runtime on the same
database, whose simulated clock runs a minute ahead of the server's, resumes the run through its
verification) and then POSTing the resolved alert answers 200, resolves the incident at its
`mitigated_at` (never before it, so MTTR >= MTTM), keeps every timestamp in order, and leaves a
timeline note naming both times; a redelivery of that resolved alert changes nothing.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from servers.oncall import Bot, alert, row_counts, running_bot, webhook

from bot.clock import FakeClock
from bot.config import Settings
from bot.incidents.mttr import check_order
from bot.wiring.runtime import open_runtime
from storage import incidents as incident_store
from storage.db import session_scope


@pytest.fixture
def bot(bot_settings: Settings, scenario_dir: Path) -> Bot:  # type: ignore[misc]
    with running_bot(bot_settings, scenario=scenario_dir / "ecc-dbe-storm.yaml") as running:
        yield running


def ecc_alert(bot: Bot, **kwargs: object) -> dict[str, object]:
    starts = bot.rt.fleet.t0 - timedelta(minutes=10)
    labels = {"Hostname": "gpu-node-03", "gpu": "5"}
    return alert("GPUEccStorm", labels, starts_at=starts, **kwargs)  # type: ignore[arg-type]


def approve_from_another_process(settings: Settings, scenario: Path, *, ahead: timedelta) -> None:
    """What `gpu-oncall approve INC-1` does, on a simulated clock `ahead` of the server's (the
    CLI's clock starts from the wall clock and the fleet's saved time, not the server's)."""
    with open_runtime(settings, scenario_path=scenario) as cli:
        assert isinstance(cli.clock, FakeClock)
        cli.clock.advance(ahead)
        outcome = cli.engine.resume("INC-1", decision="approve", actor="cli:bob")
        assert outcome.status == "completed"


def test_resolved_alert_after_a_cli_approval_is_recorded_not_a_500(
    bot: Bot, bot_settings: Settings, scenario_dir: Path
) -> None:
    assert bot.post_alerts(webhook([ecc_alert(bot)])).status_code == 200
    bot.settle()
    approve_from_another_process(
        bot_settings, scenario_dir / "ecc-dbe-storm.yaml", ahead=timedelta(minutes=1)
    )
    with session_scope(bot.rt.db) as session:
        mitigated = incident_store.get_incident(session, 1)
    assert mitigated is not None and mitigated.mitigated_at is not None
    ended = bot.rt.clock.now()
    assert ended < mitigated.mitigated_at  # the conflict this test is about

    resolved = webhook([ecc_alert(bot, status="resolved", ends_at=ended)])
    response = bot.post_alerts(resolved)
    assert response.status_code == 200, response.text
    with session_scope(bot.rt.db) as session:
        incident = incident_store.get_incident(session, 1)
        events = incident_store.list_events(session, 1)
    assert incident is not None and incident.state == "resolved"
    assert incident.resolved_at == mitigated.mitigated_at
    check_order(
        fired_at=incident.fired_at,
        detected_at=incident.detected_at,
        acknowledged_at=incident.acknowledged_at,
        diagnosed_at=incident.diagnosed_at,
        mitigated_at=incident.mitigated_at,
        resolved_at=incident.resolved_at,
    )
    (note,) = [e for e in events if e.kind == "note" and "before" in e.summary]
    assert note.payload["resolved_at"] == mitigated.mitigated_at.isoformat()
    assert note.payload["reported_at"] == ended.isoformat()
    at_resolution = [e.kind for e in events if e.at == incident.resolved_at]
    assert at_resolution[-3:] == ["note", "state_changed", "incident_resolved"]

    before = row_counts(bot.rt.db)
    assert bot.post_alerts(resolved).status_code == 200
    assert row_counts(bot.rt.db) == before
