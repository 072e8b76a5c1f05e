"""Evidence rows show the culprit's own reading next to its peers', with units (issue 14, part 5).

Aspects: a low-clock GPU is backed by its own sample (not the three highest), with the peers'
median beside it; an HCA culprit is backed by its own device; a driver-skewed node by its own
version label; a workload culprit falls back to the samples above zero; whether the culprit
stands out from other nodes (by value or by a minority label); units (GB/s, °C, decoded
clock-event bits); the reading as people see it; a cordon is withheld for a culprit that reads
like its peers, kept when it stands out or when it could not be compared; the Slack message
shows the culprit's reading, the layers not checked and the detector notes.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from bot.diagnosis.findings import CheckOutcome, CheckStatus, Culprit, Finding
from bot.diagnosis.gating import gate
from bot.diagnosis.layers import Layer, Severity
from bot.diagnosis.localizing import Verdict, localize
from bot.diagnosis.units import decode_clock_events, format_reading, format_value
from bot.engine.steps.citing import cite
from bot.engine.steps.gather import summarize_signal
from bot.incidents.views import IncidentView
from bot.slack.blocks import TriageView, details_blocks
from integrations.telemetry import Sample, SignalResult

UNITS = {"gpu.sm_clock": "MHz", "fabric.ib.port_state": "", "node.driver_version": ""}


def step(signal: str, samples: list[Sample], keep: tuple[str, ...] = ()) -> dict[str, object]:
    result = SignalResult(signal=signal, samples=tuple(samples))
    summary = summarize_signal(result, nodes=[], window=timedelta(minutes=15), keep_labels=keep)
    return {"kind": "signal", **summary}


def clocks(nodes: int, *, slow: tuple[str, str] | None, mhz: float = 1381.0) -> list[Sample]:
    samples = []
    for n in range(nodes):
        for gpu in range(8):
            node = f"gpu-node-{n:02d}"
            value = mhz if slow == (node, str(gpu)) else 1980.0
            samples.append(Sample(node, value, {"gpu": str(gpu)}))
    return samples


def unit_of(signal: str) -> str:
    return UNITS.get(signal, "")


def test_a_slow_gpu_is_backed_by_its_own_clock_next_to_the_peers_median() -> None:
    steps = {"clock": step("gpu.sm_clock", clocks(40, slow=("gpu-node-37", "7")))}
    culprit = Culprit(node="gpu-node-37", gpu="7")
    cited = cite(steps, ["clock"], culprit=culprit, unit_of=unit_of)
    assert [(r.labels["node"], r.labels["gpu"], r.value) for r in cited.rows] == [
        ("gpu-node-37", "7", 1381.0)
    ]
    row = cited.rows[0]
    assert (row.unit, row.peer_median, row.peers) == ("MHz", 1980.0, 319)
    assert cited.outlier is True
    reading = format_reading(row.value, unit=row.unit, peer_median=row.peer_median, peers=row.peers)
    assert reading == "1381 MHz (peers: median 1980 MHz over 319)"


def test_an_hca_culprit_is_backed_by_its_own_port() -> None:
    ports = [
        Sample(f"gpu-node-{n:02d}", 4.0, {"device": f"mlx5_{d}", "port": "1"})
        for n in range(4)
        for d in range(8)
    ]
    ports[5] = Sample("gpu-node-00", 1.0, {"device": "mlx5_5", "port": "1"})
    steps = {"state": step("fabric.ib.port_state", ports)}
    cited = cite(steps, ["state"], culprit=Culprit(node="gpu-node-00", hca="mlx5_5:1"),
                 unit_of=unit_of)
    assert [(r.labels["device"], r.value) for r in cited.rows] == [("mlx5_5", 1.0)]
    assert cited.rows[0].peer_median == 4.0


def test_a_driver_skewed_node_shows_its_own_version_and_stands_out_by_label() -> None:
    label = "DCGM_FI_DRIVER_VERSION"
    samples = [
        Sample(f"gpu-node-{n:02d}", 1.0, {label: "560.35.03" if n == 3 else "550.90.07"})
        for n in range(6)
    ]
    steps = {"driver": step("node.driver_version", samples, keep=(label,))}
    cited = cite(steps, ["driver"], culprit=Culprit(node="gpu-node-03"), unit_of=unit_of)
    assert [r.labels[label] for r in cited.rows] == ["560.35.03"]
    assert cited.outlier is True


def test_a_workload_culprit_falls_back_to_the_samples_above_zero() -> None:
    samples = [Sample("gpu-node-01", 3.0, {"rank": "1"}), Sample("gpu-node-02", 0.0, {"rank": "2"})]
    steps = {"step_time": step("job.step_time", samples)}
    cited = cite(steps, ["step_time"], culprit=Culprit(workload="llm"), unit_of=unit_of)
    assert [(r.labels["node"], r.value, r.peer_median) for r in cited.rows] == [
        ("gpu-node-01", 3.0, None)
    ]
    assert cited.outlier is None


def test_a_node_reading_like_its_peers_is_not_an_outlier() -> None:
    hot = [Sample(f"gpu-node-{n:02d}", 92.0, {"gpu": "0"}) for n in range(6)]
    steps = {"temp": step("gpu.temperature", hot)}
    cited = cite(steps, ["temp"], culprit=Culprit(node="gpu-node-02"), unit_of=unit_of)
    assert cited.outlier is False
    alone = {"temp": step("gpu.temperature", hot[:1])}
    lone = cite(alone, ["temp"], culprit=Culprit(node="gpu-node-00"), unit_of=unit_of)
    assert lone.outlier is None


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (45_000_000_000.0, "B/s", "45 GB/s"),
        (5.2e9, "B/s", "5.2 GB/s"),
        (96.0, "bitmask", "0x60 (SW thermal slowdown + HW thermal slowdown)"),
        (0.0, "bitmask", "0x0 (none)"),
        (91.0, "C", "91 °C"),
        (0.42, "ratio", "42%"),
        (12.5, "errors/min", "12.5 errors/min"),
        (None, "MHz", "n/a"),
        ("Xid 79", "", "Xid 79"),
    ],
)
def test_values_are_formatted_with_their_units(
    value: float | str | None, unit: str, shown: str
) -> None:
    assert format_value(value, unit) == shown


def test_unknown_clock_event_bits_are_shown_in_hex() -> None:
    assert decode_clock_events(0x80 | 0x400) == ["HW power brake slowdown", "unknown bits 0x400"]


def verdict_with(outlier: bool | None) -> Verdict:
    finding = Finding(
        "hot", Layer.FACILITY, Severity.CRITICAL, "hot GPU", Culprit(node="n1"), outlier=outlier
    )
    return localize([CheckOutcome("hot", Layer.FACILITY, CheckStatus.FIRED, finding)])


def test_a_cordon_needs_a_culprit_that_stands_out_from_its_peers() -> None:
    proposals = [{"action": "cordon", "target": "n1"}, {"action": "open_ticket", "target": "n1"}]
    kept, withheld = gate(verdict_with(False), proposals)
    assert [p["action"] for p in kept] == ["open_ticket"]
    assert [(w.action, w.target) for w in withheld] == [("cordon", "n1")]
    assert "not an outlier" in withheld[0].reason
    for outlier in (True, None):
        kept, withheld = gate(verdict_with(outlier), proposals)
        assert [p["action"] for p in kept] == ["cordon", "open_ticket"] and withheld == []


def test_the_triage_details_show_the_culprits_reading_the_unknown_layers_and_detectors() -> None:
    at = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    row = {
        "source": "clock", "what": "gpu.sm_clock", "value": 1381.0, "unit": "MHz",
        "labels": {"node": "gpu-node-37", "gpu": "7"}, "peer_median": 1980.0, "peers": 319,
    }
    verdict = {
        "layer": "facility", "confidence": 0.7, "culprits": ["gpu-node-37"],
        "findings": [{"check_id": "clock", "layer": "facility", "severity": "critical",
                      "summary": "GPU 7 on gpu-node-37: 1381 MHz", "evidence": [row]}],
        "ruled_out": [], "unknown_layers": ["fabric"], "missing_signals": ["fabric.nvlink"],
        "detectors": ["gpu.xid.last on gpu-node-37 GPU 7 still reads 48"], "summary": "s",
    }
    incident = IncidentView(
        id=7, runbook="mfu-regression", target="llm", target_kind="workload",
        severity="critical", title="t", state="triaging", created_at=at, fired_at=at,
        detected_at=at,
    )
    view = TriageView(incident=incident, runbook_title="MFU", requester="bot", verdict=verdict)
    text = json.dumps(details_blocks(view), ensure_ascii=False)  # the thread reply
    assert "`gpu.sm_clock` = 1381 MHz (peers: median 1980 MHz over 319) (gpu=7)" in text
    assert "*Not checked (signals missing):* `fabric`" in text
    assert "gpu.xid.last on gpu-node-37 GPU 7 still reads 48" in text
