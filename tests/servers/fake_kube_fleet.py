"""Mirror a simulated fleet into the fake Kubernetes API server.

Nodes get the labels, annotations, taints, cordon and GPU capacity that `SimCluster` shows;
pods get controller owners (DaemonSet for the dcgm-exporter, Job for training workers,
ReplicaSet for inference workers). What changes with fleet time (node conditions and GPU
allocatable, the kernel log behind the node log query, pod logs, events) is read from the
fleet at request time, so the fake follows the fleet's clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from simulator.cluster import SimCluster
from tests.servers import kube_objects as ko

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"

if TYPE_CHECKING:
    from simulator.fleet import Fleet
    from simulator.pods import SimPod
    from tests.servers.fake_kube import FakeKube

JSON = dict[str, Any]


def owner_of(pod: SimPod) -> tuple[str, str] | None:
    """The controller owner a real cluster would show for the simulated pod (a Deployment's
    ReplicaSet is `<deployment>-<pod-template-hash>`)."""
    if pod.owner_kind is None or pod.workload is None:
        return None
    if pod.owner_kind == "ReplicaSet":
        return ("ReplicaSet", f"{pod.workload}-7c9d8b6f5d")
    return (pod.owner_kind, pod.workload)


@dataclass
class FleetSource:
    """The fleet's time-dependent state, read when the fake answers."""

    fleet: Fleet

    def node_status(self, node: str) -> JSON | None:
        if node not in self.fleet.nodes:
            return None
        info = SimCluster(self.fleet).nodes([node])[0]
        return ko.node_status(
            info.conditions, capacity=info.gpu_capacity, allocatable=info.gpu_allocatable
        )

    def kernel_log(self, node: str) -> list[str] | None:
        if node not in self.fleet.nodes:
            return None
        return self.fleet.kernel_log(node, self.fleet.now())

    def pod_log(self, namespace: str, pod: str) -> list[str] | None:
        sim_pod = self.fleet.pods.get((namespace, pod))
        return None if sim_pod is None else self.fleet.pod_log(sim_pod, self.fleet.now())

    def events(self) -> list[JSON]:
        now = self.fleet.now()
        since = self.fleet.t0 - timedelta(days=1)
        namespaces = {pod.name: pod.namespace for pod in self.fleet.pods.values()}
        events = []
        for node in self.fleet.node_names:
            for index, event in enumerate(self.fleet.events(node, since=since, until=now)):
                namespace = namespaces.get(event.name, "") if event.kind == "Pod" else ""
                events.append(
                    ko.event_object(
                        name=f"{event.name}.{node}.{index}",
                        namespace=namespace or "default",
                        kind=event.kind,
                        object_name=event.name,
                        object_namespace=namespace,
                        reason=event.reason,
                        message=event.message,
                        at=event.at,
                        type=event.type,
                    )
                )
        return events


class Seedable(Protocol):
    """What the fleet's objects are written into: the fake API server or the real one."""

    def add_node(self, name: str, **fields: Any) -> object: ...

    def add_pod(self, name: str, namespace: str, **fields: Any) -> object: ...


def seed_objects(target: Seedable, fleet: Fleet) -> None:
    """Write the fleet's nodes (without the taints a controller would set) and pods."""
    for info in SimCluster(fleet).nodes():
        target.add_node(
            info.name,
            labels=info.labels,
            annotations=info.annotations,
            taints=[t for t in info.taints if not t.startswith(ko.CONTROLLER_TAINTS)],
            unschedulable=info.unschedulable,
            conditions=info.conditions,
            gpu_capacity=info.gpu_capacity,
            gpu_allocatable=info.gpu_allocatable,
        )
    for pod in fleet.pods.values():
        target.add_pod(
            pod.name,
            pod.namespace,
            node=pod.node,
            phase=pod.phase,
            labels=pod.labels,
            owner=owner_of(pod),
            annotations={MIRROR_ANNOTATION: "mirror"} if pod.mirror else None,
            containers=(pod.container,),
            gpus=pod.gpus,
            restarts=pod.restarts,
            last_terminated_reason=pod.last_terminated_reason,
        )


def seed(fake: FakeKube, fleet: Fleet) -> None:
    """Fill `fake` with the fleet's nodes and pods and make it read the rest live."""
    seed_objects(fake, fleet)
    fake.source = FleetSource(fleet)
    fake.now = fleet.now  # sinceSeconds and event ages follow the fleet's clock
