"""A redelivered webhook is answered from one read (bot.intake.webhooks, issue 21): on SQLite it
needs neither the writers' turn nor the write lock, so it is answered while another writer holds
the database, with the same answer a stored webhook's redelivery always had.

Covers: the first delivery stores two alerts and opens one incident; with another connection
holding SQLite's write lock (BEGIN IMMEDIATE), the redelivery is answered 200 with both alerts
as duplicates of that incident and nothing stored or queued; a webhook with one new alert among
stored ones is not answered from the read: it stores the new alert only, attached to the same
incident.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr
from servers.oncall import TOKEN, Bot, alert, row_counts, running_bot, webhook

from bot.config import ServerSettings, Settings, StorageSettings


@pytest.fixture
def bot(tmp_path: Path, scenario_dir: Path) -> Iterator[Bot]:
    settings = Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        server=ServerSettings(token=SecretStr(TOKEN), workers=1),
    )
    with running_bot(settings, scenario=scenario_dir / "ecc-dbe-storm.yaml") as running:
        yield running
        running.settle()


def test_a_redelivery_is_answered_while_another_writer_holds_the_database(
    bot: Bot, tmp_path: Path
) -> None:
    starts = bot.rt.fleet.t0 - timedelta(minutes=10)
    ecc = alert("GPUEccStorm", {"Hostname": "gpu-node-03"}, starts_at=starts)
    xid = alert("GPUXidBurst", {"Hostname": "gpu-node-03"}, starts_at=starts)
    first = bot.post_alerts(webhook([ecc, xid]))
    assert first.status_code == 200, first.text
    assert first.json()["incidents"] == ["INC-1"]
    bot.settle()
    before = row_counts(bot.rt.db)
    holder = sqlite3.connect(tmp_path / "oncall.db", isolation_level=None, timeout=0)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the write lock
    try:
        again = bot.post_alerts(webhook([ecc, xid]))
        assert again.status_code == 200, again.text
        assert again.json() == {
            "received": 2,
            "duplicates": 2,
            "unroutable": [],
            "incidents": ["INC-1"],
            "triage_queued": [],
        }
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert row_counts(bot.rt.db) == before
    other = alert("GPUEccStorm", {"Hostname": "gpu-node-03", "gpu": "7"}, starts_at=starts)
    mixed = bot.post_alerts(webhook([ecc, other]))
    assert mixed.status_code == 200, mixed.text
    assert (mixed.json()["duplicates"], mixed.json()["incidents"]) == (1, ["INC-1"])
    after = row_counts(bot.rt.db)
    assert (after["alerts"], after["incidents"]) == (before["alerts"] + 1, before["incidents"])
