"""Inference-service faults and vLLM's histograms, as the vLLM /metrics and logs show them.

Covers: `kv_cache_exhaustion` (KV usage ~0.99, preemptions rising, requests waiting, TTFT p99
burning, vLLM's preemption WARNING lines and KV 99 % stats) on every replica of the service;
`traffic_spike` (request rate 3-4x, queue time p99 and TTFT up, KV usage moderate, no
preemptions); a throttled node slows only its own replica; the exported histogram series
(`_bucket{le}` cumulative with `+Inf`, `_count`, `_sum`) with vLLM's bucket boundaries;
`histogram_quantile` interpolates as Prometheus does (first bucket from 0, the +Inf bucket
returns the highest finite bound, no observations = no value).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from simulator import Fleet, SimCluster, SimTelemetry
from simulator.telemetry import histogram_quantile
from integrations.telemetry import SignalQuery

Sim = Callable[..., tuple[Fleet, SimTelemetry, SimCluster]]
SERVICE = "vllm-chat"
WORKLOADS = [
    {"kind": "training", "name": "llm-pretrain", "nodes": "gpu-node-[00-07]"},
    {"kind": "inference", "name": SERVICE, "nodes": "gpu-node-[12-13]"},
]
REPLICAS = ("gpu-node-12", "gpu-node-13")


def build(sim: Sim, *faults: dict[str, Any]) -> tuple[Fleet, SimTelemetry, SimCluster]:
    return sim(faults=list(faults), workloads=WORKLOADS)


def per_node(telemetry: SimTelemetry, signal: str) -> dict[str, float]:
    query = SignalQuery(signal=signal, workload=SERVICE, window=timedelta(minutes=5))
    return {s.node: s.value for s in telemetry.read(query).samples}


def replica_log(cluster: SimCluster, index: int) -> str:
    return cluster.pod_logs(f"{SERVICE}-worker-{index}", "ml")


def test_kv_cache_exhaustion_preempts_queues_and_burns_ttft(sim: Sim) -> None:
    _, telemetry, cluster = build(sim, {"kind": "kv_cache_exhaustion", "workload": SERVICE})
    assert set(per_node(telemetry, "inference.kv_cache_usage").values()) == {0.99}
    assert min(per_node(telemetry, "inference.preemption_rate").values()) >= 1.0
    assert min(per_node(telemetry, "inference.requests_waiting").values()) >= 10.0
    assert min(per_node(telemetry, "inference.ttft_p99").values()) > 2.0
    assert min(per_node(telemetry, "inference.tpot_p99").values()) > 0.06
    log = replica_log(cluster, 1)
    assert (
        "is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache" in log
    )
    assert "total_num_cumulative_preemption=" in log and "GPU KV cache usage: 99.0%" in log


def test_a_traffic_spike_queues_requests_with_kv_usage_moderate(sim: Sim) -> None:
    _, telemetry, cluster = build(sim, {"kind": "traffic_spike", "workload": SERVICE})
    rate = per_node(telemetry, "inference.request_rate")
    assert all(3.0 <= v / 12.0 <= 4.0 for v in rate.values())
    assert min(per_node(telemetry, "inference.queue_time_p99").values()) > 5.0
    assert min(per_node(telemetry, "inference.ttft_p99").values()) > 2.0
    assert max(per_node(telemetry, "inference.kv_cache_usage").values()) <= 0.8
    assert set(per_node(telemetry, "inference.preemption_rate").values()) == {0.0}
    assert "is preempted" not in replica_log(cluster, 0)
    assert "Waiting: 40 reqs" in replica_log(cluster, 0)


def test_a_throttled_node_slows_only_its_replica(sim: Sim) -> None:
    _, telemetry, _ = build(sim, {"kind": "thermal_throttle", "node": "gpu-node-13"})
    ttft = per_node(telemetry, "inference.ttft_p99")
    assert ttft["gpu-node-13"] > 1.3 * ttft["gpu-node-12"]
    assert set(per_node(telemetry, "inference.kv_cache_usage").values()) == {0.5}


def test_histogram_series_are_cumulative_with_vllm_buckets(sim: Sim) -> None:
    fleet, _, _ = build(sim, {"kind": "traffic_spike", "workload": SERVICE})
    now = fleet.now()
    buckets = [
        s
        for s in fleet.series("vllm:time_to_first_token_seconds_bucket", now)
        if s.labels["node"] == "gpu-node-12"
    ]
    les = [s.labels["le"] for s in buckets]
    assert les[:3] == ["0.001", "0.005", "0.01"] and les[-2:] == ["2560.0", "+Inf"]
    counts = [s.value for s in buckets]
    assert counts == sorted(counts)
    (total,) = [
        s.value
        for s in fleet.series("vllm:time_to_first_token_seconds_count", now)
        if s.labels["node"] == "gpu-node-12"
    ]
    assert total == pytest.approx(counts[-1])
    labels = buckets[0].labels
    assert {"model_name", "engine", "service", "node", "le"} <= set(labels)
    assert labels["service"] == SERVICE and labels["engine"] == "0"


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    inf = math.inf
    assert histogram_quantile(0.5, {1.0: 50.0, 2.0: 100.0, inf: 100.0}) == 1.0
    assert histogram_quantile(0.25, {1.0: 50.0, 2.0: 100.0, inf: 100.0}) == 0.5
    assert histogram_quantile(0.75, {1.0: 50.0, 2.0: 100.0, inf: 100.0}) == 1.5
    assert histogram_quantile(0.99, {1.0: 10.0, 2.0: 20.0, inf: 100.0}) == 2.0
    assert histogram_quantile(0.99, {1.0: 0.0, inf: 0.0}) is None
    assert histogram_quantile(0.5, {1.0: 1.0, 2.0: 2.0}) is None  # no +Inf bucket
