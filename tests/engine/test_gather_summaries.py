"""Signal summaries that checks read: the peer-comparison and label-spread fields.

Covers: median/argmin/present_nodes; the straggler found among many ranks (high outliers and
their nodes, uncapped); throttled GPUs as low outliers, furthest first; kept labels give the
distinct values, the majority, the nodes that differ and each node's value; no kept labels
means no label fields; a missing signal keeps `median` null so checks stay unknown.
"""

from __future__ import annotations

from datetime import timedelta

from bot.engine.steps.gather import summarize_signal
from integrations.telemetry import Sample, SignalResult

WINDOW = timedelta(minutes=15)


def result(samples: list[Sample]) -> SignalResult:
    return SignalResult(signal="job.step_time", samples=tuple(samples))


def test_median_argmin_and_present_nodes() -> None:
    summary = summarize_signal(
        result([Sample("n-01", 3.0), Sample("n-00", 1.0), Sample("n-02", 2.0)]),
        nodes=[],
        window=WINDOW,
    )
    assert summary["median"] == 2.0
    assert summary["argmin"] == {"node": "n-00", "value": 1.0}
    assert summary["present_nodes"] == ["n-00", "n-01", "n-02"]


def test_the_straggler_rank_is_a_high_outlier_among_many() -> None:
    samples = [Sample(f"gpu-node-{i:03d}", 1.2, {"rank": str(i)}) for i in range(256)]
    samples[137] = Sample("gpu-node-137", 2.4, {"rank": "137"})
    summary = summarize_signal(result(samples), nodes=[], window=WINDOW)
    assert summary["high_outlier_nodes"] == ["gpu-node-137"]
    assert summary["high_outliers"][0]["rank"] == "137"
    assert summary["low_outlier_nodes"] == []
    assert len(summary["present_nodes"]) == 256


def test_throttled_gpus_are_low_outliers_furthest_first() -> None:
    samples = [Sample(f"gpu-node-{i:02d}", 1980.0, {"gpu": "0"}) for i in range(32)]
    samples[3] = Sample("gpu-node-03", 1400.0, {"gpu": "0"})
    samples[9] = Sample("gpu-node-09", 900.0, {"gpu": "0"})
    summary = summarize_signal(result(samples), nodes=[], window=WINDOW)
    assert [s["node"] for s in summary["low_outliers"]] == ["gpu-node-09", "gpu-node-03"]
    assert summary["low_outlier_nodes"] == ["gpu-node-03", "gpu-node-09"]


def test_kept_labels_spread_over_nodes() -> None:
    label = "DCGM_FI_DRIVER_VERSION"
    samples = [Sample(f"gpu-node-{i:02d}", 1.0, {label: "550.54.15"}) for i in range(8)]
    samples[5] = Sample("gpu-node-05", 1.0, {label: "535.104.05"})
    summary = summarize_signal(result(samples), nodes=[], window=WINDOW, keep_labels=(label,))
    assert summary["distinct"][label] == ["550.54.15", "535.104.05"]
    assert summary["majority"][label] == "550.54.15"
    assert summary["minority_nodes"][label] == ["gpu-node-05"]
    assert summary["node_labels"]["gpu-node-05"] == {label: "535.104.05"}


def test_without_kept_labels_there_are_no_label_fields() -> None:
    summary = summarize_signal(result([Sample("n-00", 1.0)]), nodes=[], window=WINDOW)
    assert "distinct" not in summary and "node_labels" not in summary


def test_a_missing_signal_has_no_median() -> None:
    summary = summarize_signal(result([]), nodes=["n-00"], window=WINDOW)
    assert summary["missing"] is True
    assert summary["median"] is None
    assert summary["argmin"] == {}


def test_bitmask_signals_list_the_nodes_per_bit() -> None:
    samples = [
        Sample("gpu-node-00", 0.0, {"gpu": "0"}),
        Sample("gpu-node-01", 128.0 + 8.0, {"gpu": "3"}),  # HW power brake + HW slowdown
        Sample("gpu-node-02", 64.0, {"gpu": "1"}),  # HW thermal
    ]
    summary = summarize_signal(result(samples), nodes=[], window=WINDOW, bitmask=True)
    assert summary["bit_nodes"]["128"] == ["gpu-node-01"]
    assert summary["bit_nodes"]["8"] == ["gpu-node-01"]
    assert summary["bit_nodes"]["64"] == ["gpu-node-02"]
    assert summary["bit_nodes"]["4"] == []
    assert set(summary["bit_nodes"]) == {str(1 << b) for b in range(9)}


def test_a_node_reporting_fewer_gpus_than_its_peers_is_sparse() -> None:
    samples = [
        Sample(f"gpu-node-{n:02d}", 60.0, {"gpu": str(g)}) for n in range(4) for g in range(8)
    ]
    samples = [s for s in samples if not (s.node == "gpu-node-02" and s.labels["gpu"] == "6")]
    summary = summarize_signal(result(samples), nodes=[], window=WINDOW)
    assert summary["sparse_nodes"] == ["gpu-node-02"]
