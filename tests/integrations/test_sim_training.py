"""Training-job fault kinds: what the job metrics, the GPUs and the pods' logs show.

Covers: `nccl_tcp_fallback` (busbw ~5e9 on the fallen-back rank only, every rank ~4x slower,
MFU down, `NET/IB : No device found.` / `NET/Socket` / `Using network Socket` in that pod and
`Using network IB` elsewhere); `straggler_rank` (its step time highest and tensor-active
pattern different, the others wait in collectives with GPU util high and tensor-active low,
its last completed NCCL work behind, watchdog timeouts on every rank 600 s in, no IB errors);
`dataloader_starvation` (wait ratio high on every rank alike, tensor-active gaps, GPU util
down, MFU down, busbw normal); `checkpoint_io_stall` (checkpoint duration, progress stalls,
`Saving checkpoint` then a watchdog timeout on rank 0); a job with no fault logs only healthy
lines; intensity scales the slowdown.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from simulator import Fleet, SimCluster, SimTelemetry
from integrations.telemetry import SignalQuery

Sim = Callable[..., tuple[Fleet, SimTelemetry, SimCluster]]
JOB = "llm-pretrain"
FIVE = timedelta(minutes=5)


def by_node(telemetry: SimTelemetry, signal: str, **kwargs: Any) -> dict[str, float]:
    kwargs.setdefault("window", FIVE)
    result = telemetry.read(SignalQuery(signal=signal, workload=JOB, **kwargs))
    out: dict[str, float] = {}
    for sample in result.samples:  # per GPU / HCA signals: the node's lowest reading
        out[sample.node] = min(out.get(sample.node, sample.value), sample.value)
    return out


def pod_log(cluster: SimCluster, rank: int) -> str:
    return cluster.pod_logs(f"{JOB}-worker-{rank}", "ml")


def test_tcp_fallback_slows_every_rank_and_only_that_rank_uses_sockets(sim: Sim) -> None:
    fault = {"kind": "nccl_tcp_fallback", "workload": JOB, "node": "gpu-node-03"}
    _, telemetry, cluster = sim(faults=[fault])
    busbw = by_node(telemetry, "job.nccl_busbw")
    assert busbw.pop("gpu-node-03") == pytest.approx(5e9)
    assert set(busbw.values()) == {45e9}
    steps = by_node(telemetry, "job.step_time")
    assert all(4.0 <= v / 1.2 <= 4.5 for v in steps.values()), steps  # "4-5x slower"
    assert max(by_node(telemetry, "job.mfu").values()) < 0.12
    fallen = pod_log(cluster, 3)
    assert "NCCL INFO NET/IB : No device found." in fallen
    assert "NCCL INFO NET/Socket : Using [0]eth0:10.64.0.3<0>" in fallen
    assert fallen.rstrip().count("NCCL INFO Using network Socket") == 1
    assert "Using network Socket" not in pod_log(cluster, 2)
    assert "NCCL INFO Using network IB" in pod_log(cluster, 2)
    ib = by_node(telemetry, "fabric.ib.rx_bytes_rate")
    assert ib["gpu-node-03"] == 0.0 and ib["gpu-node-02"] > 0.0


def test_a_straggler_rank_is_slow_behind_and_looks_like_a_fabric_hang(sim: Sim) -> None:
    fault = {"kind": "straggler_rank", "workload": JOB, "node": "gpu-node-05"}
    _, telemetry, cluster = sim(faults=[fault])
    steps = by_node(telemetry, "job.step_time")
    assert max(steps, key=steps.__getitem__) == "gpu-node-05"
    assert min(steps.values()) > 2 * 1.2  # the others wait for it
    tensor = by_node(telemetry, "gpu.tensor_active")
    assert tensor.pop("gpu-node-05") > 0.45 > 0.3 > max(tensor.values())
    assert min(by_node(telemetry, "gpu.util").values()) == 100.0  # NCCL kernels spin
    completed = by_node(telemetry, "job.nccl_last_completed")
    assert min(completed, key=completed.__getitem__) == "gpu-node-05"
    assert len(set(completed.values())) == 2
    assert set(by_node(telemetry, "fabric.ib.symbol_error_rate").values()) == {0.0}
    for rank in range(8):
        log = pod_log(cluster, rank)
        assert "Watchdog caught collective operation timeout" in log, rank
        assert "NET/IB : Got completion" not in log
    behind = int(completed["gpu-node-05"])
    assert f"last completed NCCL work: {behind}." in pod_log(cluster, 5)
    assert f"last completed NCCL work: {behind + 2}." in pod_log(cluster, 4)


def test_dataloader_starvation_is_uniform_with_no_collective_waiting(sim: Sim) -> None:
    _, telemetry, cluster = sim(faults=[{"kind": "dataloader_starvation", "workload": JOB}])
    assert by_node(telemetry, "job.dataloader_wait_ratio") == {
        f"gpu-node-{i:02d}": pytest.approx(0.6) for i in range(8)
    }
    assert len(set(by_node(telemetry, "job.step_time").values())) == 1
    assert max(by_node(telemetry, "gpu.tensor_active").values()) < 0.25
    assert max(by_node(telemetry, "gpu.util").values()) < 50.0  # idle between batches
    assert max(by_node(telemetry, "job.mfu").values()) < 0.2
    assert set(by_node(telemetry, "job.nccl_busbw").values()) == {45e9}
    assert "Watchdog" not in pod_log(cluster, 3)
    assert "data_wait 60%" in pod_log(cluster, 3)


def test_checkpoint_io_stall_stalls_progress_after_saving(sim: Sim) -> None:
    fault = {"kind": "checkpoint_io_stall", "workload": JOB, "start": "-30m"}
    _, telemetry, cluster = sim(faults=[fault])
    window = timedelta(minutes=15)  # the last save that finished took 660 s
    assert set(by_node(telemetry, "job.checkpoint_seconds", window=window).values()) == {660.0}
    stalled = by_node(telemetry, "job.progress", window=timedelta(minutes=9))
    assert set(stalled.values()) == {0.0}  # the save that began 10 minutes ago still runs
    hour = by_node(telemetry, "job.progress", window=timedelta(minutes=40))
    assert 0.0 < min(hour.values()) < 40 * 60 / 1.2
    log = pod_log(cluster, 0).splitlines()
    saving = next(i for i, line in enumerate(log) if "Saving checkpoint at step" in line)
    timeout = next(i for i, line in enumerate(log) if "Watchdog caught" in line)
    assert saving < timeout
    assert "Saving checkpoint" not in pod_log(cluster, 1)


def test_a_healthy_job_logs_no_fault_lines(sim: Sim) -> None:
    _, _, cluster = sim()
    log = pod_log(cluster, 0)
    assert "NCCL INFO Using network IB" in log and "step_time 1.20s" in log
    for bad in ("WARN", "Watchdog", "No device found", "Socket"):
        assert bad not in log, bad


def test_intensity_scales_the_slowdown(sim: Sim) -> None:
    full = {"kind": "straggler_rank", "workload": JOB, "node": "gpu-node-05"}
    _, strong, _ = sim(faults=[full])
    _, weak, _ = sim(faults=[{**full, "intensity": 0.25}])
    slow = by_node(strong, "job.step_time")["gpu-node-00"]
    assert 1.2 < by_node(weak, "job.step_time")["gpu-node-00"] < slow
