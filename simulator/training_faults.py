"""Training-job fault kinds: NCCL on TCP sockets, a straggler rank, data-loader starvation and
checkpoint I/O stalls.

The hardware stays healthy in all four; what changes is how the job runs (`JobEffect`), and
through it the job metrics, the GPU activity of its nodes and its pods' NCCL/PyTorch lines
(job_logs.py). `nccl_tcp_fallback` is a Kubernetes fault (the pod was scheduled without its
RDMA resource), the other three are the workload's own (DOMAIN.md §6, §8).
"""

from __future__ import annotations

from simulator.fault_base import ActiveFault, FaultKind, JobEffect, WorkloadEffect
from simulator.training import BUSBW, CHECKPOINT_S, DATA_WAIT, SOCKET_BUSBW


class NcclTcpFallback(FaultKind):
    """One rank's pod has no RDMA device: NCCL finds no IB device and falls back to sockets.

    Its busbw drops to ~5e9 B/s and, collectives being synchronous, every step of the job takes
    ~4x longer. The pod logs `NET/IB : No device found.` and `Using network Socket`.
    """

    name = "nccl_tcp_fallback"
    layer = "kubernetes"
    target = "workload"
    workload_kind = "training"
    pins_node = True
    ends_on_drain = False

    def workload_effects(self, fault: ActiveFault) -> list[WorkloadEffect]:
        slow = 1.0 - (1.0 - SOCKET_BUSBW / BUSBW) * fault.intensity
        return [
            JobEffect(
                fault.window,
                node=fault.node_name,
                workload=fault.workload,
                network=slow,
                transport="Socket",
            )
        ]


class StragglerRank(FaultKind):
    """One rank is slow with healthy hardware (uneven work, a rank-local hook): the others wait
    in every collective, its last completed NCCL work lags, and once a wait outlasts the
    600 s NCCL timeout every rank logs a watchdog timeout: it looks like a fabric problem."""

    name = "straggler_rank"
    layer = "workload"
    target = "workload"
    workload_kind = "training"
    pins_node = True
    ends_on_drain = False

    def workload_effects(self, fault: ActiveFault) -> list[WorkloadEffect]:
        return [
            JobEffect(
                fault.window,
                node=fault.node_name,
                workload=fault.workload,
                compute=1.0 + 3.0 * fault.intensity,
                behind=2,
            )
        ]


class DataloaderStarvation(FaultKind):
    """Input batches arrive late on every rank alike: GPUs idle between steps, MFU drops, and
    no rank waits in a collective (uniform, unlike a straggler)."""

    name = "dataloader_starvation"
    layer = "workload"
    target = "workload"
    workload_kind = "training"
    ends_on_drain = False

    def workload_effects(self, fault: ActiveFault) -> list[WorkloadEffect]:
        wait = DATA_WAIT + 0.55 * fault.intensity
        return [JobEffect(fault.window, workload=fault.workload, data_wait=wait)]


class CheckpointIoStall(FaultKind):
    """Checkpoint saves to slow storage take ~11 minutes instead of ~25 s: every 20 minutes the
    job stalls, and rank 0 logs `Saving ... checkpoint` then a watchdog timeout."""

    name = "checkpoint_io_stall"
    layer = "workload"
    target = "workload"
    workload_kind = "training"
    pins_node = True
    ends_on_drain = False

    def workload_effects(self, fault: ActiveFault) -> list[WorkloadEffect]:
        seconds = CHECKPOINT_S + 635.0 * fault.intensity
        return [JobEffect(fault.window, workload=fault.workload, checkpoint_s=seconds)]


TRAINING_FAULTS: tuple[FaultKind, ...] = (
    NcclTcpFallback(),
    StragglerRank(),
    DataloaderStarvation(),
    CheckpointIoStall(),
)
