"""Honest culprits (issue 24 item 6): a gauge at 0 names no GPU, and "not changed in 24h" needs
24 hours of data.

Covers: a GPU whose readings are all 0, like its peers', loses its GPU name (the node stays);
a non-zero or outlying reading, or a GPU with no reading at all, keeps it; an ECC storm whose
XIDs are in the kernel log while the XID gauge reads 0 names the node, not "GPU 0"; with a day
of history an unchanged XID gauge is held (not counted); on a real Prometheus holding only
minutes of history the same gauge is *unknown*: kept, with "only N min of history" said.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from servers.world import World, start_world

from bot.config import Settings
from bot.diagnosis.findings import Culprit, Evidence
from bot.diagnosis.naming import backed_culprit
from bot.engine.steps.freshness import drop_held_values, held_notes, stale_summary
from bot.evaluation.evaluating import isolated, trigger
from bot.wiring.runtime import open_runtime
from integrations.signals import SignalCatalog, load_signal_catalog
from integrations.telemetry import SignalQuery
from runbooks import SIGNALS_FILE
from simulator.fleet import Fleet
from simulator.scenarios import parse_scenario
from simulator.telemetry import SimTelemetry

NOW = datetime(2026, 11, 24, 3, 0, tzinfo=UTC)
NODE = "gpu-node-02"


def scenario(
    *faults: dict[str, object], trigger: dict[str, object] | None = None
) -> dict[str, object]:
    return {
        "apiVersion": "gpu-oncall/v1",
        "kind": "Scenario",
        "metadata": {"name": "honest-culprits", "description": "gauges at zero, short history"},
        "fleet": {"nodes": 4},
        "faults": list(faults),
        "trigger": trigger or {"command": f"diagnose {NODE}"},
    }


#: An XID 48 three days ago on GPU 4: the gauge has held 48 ever since.
OLD_XID = {"kind": "xid", "code": 48, "node": NODE, "gpu": 4, "start": "-3d", "duration": "30m"}


@pytest.fixture(scope="module")
def catalog() -> SignalCatalog:
    return load_signal_catalog(SIGNALS_FILE)


def row(gpu: str, value: float, peer_median: float | None = None) -> Evidence:
    labels = {"node": NODE, "gpu": gpu}
    return Evidence("xid", "gpu.xid.last", value, labels, peer_median=peer_median)


def test_a_gpu_reading_zero_like_its_peers_is_not_named() -> None:
    named = Culprit(node=NODE, gpu="0", uuid="GPU-0")
    assert backed_culprit(named, [row("0", 0.0, peer_median=0.0)]) == Culprit(node=NODE)


def test_a_nonzero_outlying_or_unread_gpu_keeps_its_name() -> None:
    named = Culprit(node=NODE, gpu="3")
    assert backed_culprit(named, [row("3", 48.0, peer_median=0.0)]) == named
    assert backed_culprit(named, [row("3", 0.0, peer_median=1400.0)]) == named  # reads low
    assert backed_culprit(named, []) == named  # gone from the exporter: absence is the evidence
    assert backed_culprit(named, [row("5", 0.0, peer_median=0.0)]) == named  # another GPU's row


def test_ecc_xids_in_the_kernel_log_with_the_gauge_at_zero_name_the_node_not_gpu_0() -> None:
    # GPU 5's dcgm series froze (at XID 0) an hour before its DBEs: the kernel log has XID 48,
    # every XID gauge of the node reads 0.
    raw = scenario(
        {"kind": "gauge_frozen", "node": NODE, "gpu": 5, "start": "-1h"},
        {"kind": "ecc_dbe_storm", "node": NODE, "gpu": 5, "start": "-10m"},
        trigger={"alert": {"alertname": "GPUEccStorm", "labels": {"Hostname": NODE}}},
    )
    parsed = parse_scenario(raw)
    with open_runtime(isolated(Settings()), scenario=parsed, fresh=True) as rt:
        outcome = trigger(rt, parsed).outcome
    assert outcome is not None
    verdict = outcome.verdict
    assert verdict["layer"] == "gpu_hardware"
    assert verdict["culprits"] == [NODE]
    xid_finding = next(f for f in verdict["findings"] if f["check_id"] == "ecc_xid")
    assert xid_finding["culprit"] == {"node": NODE}
    assert "XID gauge reads 0 on every GPU" in xid_finding["summary"]
    assert "GPU 0" not in xid_finding["summary"]


def test_with_a_day_of_history_an_unchanged_xid_gauge_is_held(catalog: SignalCatalog) -> None:
    fleet = Fleet.from_scenario(parse_scenario(scenario(OLD_XID)), now=lambda: NOW)
    telemetry = SimTelemetry(fleet, catalog)
    reading = telemetry.read(SignalQuery(signal="gpu.xid.last", nodes=(NODE,)))
    held = drop_held_values(reading, telemetry=telemetry, signals=catalog, now=NOW)
    assert [(s.node, s.labels["gpu"]) for s in held.stale] == [(NODE, "4")]
    assert held.unproven == ()
    assert held.history is None or held.history >= timedelta(hours=23)
    assert held.result.queries == 3  # the reading, its change history, the history's depth


@pytest.fixture(scope="module")
def young_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A real Prometheus holding 3 minutes of the fleet's past (started a moment ago)."""
    workdir = tmp_path_factory.mktemp("young-prometheus")
    fleet = Fleet(parse_scenario(scenario(OLD_XID)), lambda: datetime.now(UTC))
    world = start_world(
        workdir,
        {"young": fleet},
        catalog=load_signal_catalog(SIGNALS_FILE),
        signals=["gpu.xid.last", "gpu.xid.changes"],
        history=timedelta(minutes=3),
    )
    try:
        yield world
    finally:
        world.close()


def test_on_a_prometheus_with_minutes_of_history_held_is_unknown(
    young_prometheus: World, catalog: SignalCatalog
) -> None:
    telemetry = young_prometheus.telemetry("young", catalog)
    reading = telemetry.read(SignalQuery(signal="gpu.xid.last", nodes=(NODE,)))
    assert [(s.labels["gpu"], s.value) for s in reading.samples if s.value] == [("4", 48.0)]
    held = drop_held_values(reading, telemetry=telemetry, signals=catalog, now=datetime.now(UTC))
    assert held.stale == ()
    assert [(s.node, s.labels["gpu"]) for s in held.unproven] == [(NODE, "4")]
    assert held.history is not None and held.history < timedelta(hours=1)
    assert held.result.samples == reading.samples  # kept: absence of proof is not proof
    summary = stale_summary(held)
    note = held_notes({"xid": {"kind": "signal", "signal": "gpu.xid.last", **summary}})
    assert len(note) == 1
    assert f"gpu.xid.last on {NODE} GPU 4 reads 48" in note[0]
    assert f"only {summary['history_minutes']} min of history" in note[0]
    assert summary["history_minutes"] <= 5
