"""Workload-targeted fault kinds: a pod OOM-killed, a gang job only partly placed.

They change pods (phase, restarts, last termination reason), Kubernetes events and the kernel
log of the node the pod ran on. The hardware stays healthy. A partly placed gang never starts:
its placed ranks wait at the first collective (`last completed NCCL work: -1`).
"""

from __future__ import annotations

from simulator.fault_base import (
    ActiveFault,
    FaultEvent,
    FaultKind,
    JobEffect,
    LogLine,
    WorkloadEffect,
)
from simulator.pods import SimPod, worker_name


def _oom_line(pid: int) -> str:
    return (
        f"Memory cgroup out of memory: Killed process {pid} (python) total-vm:412733844kB, "
        "anon-rss:1056839172kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:2071520kB "
        "oom_score_adj:-997"
    )


class PodOomKilled(FaultKind):
    """The workload's pod on the node hit its memory limit and was OOM-killed (and restarted)."""

    name = "pod_oom_killed"
    layer = "kubernetes"
    target = "workload"
    pins_node = True

    def apply_to_pods(self, fault: ActiveFault, pods: list[SimPod]) -> None:
        for pod in pods:
            if pod.node == fault.node_name and not pod.daemonset:
                pod.terminate(fault.window.start, reason="OOMKilled")

    def kernel_log(self, fault: ActiveFault, until: float) -> list[LogLine]:
        if until < fault.window.start:
            return []
        return [LogLine(fault.window.start, _oom_line(fault.pid))]

    def pod_log(self, fault: ActiveFault, pod: SimPod, *, until: float) -> list[LogLine]:
        if pod.daemonset or until < fault.window.start:
            return []
        return [
            LogLine(
                fault.window.start - 5.0,
                "[rank0]: torch.OutOfMemoryError: DataLoader worker (pid 4812) is killed "
                "by signal: Killed.",
            )
        ]

    def events(self, fault: ActiveFault) -> list[FaultEvent]:
        node = fault.node_name or ""
        return [
            FaultEvent(
                t=fault.window.start,
                kind="Node",
                name=node,
                reason="OOMKilling",
                message=_oom_line(fault.pid),
                type="Warning",
                node=node,
            )
        ]


class GangPartialPlacement(FaultKind):
    """`missing` ranks of a gang-scheduled job cannot be placed: those pods stay Pending."""

    name = "gang_partial_placement"
    layer = "kubernetes"
    target = "workload"
    workload_kind = "training"
    needs = frozenset({"missing"})

    def apply_to_pods(self, fault: ActiveFault, pods: list[SimPod]) -> None:
        workers = [p for p in pods if not p.daemonset]
        for pod in workers[len(workers) - (fault.missing or 0) :]:
            pod.node = None
            pod.phase = "Pending"

    def workload_effects(self, fault: ActiveFault) -> list[WorkloadEffect]:
        return [JobEffect(fault.window, workload=fault.workload, hang="init")]

    def events(self, fault: ActiveFault) -> list[FaultEvent]:
        n, missing = fault.fleet_size, fault.missing or 0
        message = (
            f"0/{n} nodes are available: {n} Insufficient nvidia.com/gpu. preemption: "
            f"0/{n} nodes are available: {n} No preemption victims found for incoming pod."
        )
        first, workload = fault.workload_size - missing, fault.workload or ""
        return [
            FaultEvent(
                t=fault.window.start,
                kind="Pod",
                name=worker_name(workload, rank),
                reason="FailedScheduling",
                message=message,
                type="Warning",
            )
            for rank in range(max(first, 0), fault.workload_size)
        ]


WORKLOAD_FAULTS: tuple[FaultKind, ...] = (PodOomKilled(), GangPartialPlacement())
