"""What PrometheusTelemetry sends to a real Prometheus, counted by a recording proxy.

Covers: one HTTP query per signal whatever the node count (1, 8, 64 nodes); a whole `node-
diagnose` run sends exactly one query per signal step, plus one range query (the evidence
snapshot of the verdict's signal); `read_many` sends its queries
concurrently (the proxy only answers once several are in flight at once) and returns results in
order; concurrent reads from many threads stay correct; a workload read resolves the job's nodes
inside its one query, matching on the label the workload-label settings name; a pinned clock
sets the evaluation time; a range read; and hostile node names, sent to the real Prometheus,
return exactly what a harmless query returns (no injected `vector(1)`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from servers.proxy import ProxyScript, RecordingProxy, running
from servers.world import World, run_on, start_world

from bot.config import PrometheusSettings, Settings, StorageSettings, WorkloadLabelSettings
from bot.wiring.runtime import make_telemetry
from integrations.prometheus import PrometheusEndpoint, PrometheusTelemetry
from integrations.promql import render_signal
from integrations.signals import SignalCatalog
from simulator import Fleet
from simulator.scenarios import parse_scenario
from integrations.telemetry import SignalQuery

FLEET = "wide"
NODES = tuple(f"gpu-node-{i:02d}" for i in range(64))
SCENARIO: dict[str, Any] = {
    "apiVersion": "gpu-oncall/v1",
    "kind": "Scenario",
    "metadata": {"name": "wide-fleet"},
    "fleet": {
        "nodes": 64,
        "dcgm_counters": "all",
        "workloads": [{"kind": "training", "name": "llm-pretrain", "nodes": "gpu-node-[00-31]"}],
    },
    "faults": [{"kind": "ecc_dbe_storm", "node": "gpu-node-03", "gpu": 5, "start": "-10m"}],
    "trigger": {"command": "diagnose gpu-node-03"},
}
SIGNALS = [
    "gpu.temperature",
    "gpu.ecc.dbe_rate",
    "gpu.xid.last",
    "gpu.xid.changes",
    "fabric.ib.symbol_error_rate",
    "fabric.ib.port_state",
    "k8s.node.ready",
    "gpu.sm_clock",
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, catalog: SignalCatalog) -> Iterator[World]:
    fleet = Fleet(parse_scenario(SCENARIO), lambda: datetime.now(UTC))
    world = start_world(
        tmp_path_factory.mktemp("queries"),
        {FLEET: fleet},
        catalog=catalog,
        signals=[
            *SIGNALS,
            "gpu.ecc.sbe_rate",
            "gpu.row_remap.failure",
            "fabric.ib.link_downed_increase",
        ],
        scrape_interval="5s",
        scrapes=1,
    )
    yield world
    world.close()


def through(proxy: RecordingProxy, catalog: SignalCatalog, **options: Any) -> PrometheusTelemetry:
    endpoint = PrometheusEndpoint(proxy.url, retries=0, timeout_seconds=10)
    return PrometheusTelemetry(endpoint, catalog, match={"fleet": FLEET}, **options)


@pytest.mark.parametrize("count", [1, 8, 64])
def test_one_http_query_per_signal_whatever_the_node_count(
    world: World, catalog: SignalCatalog, count: int
) -> None:
    with running(RecordingProxy(world.prometheus.url)) as proxy:
        result = through(proxy, catalog).read(SignalQuery("gpu.ecc.dbe_rate", nodes=NODES[:count]))
    assert [r.path for r in proxy.received] == ["/api/v1/query"]
    assert {s.node for s in result.samples} == set(NODES[:count])
    assert len(result.samples) == 8 * count  # one per GPU


def test_a_node_diagnose_run_sends_one_query_per_signal_step(
    world: World, catalog: SignalCatalog, tmp_path: Path
) -> None:
    settings = Settings(storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"))
    with running(RecordingProxy(world.prometheus.url)) as proxy:
        outcome = run_on(
            settings,
            fleet=world.fleets[FLEET],
            telemetry=through(proxy, catalog),
            runbook="node-diagnose",
            inputs={"node": "gpu-node-03"},
        )
    signal_steps = [s for s in outcome.steps.values() if s.get("kind") == "signal"]
    queries = [r.promql for r in proxy.received if r.path == "/api/v1/query"]
    # plus one range read: the evidence snapshot of the verdict's cited signal
    (snapshot,) = [r.promql for r in proxy.received if r.path == "/api/v1/query_range"]
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{" in snapshot
    assert outcome.verdict["layer"] == "gpu_hardware"
    # plus the checks that judge the detectors, one query each whatever the fleet size: is the
    # XID gauge held (`changes()`), does each GPU's energy counter still move; and the cordon's
    # impact reads the gang job's checkpoint age
    checks = [
        q
        for q in queries
        if "(changes(max by (Hostname, gpu, UUID) (DCGM_FI_DEV_XID_ERRORS{" in q
        or "increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{" in q
        or "training_checkpoint_age_seconds{" in q
    ]
    assert len(checks) == 3, checks
    assert len(queries) == len(signal_steps) + len(checks)
    for step in signal_steps:
        metric = catalog.get(step["signal"]).series_metric
        assert any(metric + "{" in q for q in queries), metric


def test_read_many_sends_its_queries_at_once_and_keeps_their_order(
    world: World, catalog: SignalCatalog
) -> None:
    # The proxy answers nothing until four requests are in flight together: a sequential
    # client would break the barrier and get 503s, failing the reads.
    barrier = threading.Barrier(4, timeout=10)
    script = ProxyScript(barrier=barrier)
    queries = [SignalQuery(name, nodes=NODES[:16]) for name in SIGNALS[:4]]
    with running(RecordingProxy(world.prometheus.url, script=script)) as proxy:
        results = through(proxy, catalog, max_workers=4).read_many(queries)
    assert [r.signal for r in results] == SIGNALS[:4]
    assert len(proxy.received) == 4
    assert all(r.samples for r in results)


def test_concurrent_reads_from_many_threads_stay_correct(
    world: World, catalog: SignalCatalog
) -> None:
    telemetry = world.telemetry(FLEET, catalog)
    queries = [SignalQuery(name, nodes=NODES) for name in SIGNALS] * 4
    expected = {q.signal: telemetry.read(q) for q in queries[: len(SIGNALS)]}
    before = telemetry.queries
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(telemetry.read, queries))
    assert telemetry.queries - before == len(queries)
    for result in results:
        reference = expected[result.signal]
        assert {(s.node, tuple(sorted(s.labels.items()))) for s in result.samples} == {
            (s.node, tuple(sorted(s.labels.items()))) for s in reference.samples
        }


def test_a_pinned_clock_sets_the_evaluation_time(world: World, catalog: SignalCatalog) -> None:
    at = datetime.now(UTC) - timedelta(minutes=2)
    with running(RecordingProxy(world.prometheus.url)) as proxy:
        result = through(proxy, catalog, now=lambda: at).read(
            SignalQuery("k8s.node.ready", nodes=NODES[:2])
        )
    assert proxy.received[0].query["time"] == [f"{at.timestamp():.3f}"]
    assert [s.value for s in result.samples] == [1.0, 1.0]


def test_a_workload_read_resolves_its_nodes_in_the_same_query(
    world: World, catalog: SignalCatalog
) -> None:
    with running(RecordingProxy(world.prometheus.url)) as proxy:
        result = through(proxy, catalog).read(
            SignalQuery("gpu.temperature", workload="llm-pretrain")
        )
    assert len(proxy.received) == 1
    assert {s.node for s in result.samples} == set(NODES[:32])
    assert result.missing_nodes == ()


def test_a_range_read_returns_points_per_series(world: World, catalog: SignalCatalog) -> None:
    telemetry = world.telemetry(FLEET, catalog)
    end = datetime.now(UTC)
    series = telemetry.read_range(
        SignalQuery("gpu.ecc.dbe_rate", nodes=("gpu-node-03",), window=timedelta(minutes=5)),
        start=end - timedelta(minutes=10),
        end=end,
        step=timedelta(minutes=1),
    )
    faulty = [s for s in series if s.labels.get("gpu") == "5"]
    assert len(series) == 8 and len(faulty) == 1
    assert len(faulty[0].points) >= 10
    assert faulty[0].points[-1][1] == pytest.approx(6.0, rel=0.15)


HOSTILE = ['x"} or vector(1) or {a="', ".*", 'gpu-node-01"} or up{', "gpu-node-0[0-9]"]


@pytest.mark.parametrize("evil", HOSTILE)
def test_hostile_node_names_return_only_what_a_harmless_query_returns(
    world: World, catalog: SignalCatalog, evil: str
) -> None:
    spec = catalog.get("gpu.temperature")
    match = {"fleet": FLEET}
    window = timedelta(minutes=5)
    hostile = render_signal(
        spec, window=window, host_label="Hostname", nodes=[evil, "gpu-node-01"], match=match
    )
    harmless = render_signal(
        spec, window=window, host_label="Hostname", nodes=["gpu-node-01"], match=match
    )
    got = world.prometheus.query(hostile.promql)
    want = world.prometheus.query(harmless.promql)
    assert len(got) == 8
    assert sorted(json.dumps(r["metric"], sort_keys=True) for r in got) == sorted(
        json.dumps(r["metric"], sort_keys=True) for r in want
    )
    assert all(r["metric"]["Hostname"] == "gpu-node-01" for r in got)


def test_the_workload_label_settings_reach_the_query(world: World, catalog: SignalCatalog) -> None:
    """`GPU_ONCALL_WORKLOAD_LABELS__*` name the labels a workload read matches on."""
    with running(RecordingProxy(world.prometheus.url)) as proxy:
        for pod_label in ("label_app_kubernetes_io_name", "label_team"):
            settings = Settings(
                telemetry="prometheus",
                prometheus=PrometheusSettings(url=proxy.url, match={"fleet": FLEET}, retries=0),
                workload_labels=WorkloadLabelSettings(kube_state_metrics=pod_label),
            )
            telemetry = make_telemetry(settings, fleet=world.fleets[FLEET], signals=catalog)
            result = telemetry.read(SignalQuery("gpu.temperature", workload="llm-pretrain"))
            found = {s.node for s in result.samples}
            assert found == (set(NODES[:32]) if pod_label.endswith("_name") else set())
        default, renamed = proxy.queries()
    assert 'label_app_kubernetes_io_name="llm-pretrain"' in default
    assert 'label_team="llm-pretrain"' in renamed
    assert "label_app_kubernetes_io_name" not in renamed
