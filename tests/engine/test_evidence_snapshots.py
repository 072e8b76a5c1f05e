"""Evidence snapshots: when a run localizes, the series behind its verdict are stored.

Covers: a triage of the ECC storm through the running bot stores one snapshot of the cited
signal (gpu.ecc.dbe_rate) with the culprit GPU, two sibling GPUs and three neighbouring nodes as
peers, from 10 minutes before the alert fired (30 minutes at least) to the verdict, with the
fault onset found inside the window; a telemetry backend that cannot answer the range read
leaves a timeline note and the run carries on to its approval (the run never fails for a
snapshot); the pure planning: a verdict that names no node or cites no signal plans nothing,
peers come from the gathered nodes first, neighbours by name order, and the onset is the first
point off the culprit's own baseline.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr
from servers.oncall import TOKEN, Bot, alert, running_bot, webhook

from bot.config import ServerSettings, Settings, StorageSettings
from bot.engine.snapshotting import (
    SnapshotPlan,
    find_onset,
    nearest_peers,
    plan_snapshot,
    select_series,
)
from integrations.errors import TelemetryUnavailable
from integrations.signals import SignalCatalog, load_signal_catalog
from integrations.telemetry import SeriesPoints, SignalQuery, SignalResult, Telemetry
from runbooks import SIGNALS_FILE
from storage import incidents as incident_store
from storage import snapshots as snapshot_store
from storage.db import session_scope

T = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class RangeDown:
    """Answers instant reads through `inner`; range reads fail as an unreachable backend does."""

    def __init__(self, inner: Telemetry) -> None:
        self.inner = inner

    def read(self, query: SignalQuery) -> SignalResult:
        return self.inner.read(query)

    def read_range(
        self, query: SignalQuery, *, start: datetime, end: datetime, step: timedelta
    ) -> list[SeriesPoints]:
        raise TelemetryUnavailable("Prometheus at http://127.0.0.1:9 did not answer", backend="x")


@pytest.fixture(scope="module")
def catalog() -> SignalCatalog:
    return load_signal_catalog(SIGNALS_FILE)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        server=ServerSettings(token=SecretStr(TOKEN), workers=1),
    )


@pytest.fixture
def bot(settings: Settings, scenario_dir: Path) -> Iterator[Bot]:
    with running_bot(settings, scenario=scenario_dir / "ecc-dbe-storm.yaml") as running:
        yield running


def fire(bot: Bot) -> datetime:
    assert bot.rt.fleet is not None
    starts = bot.rt.fleet.t0 - timedelta(minutes=10)
    firing = alert("GPUEccStorm", {"Hostname": "gpu-node-03", "gpu": "5"}, starts_at=starts)
    assert bot.post_alerts(webhook([firing])).status_code == 200
    bot.settle()
    return starts


def test_a_localized_run_stores_the_culprit_and_its_peers(bot: Bot) -> None:
    fired = fire(bot)
    with session_scope(bot.rt.db) as session:
        (snapshot,) = snapshot_store.list_snapshots(session, incident_id=1)
        incident = incident_store.get_incident(session, 1)
    assert incident is not None and incident.state == "awaiting_approval"
    assert snapshot.signal == "gpu.ecc.dbe_rate"
    # from 10 minutes before the alert fired, and at least 30 minutes long
    earliest = min(fired - timedelta(minutes=10), snapshot.end - timedelta(minutes=30))
    assert snapshot.start == earliest
    assert incident.diagnosed_at is not None and snapshot.end <= incident.diagnosed_at
    roles = [(s["node"], s["labels"].get("gpu"), s["role"]) for s in snapshot.series]
    assert roles[0] == ("gpu-node-03", "5", "culprit")
    assert [r for r in roles if r[2] == "culprit"] == [roles[0]]
    # the pool's first names (one bounded read), nearest the culprit among those read
    assert {n for n, _, role in roles if role == "peer" and n != "gpu-node-03"} == {
        "gpu-node-02", "gpu-node-01", "gpu-node-00"
    }  # fmt: skip
    culprit = snapshot.series[0]["points"]
    assert culprit[0][1] == 0.0 and culprit[-1][1] > 0.0
    assert snapshot.onset_at is not None and snapshot.start < snapshot.onset_at < snapshot.end


def test_a_failed_range_read_is_a_timeline_note_never_a_failed_run(
    settings: Settings, scenario_dir: Path
) -> None:
    with running_bot(settings, scenario=scenario_dir / "ecc-dbe-storm.yaml") as bot:
        bot.rt.engine.deps = replace(bot.rt.deps, telemetry=RangeDown(bot.rt.deps.telemetry))
        fire(bot)
        with session_scope(bot.rt.db) as session:
            assert snapshot_store.list_snapshots(session, incident_id=1) == []
            incident = incident_store.get_incident(session, 1)
            notes = [e.summary for e in incident_store.list_events(session, 1) if e.kind == "note"]
    assert incident is not None and incident.state == "awaiting_approval"
    assert len(notes) == 1
    assert notes[0].startswith("Evidence snapshot not stored (TelemetryUnavailable, ref ")


def verdict(**extra: object) -> dict[str, object]:
    return {
        "layer": "gpu_hardware",
        "culprit_nodes": ["n-03"],
        "culprit_details": [{"node": "n-03", "gpu": "5"}],
        "findings": [
            {"evidence": [{"source": "xids", "what": "xid 48"},
                          {"source": "dbe", "what": "gpu.ecc.dbe_rate"}]}
        ],
        **extra,
    }  # fmt: skip


def test_the_plan_cites_the_first_signal_and_the_gathered_peers(catalog: SignalCatalog) -> None:
    steps = {"dbe": {"present_nodes": ["n-01", "n-03", "n-07", "n-09", "n-11"]}}
    plan = plan_snapshot(verdict(), steps, catalog)
    assert plan == SnapshotPlan(
        signal="gpu.ecc.dbe_rate", culprits=("n-03",), peers=("n-01", "n-07", "n-09"), gpu="5"
    )
    assert plan_snapshot(verdict(layer="none"), steps, catalog) is None
    assert plan_snapshot(verdict(culprit_nodes=[]), steps, catalog) is None
    assert plan_snapshot(verdict(findings=[]), steps, catalog) is None


def test_neighbours_fill_the_peers_in_name_order() -> None:
    names = [f"n-{i:02d}" for i in range(1, 9)]
    assert nearest_peers(["n-05"], names, count=3) == ["n-04", "n-06", "n-03"]
    assert nearest_peers(["n-01", "n-02"], names, count=2) == ["n-03", "n-04"]
    assert nearest_peers(["elsewhere"], names, count=2) == ["n-01", "n-02"]


def test_series_keep_the_named_gpu_as_culprit_and_the_onset_is_off_its_baseline() -> None:
    def points(*values: float) -> tuple[tuple[datetime, float], ...]:
        return tuple((T + timedelta(minutes=i), v) for i, v in enumerate(values))

    found = [
        SeriesPoints("n-03", {"gpu": "0"}, points(1, 1, 1, 1)),
        SeriesPoints("n-03", {"gpu": "5"}, points(1, 1, 9, 9)),
        SeriesPoints("n-04", {"gpu": "0"}, points(1, 1.1, 0.9, 1)),
        SeriesPoints("n-04", {"gpu": "1"}, points(1, 1, 1, 1)),
    ]
    plan = SnapshotPlan(signal="s", culprits=("n-03",), peers=("n-04",), gpu="5")
    series = select_series(plan, found)
    assert [(s["node"], s["labels"]["gpu"], s["role"]) for s in series] == [
        ("n-03", "5", "culprit"), ("n-03", "0", "peer"), ("n-04", "0", "peer")
    ]  # fmt: skip
    assert find_onset(series) == (T + timedelta(minutes=2)).timestamp()
    flat = [dict(series[0], points=[[T.timestamp(), 1.0], [T.timestamp() + 60, 1.0]])]
    assert find_onset(flat) is None
