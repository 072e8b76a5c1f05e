"""SimCluster: the Cluster port over the simulated fleet (nodes, pods, events, logs, actions).

What kubectl would show for the fleet at the fleet clock's "now": node conditions and taints
follow the kube-state-metrics series, so the API view and the metrics always agree. Writes are
idempotent and counted on the fleet (`fleet.cordon_calls`, `fleet.drain_calls`).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

from integrations.cluster import ClusterEvent, DrainReport, NodeInfo, Outcome, PodInfo
from integrations.errors import NodeNotFound
from integrations.sim.fleet import Fleet

_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
_STATUS = {"true": "True", "false": "False", "unknown": "Unknown"}


class SimCluster:
    """Reads and changes the simulated fleet's Kubernetes objects."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    def nodes(self, names: Collection[str] | None = None) -> list[NodeInfo]:
        """Nodes by name (all when None). An unknown name raises NodeNotFound with known names."""
        wanted = self.fleet.node_names if names is None else list(names)
        for name in wanted:
            if name not in self.fleet.nodes:
                raise NodeNotFound(name, self.fleet.node_names)
        at = self.fleet.now()
        return [self._node_info(name, at) for name in wanted]

    def pods_on(self, node: str) -> list[PodInfo]:
        return [pod.info() for pod in self.fleet.pods_on(node)]

    def events(self, node: str, *, since: datetime) -> list[ClusterEvent]:
        return self.fleet.events(node, since=since, until=self.fleet.now())

    def pod_logs(self, pod: str, namespace: str, *, tail_lines: int = 500) -> str:
        lines = self.fleet.pod_log(self.fleet.pod(pod, namespace), self.fleet.now())
        return "\n".join(lines[-tail_lines:] if tail_lines > 0 else [])

    def node_logs(self, node: str, *, tail_lines: int = 500) -> str:
        """The kernel log (verbatim `NVRM: Xid` lines); empty while the kubelet is down."""
        lines = self.fleet.kernel_log(node, self.fleet.now())
        return "\n".join(lines[-tail_lines:] if tail_lines > 0 else [])

    def cordon(self, node: str) -> Outcome:
        return self.fleet.cordon(node)

    def uncordon(self, node: str) -> Outcome:
        return self.fleet.uncordon(node)

    def drain(self, node: str, *, grace: timedelta) -> DrainReport:
        return self.fleet.drain(node, grace=grace)

    def _node_info(self, name: str, at: datetime) -> NodeInfo:
        spec, fleet = self.fleet.nodes[name], self.fleet
        conditions = {cond: self._condition(name, cond, at=at) for cond in _CONDITIONS}
        cordoned = fleet.state[name].cordoned
        taints = ["node.kubernetes.io/unschedulable:NoSchedule"] if cordoned else []
        if conditions["Ready"] != "True":
            kind = "not-ready" if conditions["Ready"] == "False" else "unreachable"
            taints += [
                f"node.kubernetes.io/{kind}:NoSchedule",
                f"node.kubernetes.io/{kind}:NoExecute",
            ]
        gpu = ("resource", "nvidia_com_gpu")
        capacity = fleet.value("kube_node_status_capacity", name, entity=gpu, at=at) or 0.0
        allocatable = fleet.value("kube_node_status_allocatable", name, entity=gpu, at=at) or 0.0
        labels = {
            "kubernetes.io/hostname": name,
            "nvidia.com/gpu.product": fleet.scenario.fleet.gpu_model.replace(" ", "-"),
            "nvidia.com/gpu.count": str(len(spec.gpus)),
            "nvidia.com/cuda.driver-version.full": fleet.driver_version(name),
            "gpu-oncall.io/rack": spec.rack,
            "gpu-oncall.io/leaf-switch": spec.leaf_switch,
        }
        return NodeInfo(
            name=name,
            ready=conditions["Ready"] == "True",
            unschedulable=cordoned,
            conditions=conditions,
            labels=labels,
            taints=tuple(taints),
            gpu_capacity=int(capacity),
            gpu_allocatable=max(0, int(allocatable)),
        )

    def _condition(self, node: str, condition: str, *, at: datetime) -> str:
        for status, shown in _STATUS.items():
            entity = ("condition", condition, status)
            if self.fleet.value("kube_node_status_condition", node, entity=entity, at=at) == 1.0:
                return shown
        return "Unknown"
