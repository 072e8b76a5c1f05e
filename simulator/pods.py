"""Pods of the simulated fleet: one worker per workload node plus the dcgm-exporter DaemonSet.

Owns the live, mutable pod records the fleet and faults change (eviction, OOM kill, pending);
the Cluster port only ever sees frozen `PodInfo` copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from integrations.cluster import PodInfo
from simulator.topology import unit_hash

EXPORTER_NAMESPACE = "gpu-operator"
EXPORTER_DAEMONSET = "nvidia-dcgm-exporter"
DEVICE_PLUGIN_DAEMONSET = "nvidia-device-plugin-daemonset"


@dataclass
class SimPod:
    """A live pod. `daemonset` pods are left alone by a drain."""

    name: str
    namespace: str
    node: str | None
    phase: str
    workload: str | None
    labels: dict[str, str]
    gpus: int = 0
    daemonset: bool = False
    pid: int = 0
    """PID of the main process on the node (kernel log lines name it)."""
    restarts: int = 0
    last_terminated_reason: str | None = None
    home: str | None = None
    """The node the pod was first placed on (its logs and events stay with that node)."""
    stopped_at: float | None = None
    """Fleet time the pod was evicted; its log ends there."""
    terminations: list[tuple[float, str, int]] = field(default_factory=list)
    """(fleet time, reason, restarts) of each container termination a fault caused."""
    container: str = "main"
    owner_kind: str | None = None
    """Kind of the controller owner a real cluster shows: DaemonSet, Job or ReplicaSet."""
    mirror: bool = False
    """A static pod's mirror (the kubelet owns it; a drain leaves it alone)."""

    def __post_init__(self) -> None:
        if self.home is None:
            self.home = self.node

    def terminate(self, t: float, *, reason: str, restarts: int = 1) -> None:
        """The container was killed at `t` (OOMKilled, Error) and restarted `restarts` times."""
        self.terminations.append((t, reason, restarts))
        self.terminations.sort()
        self.restarts += restarts
        self.last_terminated_reason = self.terminations[-1][1]

    def info(self) -> PodInfo:
        return PodInfo(
            name=self.name,
            namespace=self.namespace,
            node=self.node,
            phase=self.phase,
            labels=dict(self.labels),
            workload=self.workload,
            restarts=self.restarts,
            last_terminated_reason=self.last_terminated_reason,
            gpus=self.gpus,
            owner_kind=self.owner_kind,
            mirror=self.mirror,
        )


def _pid(*parts: object) -> int:
    return 2000 + int.from_bytes(unit_hash(*parts)[:3], "big") % 3_000_000


def worker_name(workload: str, rank: int) -> str:
    return f"{workload}-worker-{rank}"


def worker_pod(
    *, seed: str, workload: str, kind: str, namespace: str, rank: int, node: str, gpus: int
) -> SimPod:
    """`<workload>-worker-<rank>` on `node`, holding all of its GPUs."""
    return SimPod(
        name=worker_name(workload, rank),
        namespace=namespace,
        node=node,
        phase="Running",
        workload=workload,
        labels={
            "app.kubernetes.io/name": workload,
            "gpu-oncall.io/workload-kind": kind,
            "gpu-oncall.io/rank": str(rank),
        },
        gpus=gpus,
        pid=_pid(seed, workload, rank),
        container="vllm" if kind == "inference" else "trainer",
        owner_kind="ReplicaSet" if kind == "inference" else "Job",
    )


def exporter_pod(*, seed: str, node: str) -> SimPod:
    """The dcgm-exporter DaemonSet pod of `node` (`nvidia-dcgm-exporter-xxxxx`)."""
    return _daemonset_pod(EXPORTER_DAEMONSET, unit="dcgm-exporter", seed=seed, node=node)


def device_plugin_pod(*, seed: str, node: str) -> SimPod:
    """The NVIDIA device plugin DaemonSet pod of `node` (`nvidia-device-plugin-daemonset-xxxxx`,
    as the GPU Operator names it): restarting it is how a GPU it marked unhealthy comes back."""
    return _daemonset_pod(DEVICE_PLUGIN_DAEMONSET, unit="device-plugin", seed=seed, node=node)


def _daemonset_pod(daemonset: str, *, unit: str, seed: str, node: str) -> SimPod:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    digest = unit_hash(seed, unit, node)
    suffix = "".join(alphabet[b % len(alphabet)] for b in digest[:5])
    return SimPod(
        name=f"{daemonset}-{suffix}",
        namespace=EXPORTER_NAMESPACE,
        node=node,
        phase="Running",
        workload=daemonset,
        labels={"app": daemonset},
        daemonset=True,
        pid=_pid(seed, unit, node),
        container=daemonset,
        owner_kind="DaemonSet",
    )
