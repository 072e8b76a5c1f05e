"""Every catalog signal against a healthy simulated fleet, and the catalog's own rules.

Covers: the sim answers every signal of runbooks/signals.yaml for a healthy fleet (with
dcgm-exporter's default counters only the default_off signals are missing, and missing means
every node listed, never 0.0); healthy H100 baselines (clocks, power, tensor-active, MFU,
step time, busbw, IB rate, vLLM TTFT/KV/queue); workload signals select by the job/service
label and `job.nodes` names a job's nodes in one query; node signals given a workload read the
nodes it runs on; one backend query per read whether a job spans 8 or 1,024 nodes; catalog
validation of `quantile` and joins.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from integrations.signals import SignalCatalog, SignalSpec
from simulator import Fleet, SimCluster, SimTelemetry
from simulator.scenarios import parse_scenario
from integrations.telemetry import SignalQuery, SignalResult

Sim = Callable[..., tuple[Fleet, SimTelemetry, SimCluster]]
T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
WORKLOADS = [
    {"kind": "training", "name": "llm-pretrain", "nodes": "gpu-node-[00-07]"},
    {"kind": "inference", "name": "vllm-chat", "nodes": "gpu-node-[12-13]"},
]
JOB_NODES = {f"gpu-node-{i:02d}" for i in range(8)}


def workload_of(signal: str) -> str | None:
    """The workload a runbook would name when reading `signal`."""
    if signal.startswith("job."):
        return "llm-pretrain"
    if signal.startswith("inference."):
        return "vllm-chat"
    return None


def read(telemetry: SimTelemetry, signal: str, **kwargs: Any) -> SignalResult:
    return telemetry.read(SignalQuery(signal=signal, **kwargs))


def values(result: SignalResult) -> list[float]:
    return [s.value for s in result.samples]


@pytest.mark.parametrize("counters", ["all", "default"])
def test_the_sim_answers_every_catalog_signal_for_a_healthy_fleet(
    sim: Sim, catalog: SignalCatalog, counters: str
) -> None:
    fleet, telemetry, _ = sim(workloads=WORKLOADS, counters=counters)
    unanswered = []
    for name in catalog.names():
        spec = catalog.get(name)
        result = read(telemetry, name, workload=workload_of(name))
        if spec.default_off and counters == "default":
            assert result.samples == () and set(result.missing_nodes) == set(fleet.node_names)
        elif name == "k8s.pod.oom_killed":
            continue  # exists only once a container terminated (test_sim_kube)
        elif not result.samples or result.missing_nodes:
            unanswered.append(name)
    assert unanswered == []


def test_healthy_facility_and_gpu_baselines(sim: Sim) -> None:
    _, telemetry, _ = sim(workloads=WORKLOADS)
    busy = ("gpu-node-00", "gpu-node-07")
    assert set(values(read(telemetry, "gpu.sm_clock", nodes=busy))) == {1980.0}
    power = values(read(telemetry, "gpu.power_usage", nodes=busy))
    assert min(power) >= 560.0 and max(power) <= 700.0
    assert set(values(read(telemetry, "gpu.tensor_active", nodes=busy))) == {0.45}
    assert set(values(read(telemetry, "gpu.util", nodes=busy))) == {100.0}
    assert set(values(read(telemetry, "gpu.clock_event_reasons", nodes=busy))) == {0.0}
    idle = values(read(telemetry, "gpu.clock_event_reasons", nodes=("gpu-node-10",)))
    assert set(idle) == {1.0}  # GPU_IDLE: benign
    assert set(values(read(telemetry, "gpu.pcie_replay_rate", nodes=busy))) == {0.0}
    memory = values(read(telemetry, "gpu.memory_temperature", nodes=busy))
    assert max(memory) < 75.0


def test_healthy_fabric_kubernetes_and_telemetry_baselines(sim: Sim) -> None:
    fleet, telemetry, _ = sim(workloads=WORKLOADS)
    assert set(values(read(telemetry, "fabric.ib.rate"))) == {5e10}
    assert set(values(read(telemetry, "fabric.ib.physical_state"))) == {5.0}
    rx = read(telemetry, "fabric.ib.rx_bytes_rate", nodes=("gpu-node-00",))
    assert set(values(rx)) == {2.2e10}
    for signal in ("fabric.ib.port_rcv_errors_rate", "fabric.ib.link_error_recovery_increase"):
        assert set(values(read(telemetry, signal))) == {0.0}, signal
    for signal in ("telemetry.dcgm_up", "telemetry.node_exporter_up", "k8s.node.ready"):
        assert values(read(telemetry, signal)) == [1.0] * 16, signal
    assert set(values(read(telemetry, "k8s.node.unschedulable"))) == {0.0}
    versions = read(telemetry, "node.driver_version")
    assert {(s.value, s.labels["DCGM_FI_DRIVER_VERSION"]) for s in versions.samples} == {
        (8.0, "550.54.15")
    }
    assert len(versions.samples) == len(fleet.node_names)


def test_healthy_training_job_baselines(sim: Sim) -> None:
    _, telemetry, _ = sim(workloads=WORKLOADS)
    job = {"workload": "llm-pretrain", "window": timedelta(minutes=5)}
    expected = {
        "job.step_time": 1.2,
        "job.mfu": 0.42,
        "job.mfu_baseline": 0.42,
        "job.nccl_busbw": 45e9,
        "job.tokens_per_second": 41250.0,
        "job.dataloader_wait_ratio": 0.05,
        "job.checkpoint_seconds": 25.0,
        "job.progress": 250.0,  # 5 minutes at 1.2 s per step
    }
    for signal, value in expected.items():
        result = read(telemetry, signal, **job)
        assert {s.node for s in result.samples} == JOB_NODES, signal
        assert values(result) == pytest.approx([value] * 8), signal
    completed = read(telemetry, "job.nccl_last_completed", **job)
    assert len({s.value for s in completed.samples}) == 1
    assert sorted(int(s.labels["rank"]) for s in completed.samples) == list(range(0, 64, 8))


def test_healthy_inference_baselines(sim: Sim) -> None:
    _, telemetry, _ = sim(workloads=WORKLOADS)
    service = {"workload": "vllm-chat"}
    ttft = values(read(telemetry, "inference.ttft_p99", **service))
    assert len(ttft) == 2 and all(0.25 <= v <= 0.35 for v in ttft)
    tpot = values(read(telemetry, "inference.tpot_p99", **service))
    assert all(0.04 <= v <= 0.06 for v in tpot)
    assert values(read(telemetry, "inference.kv_cache_usage", **service)) == [0.5, 0.5]
    assert values(read(telemetry, "inference.requests_waiting", **service)) == [0.0, 0.0]
    assert values(read(telemetry, "inference.preemption_rate", **service)) == [0.0, 0.0]
    assert values(read(telemetry, "inference.request_rate", **service)) == pytest.approx([12, 12])
    queue = values(read(telemetry, "inference.queue_time_p99", **service))
    assert all(v < 0.3 for v in queue)  # inside vLLM's first queue-time bucket (0.3 s)
    sample = read(telemetry, "inference.ttft_p99", **service).samples[0]
    assert sample.labels == {"model_name": "meta-llama/Llama-3.1-70B-Instruct"}


def test_job_nodes_names_the_job_nodes_in_one_query(sim: Sim) -> None:
    _, telemetry, _ = sim(workloads=WORKLOADS)
    result = read(telemetry, "job.nodes", workload="llm-pretrain")
    assert {s.node for s in result.samples} == JOB_NODES and result.queries == 1
    assert result.missing_nodes == ()
    service = read(telemetry, "inference.nodes", workload="vllm-chat")
    assert {s.node for s in service.samples} == {"gpu-node-12", "gpu-node-13"}


def test_workload_signals_select_by_the_workload_label(sim: Sim) -> None:
    _, telemetry, _ = sim(workloads=WORKLOADS)
    assert read(telemetry, "job.step_time", workload="vllm-chat").samples == ()
    assert read(telemetry, "job.step_time", workload="no-such-job").samples == ()
    narrowed = read(
        telemetry, "job.step_time", workload="llm-pretrain", nodes=("gpu-node-01", "gpu-node-09")
    )
    assert [s.node for s in narrowed.samples] == ["gpu-node-01"]
    assert narrowed.missing_nodes == ("gpu-node-09",)


def test_node_signals_given_a_workload_read_the_nodes_it_runs_on(sim: Sim) -> None:
    _, telemetry, _ = sim(workloads=WORKLOADS)
    result = read(telemetry, "fabric.ib.symbol_error_rate", workload="llm-pretrain")
    assert {s.node for s in result.samples} == JOB_NODES and len(result.samples) == 64


def job_fleet(nodes: int, job_nodes: int) -> Fleet:
    width = len(str(nodes - 1))
    last = f"{job_nodes - 1:0{width}d}"
    raw = {
        "apiVersion": "gpu-oncall/v1",
        "kind": "Scenario",
        "metadata": {"name": "scale"},
        "fleet": {
            "nodes": nodes,
            "workloads": [
                {
                    "kind": "training",
                    "name": "llm-pretrain",
                    "nodes": f"gpu-node-[{0:0{width}d}-{last}]",
                }
            ],
        },
        "faults": [{"kind": "thermal_throttle", "node": f"gpu-node-{3:0{width}d}"}],
        "trigger": {"command": "run mfu-regression job=llm-pretrain"},
    }
    return Fleet(parse_scenario(raw), lambda: T0)


@pytest.mark.parametrize(
    "signal", ["job.nodes", "job.step_time", "job.nccl_last_completed", "gpu.tensor_active"]
)
def test_one_query_per_read_whatever_the_job_size(catalog: SignalCatalog, signal: str) -> None:
    for nodes, job_nodes in ((16, 8), (2048, 1024)):
        telemetry = SimTelemetry(job_fleet(nodes, job_nodes), catalog)
        result = read(telemetry, signal, workload="llm-pretrain")
        assert (result.queries, telemetry.queries) == (1, 1)
        assert len({s.node for s in result.samples}) == job_nodes


def test_a_quantile_signal_needs_its_quantile() -> None:
    base = {"layer": "workload", "help": "h", "source": "vllm", "metric": "vllm:x_seconds"}
    with pytest.raises(ValueError, match="quantile"):
        SignalSpec.model_validate({**base, "fn": "quantile"})
    with pytest.raises(ValueError, match="quantile"):
        SignalSpec.model_validate({**base, "fn": "last", "quantile": 0.9})
    spec = SignalSpec.model_validate({**base, "fn": "quantile", "quantile": 0.99})
    assert spec.series_metric == "vllm:x_seconds_bucket" and spec.selects_by_workload


def test_pod_signals_select_by_workload_and_join_the_pod_node(catalog: SignalCatalog) -> None:
    spec = catalog.get("k8s.pod.pending")
    assert spec.selects_by_workload and [j.metric for j in spec.joins] == [
        "kube_pod_info",
        "kube_pod_labels",
    ]
    assert not catalog.get("gpu.temperature").selects_by_workload
