"""POST /alerts on the running server (bot.serving.app on 127.0.0.1), called as Alertmanager calls it.

Covers: a malformed body gets 400 with a JSON error naming the field, and nothing is stored;
without (or with a wrong) bearer token the answer is 401 and nothing is stored; a webhook is
answered once its alert is stored, opens one incident per (runbook, target) and its triage run
finishes in the background at the approval; a redelivered webhook creates no alert, incident,
timeline or run row; a second alert for the same target attaches to the open incident and starts
no second run; a resolved alert resolves the incident and stamps its MTTR timestamps; an alert
no runbook takes is stored and listed by `gpu-oncall alerts --unrouted`.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from servers.oncall import Bot, alert, row_counts, running_bot, webhook

from bot.cli.main import main
from bot.config import Settings
from bot.incidents.views import incident_view
from storage import alerts as alert_store
from storage import incidents as incident_store
from storage import runs as run_store
from storage.db import session_scope


@pytest.fixture
def bot(bot_settings: Settings, scenario_dir: Path) -> Bot:  # type: ignore[misc]
    with running_bot(bot_settings, scenario=scenario_dir / "ecc-dbe-storm.yaml") as running:
        yield running


def ecc_alert(bot: Bot, **kwargs: object) -> dict[str, object]:
    starts = bot.rt.fleet.t0 - timedelta(minutes=10)
    return alert("GPUEccStorm", {"Hostname": "gpu-node-03", "gpu": "5"}, starts_at=starts, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{not json", "body"),
        (b'{"version": "4"}', "groupKey"),
        (
            json.dumps(
                {
                    "version": "4",
                    "groupKey": "g",
                    "status": "firing",
                    "receiver": "gpu-oncall",
                    "alerts": [{"status": "firing", "labels": {}, "startsAt": "yesterday"}],
                }
            ).encode(),
            "alerts.0.startsAt",
        ),
    ],
)
def test_malformed_webhook_gets_400_naming_the_field_and_stores_nothing(
    bot: Bot, body: bytes, field: str
) -> None:
    before = row_counts(bot.rt.db)
    response = bot.post_alerts(body)
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert f"'{field}'" in response.json()["error"]
    assert row_counts(bot.rt.db) == before


def test_half_valid_webhook_stores_none_of_its_alerts(bot: Bot) -> None:
    good = ecc_alert(bot)
    bad = dict(good, startsAt="not a time")
    response = bot.post_alerts(webhook([good, bad]))
    assert response.status_code == 400
    assert response.json()["field"] == "alerts.1.startsAt"
    assert row_counts(bot.rt.db)["alerts"] == 0


@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_webhook_without_the_bearer_token_gets_401_and_stores_nothing(
    bot: Bot, token: str | None
) -> None:
    response = bot.post_alerts(webhook([ecc_alert(bot)]), token=token)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert row_counts(bot.rt.db) == {"alerts": 0, "incidents": 0, "events": 0, "runs": 0}


def test_alert_opens_one_incident_and_is_triaged_in_the_background(bot: Bot) -> None:
    response = bot.post_alerts(webhook([ecc_alert(bot)]))
    assert response.status_code == 200
    assert response.json()["incidents"] == ["INC-1"]
    assert response.json()["triage_queued"] == ["INC-1"]
    bot.settle()
    with session_scope(bot.rt.db) as session:
        incident = incident_store.get_incident(session, 1)
        assert incident is not None
        assert (incident.runbook, incident.target, incident.state) == (
            "ecc-storm",
            "gpu-node-03",
            "awaiting_approval",
        )
        assert incident.layer == "gpu_hardware"
        assert incident.culprits == ["gpu-node-03"]
        run = run_store.latest_run_for_incident(session, 1)
        assert run is not None and run.status == "awaiting_approval"


def test_redelivered_webhook_creates_nothing_new(bot: Bot) -> None:
    body = webhook([ecc_alert(bot)])
    assert bot.post_alerts(body).status_code == 200
    bot.settle()
    before = row_counts(bot.rt.db)
    again = bot.post_alerts(body)
    assert again.status_code == 200
    assert again.json()["duplicates"] == 1
    assert again.json()["triage_queued"] == []
    bot.settle()
    assert row_counts(bot.rt.db) == before
    assert before["incidents"] == 1 and before["runs"] == 1


def test_second_alert_for_the_target_attaches_without_a_second_run(bot: Bot) -> None:
    assert bot.post_alerts(webhook([ecc_alert(bot)])).status_code == 200
    bot.settle()
    starts = bot.rt.fleet.t0 - timedelta(minutes=9)
    xid = alert("GPUXidBurst", {"Hostname": "gpu-node-03", "gpu": "5"}, starts_at=starts)
    response = bot.post_alerts(webhook([xid]))
    assert response.json() == {
        "received": 1,
        "duplicates": 0,
        "unroutable": [],
        "incidents": ["INC-1"],
        "triage_queued": [],
    }
    bot.settle()
    counts = row_counts(bot.rt.db)
    assert (counts["incidents"], counts["runs"], counts["alerts"]) == (1, 1, 2)


def test_resolved_alert_resolves_the_incident_with_its_mttr_timestamps(bot: Bot) -> None:
    firing = ecc_alert(bot)
    assert bot.post_alerts(webhook([firing])).status_code == 200
    bot.settle()
    ended = bot.rt.clock.now()
    resolved = ecc_alert(bot, status="resolved", ends_at=ended)
    assert bot.post_alerts(webhook([resolved])).status_code == 200
    with session_scope(bot.rt.db) as session:
        row = incident_store.get_incident(session, 1)
        assert row is not None
        view = incident_view(row)
        kinds = [e.kind for e in incident_store.list_events(session, 1)]
        stored = alert_store.list_alerts_for_incident(session, 1)
    assert view.state == "resolved"
    assert view.fired_at == bot.rt.fleet.t0 - timedelta(minutes=10)
    assert view.detected_at is not None and view.diagnosed_at is not None
    assert view.resolved_at is not None and view.resolved_at >= ended
    figures = view.figures()
    assert figures.mttr is not None and figures.mttr >= timedelta(minutes=10)
    assert figures.mttd is not None and figures.time_to_diagnosis is not None
    assert kinds[-3:] == ["alert_resolved", "state_changed", "incident_resolved"]
    assert [a.status for a in stored] == ["firing", "resolved"]


def test_unroutable_alert_is_stored_and_listed_as_unrouted(
    bot: Bot,
    bot_settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    starts = bot.rt.clock.now() - timedelta(minutes=1)
    stray = alert(
        "DiskAlmostFull", {"instance": "gpu-node-02"}, starts_at=starts, severity="warning"
    )
    response = bot.post_alerts(webhook([stray]))
    assert response.status_code == 200
    assert response.json()["unroutable"] == [stray["fingerprint"]]
    assert row_counts(bot.rt.db)["alerts"] == 1
    assert row_counts(bot.rt.db)["incidents"] == 0

    monkeypatch.setenv("GPU_ONCALL_STORAGE__URL", bot_settings.storage.url)
    assert main(["alerts", "--unrouted", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(a["alertname"], a["incident"]) for a in listed] == [("DiskAlmostFull", None)]
    assert "no runbook is triggered by alert 'DiskAlmostFull'" in listed[0]["reason"]
