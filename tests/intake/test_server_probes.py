"""The server's other routes: /healthz, /readyz, /metrics, mounts, unknown paths and methods.

Covers: /healthz answers 200 without a token; /readyz is 200 with the database and checkpointer
reachable, and 503 naming the checkpointer once its connection is closed, or the database once
its file cannot be opened; /metrics counts received, deduplicated and unroutable alerts, webhooks
by code, incidents by state and MTTR histograms by runbook/layer/severity, and `promtool check
metrics` accepts it; the simulated exporters are mounted at /sim/metrics (what a real Prometheus
scrapes in sim mode); an unknown path is a 404 listing the routes, a wrong method a 405.
"""

from __future__ import annotations

import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from servers.oncall import Bot, alert, running_bot, webhook
from servers.prometheus import require_binary

from bot.config import Settings


@pytest.fixture
def bot(bot_settings: Settings, scenario_dir: Path) -> Bot:  # type: ignore[misc]
    with running_bot(bot_settings, scenario=scenario_dir / "ecc-dbe-storm.yaml") as running:
        yield running


def test_healthz_answers_without_a_token(bot: Bot) -> None:
    response = bot.http.get("/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_readyz_is_ready_with_database_and_checkpointer(bot: Bot) -> None:
    assert bot.http.get("/readyz").json() == {"status": "ready"}


def test_readyz_is_503_naming_the_checkpointer_when_it_is_gone(bot: Bot) -> None:
    # The checkpoint file gone and every connection of the saver (one per thread) closed, as a
    # crashed disk or a lost PostgreSQL would leave them: no thread can read a checkpoint.
    saver = bot.rt.engine.checkpointer
    path = Path(saver._path)  # type: ignore[attr-defined]
    saver.close()  # type: ignore[attr-defined]
    for leftover in path.parent.glob(path.name + "*"):
        leftover.unlink()
    path.mkdir()  # a directory where the file was: SQLite cannot open it
    response = bot.http.get("/readyz")
    assert response.status_code == 503
    assert set(response.json()["problems"]) == {"checkpointer"}


def test_readyz_is_503_naming_the_database_when_it_cannot_be_opened(
    bot: Bot, bot_settings: Settings
) -> None:
    path = Path(bot_settings.storage.url.removeprefix("sqlite:///"))
    bot.rt.db.dispose()
    for leftover in path.parent.glob(path.name + "*"):
        leftover.unlink()
    path.mkdir()  # a directory where the database file was: SQLite cannot open it
    response = bot.http.get("/readyz")
    assert response.status_code == 503
    assert "database" in response.json()["problems"]


def test_metrics_count_alerts_incidents_and_figures(bot: Bot, tmp_path: Path) -> None:
    starts = bot.rt.fleet.t0 - timedelta(minutes=10)
    ecc = alert("GPUEccStorm", {"Hostname": "gpu-node-03"}, starts_at=starts)
    stray = alert("DiskAlmostFull", {"instance": "gpu-node-02"}, starts_at=starts)
    assert bot.post_alerts(webhook([ecc, stray])).status_code == 200
    assert bot.post_alerts(webhook([ecc])).status_code == 200
    assert bot.post_alerts(b"[]").status_code == 400
    bot.settle()
    resolved = dict(ecc, status="resolved", endsAt=bot.rt.clock.now().isoformat())
    assert bot.post_alerts(webhook([resolved])).status_code == 200

    response = bot.http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    text = response.text
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    figure = (("layer", "gpu_hardware"), ("runbook", "ecc-storm"), ("severity", "critical"))
    for name, labels, value in [
        ("gpu_oncall_alerts_received_total", (), 4),
        ("gpu_oncall_alerts_deduplicated_total", (), 1),
        ("gpu_oncall_alerts_unroutable_total", (), 1),
        ("gpu_oncall_webhooks_total", (("code", "200"),), 3),
        ("gpu_oncall_webhooks_total", (("code", "400"),), 1),
        ("gpu_oncall_triage_runs_total", (("outcome", "awaiting_approval"),), 1),
        ("gpu_oncall_incidents", (("state", "resolved"),), 1),
        ("gpu_oncall_incidents", (("state", "open"),), 0),
        ("gpu_oncall_mttr_seconds_count", figure, 1),
        ("gpu_oncall_time_to_diagnosis_seconds_count", figure, 1),
    ]:
        assert samples.get((name, labels)) == value, (name, labels)
    exposition = tmp_path / "metrics.txt"
    exposition.write_text(text)
    with exposition.open() as stdin:
        done = subprocess.run(
            [require_binary("promtool", package="prometheus"), "check", "metrics"],
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    assert done.returncode == 0, done.stdout + done.stderr


def test_sim_exporters_are_mounted_for_prometheus(bot: Bot) -> None:
    response = bot.http.get("/sim/metrics")
    assert response.status_code == 200
    assert 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="5"' in response.text
    assert bot.http.get("/sim/metrics/dcgm").status_code == 200


def test_unknown_path_is_404_listing_routes_and_wrong_method_405(bot: Bot) -> None:
    missing = bot.http.get("/nope")
    assert missing.status_code == 404
    assert "/alerts" in missing.json()["routes"]
    assert "/sim/metrics" in missing.json()["routes"]
    wrong = bot.http.get("/alerts")
    assert (wrong.status_code, wrong.headers["Allow"]) == (405, "POST")
