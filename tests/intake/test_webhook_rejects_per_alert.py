"""Per-alert screening of a webhook (bot.intake.webhooks), on SQLite and on PostgreSQL.

Covers: a NUL byte in `alertname` or in a target label rejects that alert only: the webhook is
answered 200 (never a 503 retry loop for input that can never succeed), its batch-mates are
stored and grouped, and the rejected alerts are stored with their reason, listed by
`alerts --unrouted`; a redelivery stores nothing new. The same text rules hold on both
backends. An alert whose `startsAt` is outside the accepted window (year 500, year 1) is
rejected the same way and opens no incident.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr
from servers.oncall import TOKEN, Bot, alert, row_counts, running_bot, webhook

from bot.config import ServerSettings, Settings, StorageSettings
from bot.intake.listing import alert_rows
from storage.db import session_scope


@pytest.fixture(params=["sqlite", "postgres"])
def bot(request: pytest.FixtureRequest, tmp_path: Path, scenario_dir: Path) -> Iterator[Bot]:
    url = (
        f"sqlite:///{tmp_path / 'oncall.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    settings = Settings(
        storage=StorageSettings(url=url), server=ServerSettings(token=SecretStr(TOKEN), workers=2)
    )
    with running_bot(settings, scenario=scenario_dir / "ecc-dbe-storm.yaml") as running:
        yield running
        running.settle()


def unrouted_reasons(bot: Bot) -> list[str]:
    routes = bot.rt.catalog.alert_routes()
    with session_scope(bot.rt.db) as session:
        rows = alert_rows(session, routes=routes, unrouted=True, limit=20)
    return sorted(str(row["reason"]) for row in rows)


def test_a_nul_byte_rejects_its_alert_and_stores_the_rest(bot: Bot) -> None:
    starts = bot.rt.fleet.t0 - timedelta(minutes=10)
    good = alert("GPUEccStorm", {"Hostname": "gpu-node-03"}, starts_at=starts)
    bad_name = alert("GPUEcc\x00Storm", {"Hostname": "gpu-node-04"}, starts_at=starts)
    bad_target = alert("GPUEccStorm", {"Hostname": "gpu-node-\x0005"}, starts_at=starts)
    response = bot.post_alerts(webhook([good, bad_name, bad_target]))
    assert response.status_code == 200, response.text
    assert response.json()["rejected"] == 2
    assert response.json()["incidents"] == ["INC-1"]
    reasons = unrouted_reasons(bot)
    assert reasons == [
        "rejected: label 'Hostname' holds a NUL character",
        "rejected: label 'alertname' holds a NUL character",
    ]
    before = {k: v for k, v in row_counts(bot.rt.db).items() if k in ("alerts", "incidents")}
    again = bot.post_alerts(webhook([good, bad_name, bad_target]))
    assert again.status_code == 200
    assert again.json()["duplicates"] == 3
    assert {k: row_counts(bot.rt.db)[k] for k in before} == before == {"alerts": 3, "incidents": 1}


@pytest.mark.parametrize("starts", ["0500-01-01T00:00:00Z", "0001-01-01T00:00:00Z"])
def test_a_start_outside_the_window_is_rejected_without_an_incident(bot: Bot, starts: str) -> None:
    good_start = bot.rt.fleet.t0 - timedelta(minutes=10)
    ancient = alert("GPUEccStorm", {"Hostname": "gpu-node-03"}, starts_at=good_start)
    ancient["startsAt"] = starts
    response = bot.post_alerts(webhook([ancient]))
    assert response.status_code == 200, response.text
    assert (response.json()["rejected"], response.json()["incidents"]) == (1, [])
    (reason,) = unrouted_reasons(bot)
    assert reason.startswith(f"rejected: startsAt {starts[:4]}-01-01T00:00:00+00:00 is outside")
    assert row_counts(bot.rt.db)["incidents"] == 0


def test_a_start_a_week_ahead_is_rejected_and_a_minute_ahead_is_taken(bot: Bot) -> None:
    now = bot.rt.clock.now().astimezone(UTC)
    ahead = alert("GPUEccStorm", {"Hostname": "gpu-node-03"}, starts_at=now + timedelta(days=7))
    skewed = alert("GPUEccStorm", {"Hostname": "gpu-node-05"}, starts_at=now + timedelta(minutes=1))
    response = bot.post_alerts(webhook([ahead, skewed]))
    assert response.status_code == 200, response.text
    assert response.json()["rejected"] == 1
    assert len(response.json()["incidents"]) == 1
