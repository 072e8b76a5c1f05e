"""Masquerades: a fault below the workload shows as the job's symptom and as its root signal.

Covers: an IB port down on a job node hangs the whole job (progress 0, busbw 0, MFU 0, step
time climbing on every rank, equal last-completed works) while the port state shows DOWN, and
`NET/IB : Got completion from peer ... status=12 ... vendor err 129` WARN lines appear in the
pod on that node and its ring peers only; IB symbol errors and a flapping link slow every rank
(busbw down on the sick node, MFU down) next to the IB counters, and a flap logs NCCL port
events; thermal and power faults on one node slow the whole job like a straggler but with
clock-event bits (0x60, 0x4) and low clocks; driver skew hangs the job with only the
DCGM_FI_DRIVER_VERSION label to tell; a DBE storm kills the rank (hang plus XID 48); an IB
fault on a node that runs no job changes no job; faults off the job leave it healthy.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from simulator import Fleet, SimCluster, SimTelemetry
from integrations.telemetry import SignalQuery

Sim = Callable[..., tuple[Fleet, SimTelemetry, SimCluster]]
JOB = "llm-pretrain"
FIVE = timedelta(minutes=5)
COMPLETION = "NCCL WARN NET/IB : Got completion from peer"


def by_node(
    telemetry: SimTelemetry, signal: str, *, reduce: Callable[..., float] = min, **kw: Any
) -> dict[str, float]:
    kw.setdefault("window", FIVE)
    kw.setdefault("workload", JOB)
    out: dict[str, list[float]] = {}
    for sample in telemetry.read(SignalQuery(signal=signal, **kw)).samples:
        out.setdefault(sample.node, []).append(sample.value)
    return {node: reduce(found) for node, found in out.items()}


def logs(cluster: SimCluster) -> dict[int, str]:
    return {rank: cluster.pod_logs(f"{JOB}-worker-{rank}", "ml") for rank in range(8)}


def test_an_ib_port_down_hangs_the_job_and_shows_on_the_port(sim: Sim) -> None:
    _, telemetry, cluster = sim(faults=[{"kind": "ib_port_down", "node": "gpu-node-02", "hca": 3}])
    assert set(by_node(telemetry, "job.progress").values()) == {0.0}
    assert set(by_node(telemetry, "job.nccl_busbw").values()) == {0.0}
    assert set(by_node(telemetry, "job.mfu").values()) == {0.0}
    assert min(by_node(telemetry, "job.step_time").values()) > 300.0
    assert len(set(by_node(telemetry, "job.nccl_last_completed").values())) == 1
    assert by_node(telemetry, "fabric.ib.port_state", workload=None, nodes=("gpu-node-02",)) == {
        "gpu-node-02": 1.0
    }
    pods = logs(cluster)
    assert {rank for rank, log in pods.items() if COMPLETION in log} == {1, 2, 3}
    assert "with status=12 opcode=0 len=0 vendor err 129 (Recv)" in pods[2]
    assert "from peer 10.128.0.2<" in pods[1] and "from peer 10.128.0.2<" in pods[3]
    assert all("Watchdog caught collective operation timeout" in log for log in pods.values())


def test_symbol_errors_and_a_flapping_link_slow_every_rank(sim: Sim) -> None:
    for kind, warn in (("ib_symbol_errors", COMPLETION), ("ib_link_flap", "port error(10)")):
        _, telemetry, cluster = sim(faults=[{"kind": kind, "node": "gpu-node-06", "hca": 1}])
        steps = by_node(telemetry, "job.step_time")
        assert min(steps.values()) > 1.4, kind
        busbw = by_node(telemetry, "job.nccl_busbw")
        assert busbw.pop("gpu-node-06") < 30e9 and set(busbw.values()) == {45e9}, kind
        assert max(by_node(telemetry, "job.mfu").values()) < 0.35, kind
        assert min(by_node(telemetry, "job.progress").values()) > 0.0, kind
        rx = by_node(telemetry, "fabric.ib.rx_bytes_rate", reduce=max)
        assert max(rx.values()) < 2.2e10, kind  # the whole ring moves less traffic
        assert warn in logs(cluster)[6], kind
    _, telemetry, _ = sim(faults=[{"kind": "ib_symbol_errors", "node": "gpu-node-06", "hca": 1}])
    errors = by_node(telemetry, "fabric.ib.symbol_error_rate", reduce=max)
    assert [n for n, v in errors.items() if v > 0] == ["gpu-node-06"]
    rcv = by_node(telemetry, "fabric.ib.port_rcv_errors_rate", reduce=max)
    assert [n for n, v in rcv.items() if v > 0] == ["gpu-node-06"]


def test_thermal_and_power_faults_look_like_a_straggler_with_clock_bits(sim: Sim) -> None:
    for kind, bits in (("thermal_throttle", 0x20 | 0x40), ("power_cap", 0x4)):
        _, telemetry, _ = sim(faults=[{"kind": kind, "node": "gpu-node-04"}])
        steps = by_node(telemetry, "job.step_time")
        assert max(steps, key=steps.__getitem__) == "gpu-node-04", kind
        assert min(steps.values()) > 1.3, kind
        reasons = by_node(telemetry, "gpu.clock_event_reasons", reduce=max)
        assert reasons.pop("gpu-node-04") == bits and set(reasons.values()) == {0.0}, kind
        clocks = by_node(telemetry, "gpu.sm_clock")
        assert clocks.pop("gpu-node-04") < 1500 and set(clocks.values()) == {1980.0}, kind
        assert max(by_node(telemetry, "job.mfu").values()) < 0.42, kind


def test_driver_skew_hangs_the_job_and_only_the_label_tells(sim: Sim) -> None:
    fault = {"kind": "driver_version_skew", "node": "gpu-node-03", "version": "535.161.08"}
    _, telemetry, cluster = sim(faults=[fault])
    assert set(by_node(telemetry, "job.progress").values()) == {0.0}
    result = telemetry.read(SignalQuery(signal="node.driver_version", workload=JOB))
    versions = {s.node: s.labels["DCGM_FI_DRIVER_VERSION"] for s in result.samples}
    assert versions.pop("gpu-node-03") == "535.161.08"
    assert set(versions.values()) == {"550.54.15"} and result.queries == 1
    assert all(COMPLETION not in log for log in logs(cluster).values())


def test_a_dbe_storm_kills_the_rank_and_the_job_hangs(sim: Sim) -> None:
    _, telemetry, cluster = sim(faults=[{"kind": "ecc_dbe_storm", "node": "gpu-node-05", "gpu": 1}])
    assert set(by_node(telemetry, "job.progress").values()) == {0.0}
    xid = by_node(telemetry, "gpu.xid.last", reduce=max, workload=None, nodes=("gpu-node-05",))
    assert xid == {"gpu-node-05": 48.0}
    assert "uncorrectable ECC error encountered" in logs(cluster)[5]


def test_faults_off_the_job_leave_it_healthy(sim: Sim) -> None:
    faults = [
        {"kind": "ib_port_down", "node": "gpu-node-10", "hca": 0},
        {"kind": "thermal_throttle", "node": "gpu-node-11"},
    ]
    _, telemetry, cluster = sim(faults=faults)
    assert set(by_node(telemetry, "job.step_time").values()) == {1.2}
    assert set(by_node(telemetry, "gpu.tensor_active").values()) == {0.45}
    assert all(COMPLETION not in log for log in logs(cluster).values())
