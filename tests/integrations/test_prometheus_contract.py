"""The Telemetry contract, run against both adapters: SimTelemetry (in-process) and
PrometheusTelemetry (Debian's prometheus scraping the same fleet's exporter endpoint).

Covers, for each adapter: a faulty GPU/HCA/node is named with the exporter's identity labels
and the right value; absence is data (an exporter down, a GPU fallen off the bus, an unknown
node: `missing_nodes`, never 0.0); one backend query per read whatever the node count; XID
changes count value changes, not err_code label churn. And across adapters: for every signal
of the catalog the two return equal SignalResults (same nodes, labels and missing nodes;
values within a tolerance, since Prometheus extrapolates rate/increase to the window edges).

The fleet starts with its faults already in the past (10 minutes; a GPU fell off the bus 2
minutes ago), and its last 20 minutes are backfilled into Prometheus (servers/history.py), so
the default 15-minute windows are full. No fault starts within a minute of a window's edge,
where the two sampling grids (30 s history + 1 s scrapes vs. the simulator's 30 s grid
anchored at the query time) can disagree about whether a series was present.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from servers.world import World, start_world

from integrations.signals import SignalCatalog
from simulator import Fleet, SimTelemetry
from simulator.scenarios import parse_scenario
from integrations.telemetry import Sample, SignalQuery, SignalResult, Telemetry

FLEET = "contract"
FAULTS = [
    {"kind": "ecc_dbe_storm", "node": "gpu-node-03", "gpu": 5, "start": "-10m"},
    {"kind": "ib_symbol_errors", "node": "gpu-node-11", "hca": 3, "start": "-10m"},
    {"kind": "xid", "code": 79, "node": "gpu-node-02", "gpu": 4, "start": "-10m"},
    {"kind": "node_not_ready", "node": "gpu-node-14", "start": "-10m"},
    {"kind": "exporter_down", "node": "gpu-node-09", "start": "-10m"},
    {"kind": "gpu_fallen_off_bus", "node": "gpu-node-05", "gpu": 6, "start": "-2m"},
]
SCENARIO: dict[str, Any] = {
    "apiVersion": "gpu-oncall/v1",
    "kind": "Scenario",
    "metadata": {"name": "telemetry-contract"},
    "fleet": {
        "nodes": 16,
        "dcgm_counters": "all",
        "workloads": [
            {"kind": "training", "name": "llm-pretrain", "nodes": "gpu-node-[00-07]"},
            {"kind": "inference", "name": "vllm-chat", "nodes": "gpu-node-[12-13]"},
        ],
    },
    "faults": FAULTS,
    "trigger": {"command": "diagnose gpu-node-03"},
}
ALL_NODES = tuple(f"gpu-node-{i:02d}" for i in range(16))
#: Relative tolerance by range function. Prometheus extrapolates rate/increase to the window
#: edges (a counter that rose 3 reads ~3.2). Subquery steps align to wall-clock multiples of
#: 30 s and the simulated grid to the query time, so an average across a step change (a job
#: that hung 10 minutes ago) may count one of its ~31 points on the other side.
TOLERANCE = {"rate": 0.1, "increase": 0.1, "avg_over_time": 0.1, "quantile": 0.05}
#: A hung training step's time grows 1 s per second: where the 30 s grid falls (Prometheus
#: aligns subquery steps to the epoch, the simulator to the query time) moves its average.
SIGNAL_TOLERANCE = {"job.step_time": 0.2}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, catalog: SignalCatalog) -> Iterator[World]:
    fleet = Fleet(parse_scenario(SCENARIO), lambda: datetime.now(UTC))
    world = start_world(tmp_path_factory.mktemp("contract"), {FLEET: fleet}, catalog=catalog)
    yield world
    world.close()


@pytest.fixture(params=["sim", "prometheus"])
def telemetry(request: pytest.FixtureRequest, world: World, catalog: SignalCatalog) -> Any:
    if request.param == "sim":
        return SimTelemetry(world.fleets[FLEET], catalog)
    return world.telemetry(FLEET, catalog)


def by_node(result: SignalResult) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.node, tuple(sorted(s.labels.items()))): s.value for s in result.samples}


def one(result: SignalResult, node: str, **labels: str) -> Sample:
    found = [
        s
        for s in result.samples
        if s.node == node and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(found) == 1, (node, labels, result.samples[:4])
    return found[0]


def test_dbe_rate_names_the_faulty_gpu_with_its_identity_labels(telemetry: Telemetry) -> None:
    result = telemetry.read(SignalQuery("gpu.ecc.dbe_rate", nodes=("gpu-node-03", "gpu-node-04")))
    faulty = one(result, "gpu-node-03", gpu="5")
    assert set(faulty.labels) == {"gpu", "UUID"} and faulty.labels["UUID"].startswith("GPU-")
    # 6 errors/min for the last 10 minutes, averaged over the 15-minute window: 4/min.
    assert faulty.value == pytest.approx(4.0, rel=0.1)
    assert [s.value for s in result.samples if s is not faulty] == [0.0] * 15
    assert result.missing_nodes == ()


def test_ib_symbol_errors_name_the_hca_port(telemetry: Telemetry) -> None:
    result = telemetry.read(SignalQuery("fabric.ib.symbol_error_rate", nodes=("gpu-node-11",)))
    worst = max(result.samples, key=lambda s: s.value)
    assert (worst.node, worst.labels) == ("gpu-node-11", {"device": "mlx5_3", "port": "1"})
    assert worst.value > 1.0


def test_absent_series_are_missing_never_zero(telemetry: Telemetry) -> None:
    nodes = ("gpu-node-09", "gpu-node-10", "gpu-node-99")
    window = timedelta(minutes=5)  # gpu-node-09's exporter went down 10 minutes ago
    result = telemetry.read(SignalQuery("gpu.temperature", nodes=nodes, window=window))
    assert result.missing_nodes == ("gpu-node-09", "gpu-node-99")
    assert {s.node for s in result.samples} == {"gpu-node-10"}


def test_a_gpu_fallen_off_the_bus_minutes_ago_has_no_current_sample(telemetry: Telemetry) -> None:
    result = telemetry.read(SignalQuery("gpu.xid.last", nodes=("gpu-node-05",)))
    assert sorted(s.labels["gpu"] for s in result.samples) == ["0", "1", "2", "3", "4", "5", "7"]


def test_node_not_ready_reads_zero_ready(telemetry: Telemetry) -> None:
    result = telemetry.read(SignalQuery("k8s.node.ready", nodes=("gpu-node-14", "gpu-node-15")))
    assert {s.node: s.value for s in result.samples} == {"gpu-node-14": 0.0, "gpu-node-15": 1.0}


def test_xid_changes_count_value_changes_not_label_churn(telemetry: Telemetry) -> None:
    result = telemetry.read(SignalQuery("gpu.xid.changes", nodes=("gpu-node-02",)))
    assert one(result, "gpu-node-02", gpu="4").value == 1.0
    last = telemetry.read(SignalQuery("gpu.xid.last", nodes=("gpu-node-02",)))
    assert one(last, "gpu-node-02", gpu="4").labels["err_code"] == "79"


@pytest.mark.parametrize("count", [1, 4, 16])
def test_one_backend_query_per_read_whatever_the_node_count(telemetry: Any, count: int) -> None:
    before = telemetry.queries
    result = telemetry.read(SignalQuery("gpu.sm_clock", nodes=ALL_NODES[:count]))
    assert telemetry.queries - before == 1
    assert result.queries == 1
    assert len({s.node for s in result.samples} | set(result.missing_nodes)) == count


@pytest.mark.parametrize("window", [timedelta(minutes=15), timedelta(minutes=5)])
def test_both_adapters_return_equal_results_for_every_signal(
    world: World, catalog: SignalCatalog, window: timedelta
) -> None:
    sim = SimTelemetry(world.fleets[FLEET], catalog)
    prom = world.telemetry(FLEET, catalog)
    differences = []
    for name in catalog.names():
        query = SignalQuery(name, nodes=ALL_NODES, window=window)
        a, b = sim.read(query), prom.read(query)
        ka, kb = by_node(a), by_node(b)
        if set(ka) != set(kb) or a.missing_nodes != b.missing_nodes:
            differences.append(
                (name, sorted(set(ka) ^ set(kb))[:3], a.missing_nodes, b.missing_nodes)
            )
            continue
        rel = SIGNAL_TOLERANCE.get(name, TOLERANCE.get(catalog.get(name).fn, 0.01))
        for key, value in ka.items():
            if kb[key] != pytest.approx(value, rel=rel, abs=1e-6):
                differences.append((name, key, value, kb[key]))
                break
    assert differences == [], "\n".join(str(d) for d in differences)
