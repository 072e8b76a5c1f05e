"""Held gauges are judged by when they changed, and a stale detector is reported apart from the
hardware (issue 14, part 4).

Aspects: the XID gauge of a GPU whose XID was days ago is taken out of the reading (the simulated
fleet answers the `changes` history the way PromQL `changes(...[24h])` would) while a fresh XID
still counts; the history is read only when some sample is non-zero (no extra query on a
healthy fleet); a sample without history is kept; held samples become detector notes; a
verdict of a broken detector withholds every action on the hardware; an exporter that answers
but froze (its GPUs' energy counter flat) is a stuck detector, found by one query, named as the
culprit, and a finding resting only on its values becomes unknown.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.config import Settings
from bot.diagnosis.findings import CheckOutcome, CheckStatus, Culprit, Evidence, Finding
from bot.diagnosis.gating import gate
from bot.diagnosis.layers import Layer, Severity
from bot.diagnosis.localizing import localize
from bot.engine.steps.freshness import drop_held_values, held_notes, stale_summary
from bot.engine.steps.liveness import Liveness, discount, stuck_gpus
from bot.evaluation.evaluating import isolated, trigger
from bot.wiring.runtime import open_runtime
from integrations.signals import SignalCatalog, load_signal_catalog
from integrations.telemetry import Sample, SeriesPoints, SignalQuery, SignalResult
from runbooks import SIGNALS_FILE
from simulator import SCENARIO_DIR
from simulator.fleet import Fleet
from simulator.scenarios import load_scenario, parse_scenario
from simulator.telemetry import SimTelemetry

NOW = datetime(2026, 11, 24, 3, 0, tzinfo=UTC)


def scenario(*faults: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "gpu-oncall/v1",
        "kind": "Scenario",
        "metadata": {"name": "held-gauge", "description": "XID gauges old and new"},
        "fleet": {"nodes": 4},
        "faults": list(faults),
        "trigger": {"command": "diagnose gpu-node-02"},
    }


@pytest.fixture(scope="module")
def catalog() -> SignalCatalog:
    return load_signal_catalog(SIGNALS_FILE)


@pytest.fixture
def telemetry(catalog: SignalCatalog) -> Iterator[SimTelemetry]:
    old = {"kind": "xid", "code": 48, "node": "gpu-node-02", "gpu": 4}
    new = {"kind": "xid", "code": 79, "node": "gpu-node-01", "gpu": 1, "start": "-5m"}
    fleet = Fleet.from_scenario(
        parse_scenario(scenario(old | {"start": "-3d", "duration": "30m"}, new)),
        now=lambda: NOW,
    )
    yield SimTelemetry(fleet, catalog)


def xid_reading(telemetry: SimTelemetry) -> SignalResult:
    nodes = ("gpu-node-00", "gpu-node-01", "gpu-node-02", "gpu-node-03")
    return telemetry.read(SignalQuery(signal="gpu.xid.last", nodes=nodes))


def test_an_xid_from_days_ago_is_held_and_a_fresh_one_counts(
    telemetry: SimTelemetry, catalog: SignalCatalog
) -> None:
    reading = xid_reading(telemetry)
    assert {(s.node, s.labels["gpu"], s.value) for s in reading.samples if s.value} == {
        ("gpu-node-02", "4", 48.0),
        ("gpu-node-01", "1", 79.0),
    }
    held = drop_held_values(reading, telemetry=telemetry, signals=catalog)
    assert [(s.node, s.labels["gpu"]) for s in held.stale] == [("gpu-node-02", "4")]
    assert {(s.node, s.value) for s in held.result.samples if s.value} == {("gpu-node-01", 79.0)}
    assert held.result.queries == 2  # the reading and one history query for both nodes
    summary = stale_summary(held)
    assert summary["stale_nodes"] == ["gpu-node-02"]
    assert summary["stale_within"] == "24h"


def test_a_healthy_reading_costs_no_history_query(
    telemetry: SimTelemetry, catalog: SignalCatalog
) -> None:
    reading = telemetry.read(SignalQuery(signal="gpu.xid.last", nodes=("gpu-node-03",)))
    before = telemetry.queries
    held = drop_held_values(reading, telemetry=telemetry, signals=catalog)
    assert telemetry.queries == before
    assert held.stale == () and held.result == reading
    assert stale_summary(held) == {}


class NoHistory:
    """A Telemetry whose backend has no series for the history query (retention too short)."""

    def __init__(self) -> None:
        self.asked: list[SignalQuery] = []

    def read(self, query: SignalQuery) -> SignalResult:
        self.asked.append(query)
        return SignalResult(signal=query.signal, missing_nodes=query.nodes)

    def read_range(
        self, query: SignalQuery, *, start: datetime, end: datetime, step: timedelta
    ) -> list[SeriesPoints]:
        return []


def test_a_sample_without_change_history_is_kept(catalog: SignalCatalog) -> None:
    reading = SignalResult(
        signal="gpu.xid.last", samples=(Sample("gpu-node-07", 48.0, {"gpu": "3"}),)
    )
    backend = NoHistory()
    held = drop_held_values(reading, telemetry=backend, signals=catalog)
    assert held.stale == ()
    assert held.result.samples == reading.samples
    assert [(q.signal, q.nodes, q.window.total_seconds()) for q in backend.asked] == [
        ("gpu.xid.changes", ("gpu-node-07",), 86400.0)
    ]


def test_held_samples_become_detector_notes_not_findings() -> None:
    steps = {
        "xid": {
            "kind": "signal",
            "signal": "gpu.xid.last",
            "stale": [{"node": "gpu-node-02", "value": 48.0, "gpu": "4"}],
            "stale_within": "24h",
        },
        "ecc": {"kind": "signal", "signal": "gpu.ecc.dbe_rate"},
    }
    assert held_notes(steps) == (
        "gpu.xid.last on gpu-node-02 GPU 4 still reads 48 but has not changed in 24h: "
        "the exporter holds its last value; not counted",
    )


def test_a_broken_detector_verdict_withholds_every_hardware_action() -> None:
    finding = Finding(
        "dcgm_down", Layer.TELEMETRY, Severity.CRITICAL, "dcgm-exporter down", Culprit(node="n1")
    )
    verdict = localize([CheckOutcome("dcgm_down", Layer.TELEMETRY, CheckStatus.FIRED, finding)])
    proposals = [
        {"action": name, "target": "n1"}
        for name in ("cordon", "drain", "taint", "restart_pod", "open_ticket")
    ]
    kept, withheld = gate(verdict, proposals)
    assert [p["action"] for p in kept] == ["restart_pod", "open_ticket"]
    assert [w.action for w in withheld] == ["cordon", "drain", "taint"]
    assert all("broken detector" in w.reason for w in withheld)


def test_a_frozen_exporter_is_the_culprit_and_nothing_on_the_hardware_is_proposed() -> None:
    scenario = load_scenario(Path(SCENARIO_DIR) / "diagnose-exporter-stale.yaml")
    with open_runtime(isolated(Settings()), scenario=scenario, fresh=True) as rt:
        assert isinstance(rt.deps.telemetry, SimTelemetry)
        outcome = trigger(rt, scenario).outcome
    assert outcome is not None
    verdict = outcome.verdict
    assert (verdict["layer"], verdict["culprits"]) == ("telemetry", ["gpu-node-11"])
    assert "the detector is stuck, not the GPUs" in verdict["summary"]
    assert verdict["detectors"] == [
        "dcgm-exporter on gpu-node-11: values frozen (energy counter flat); "
        "its readings not counted"
    ]
    propose = next(o for o in outcome.steps.values() if o.get("kind") == "propose")
    assert not {"cordon", "drain", "taint", "gpu_reset", "reboot"} & set(propose["actions"])


def test_a_finding_resting_only_on_a_frozen_exporter_becomes_unknown() -> None:
    frozen_row = Evidence("temp", "gpu.temperature", 95.0, {"node": "gpu-node-11", "gpu": "0"})
    log_row = Evidence("kernel", "kernel.xid", "NVRM: Xid (PCI:0000:2b:00): 79")
    hot = Finding(
        "hot", Layer.FACILITY, Severity.CRITICAL, "hot", Culprit(node="gpu-node-11"), (frozen_row,)
    )
    logged = Finding(
        "xid", Layer.GPU_HARDWARE, Severity.CRITICAL, "xid", Culprit(node="gpu-node-11"),
        (log_row,),
    )
    outcomes = [
        CheckOutcome("hot", Layer.FACILITY, CheckStatus.FIRED, hot),
        CheckOutcome("xid", Layer.GPU_HARDWARE, CheckStatus.FIRED, logged),
    ]
    stuck = Liveness(stuck=(("gpu-node-11", "0"),), nodes=("gpu-node-11",))
    after = discount(outcomes, stuck, dcgm_signals=frozenset({"gpu.temperature"}))
    assert [(o.check_id, o.status) for o in after] == [
        ("hot", CheckStatus.UNKNOWN),
        ("xid", CheckStatus.FIRED),
    ]
    assert after[0].missing_signals == ("gpu.temperature",)
    assert discount(outcomes, Liveness(), dcgm_signals=frozenset()) == outcomes


def _stuck_reference(samples: list[Sample]) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """`stuck_gpus` as `probe` computed it before (every node's GPUs grouped first)."""
    per_node: dict[str, list[tuple[str, float]]] = {}
    for sample in samples:
        per_node.setdefault(sample.node, []).append((sample.labels.get("gpu", ""), sample.value))
    stuck = tuple(sorted((n, g) for n, gpus in per_node.items() for g, v in gpus if v <= 0))
    if not stuck:
        return (), ()
    whole = tuple(n for n, gpus in sorted(per_node.items()) if all(v <= 0 for _, v in gpus))
    return stuck, whole


_energy = st.builds(
    Sample,
    node=st.sampled_from([f"gpu-node-{i:02d}" for i in range(5)]),
    value=st.one_of(st.sampled_from([0.0, -0.0, 1.0, -1.0, math.nan]), st.floats(allow_nan=True)),
    labels=st.one_of(st.just({}), st.builds(lambda g: {"gpu": str(g)}, st.integers(0, 7))),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_energy, max_size=40))
def test_stuck_gpus_are_the_grouped_definition(samples: list[Sample]) -> None:
    assert stuck_gpus(samples) == _stuck_reference(samples)
