"""Node-level fault kinds: NotReady, exporter down, device plugin unhealthy, driver skew.

These are the Kubernetes, telemetry and node-software layers: what the API server, the
kube-state-metrics series and the exporters show when the node (not one GPU) is the problem.
A NotReady node or a node on another driver also hangs the training job that spans it.
"""

from __future__ import annotations

from simulator.fault_base import (
    ActiveFault,
    FaultEvent,
    FaultKind,
    Impact,
    JobEffect,
    LogLine,
    WorkloadEffect,
    gpu_impacts,
    node_impact,
    xid_lines,
)
from simulator.gpu_faults import unhealthy_gpu, xid_gauge
from simulator.pods import EXPORTER_DAEMONSET, SimPod
from simulator.tracks import Freeze, Gone, Hold

READY_TRUE = ("condition", "Ready", "true")
READY_FALSE = ("condition", "Ready", "false")


class NodeNotReady(FaultKind):
    """The kubelet stopped posting status: Ready=False, and its exporters stop answering."""

    name = "node_not_ready"
    layer = "kubernetes"
    target = "node"
    ends_on_drain = False
    silences_node = True

    def impacts(self, fault: ActiveFault) -> list[Impact]:
        assert fault.node is not None
        node, w = fault.node.name, fault.window
        condition = "kube_node_status_condition"
        return [
            node_impact(fault, condition, effect=Hold(w, 0.0), entity=READY_TRUE),
            node_impact(fault, condition, effect=Hold(w, 1.0), entity=READY_FALSE),
            Impact(node, Gone(w), family="dcgm"),
            Impact(node, Gone(w), family="node_exporter"),
            Impact(node, Gone(w), family="job"),
            Impact(node, Gone(w), family="vllm"),
        ]

    def workload_effects(self, fault: ActiveFault) -> list[WorkloadEffect]:
        return [JobEffect(fault.window, node=fault.node_name, hang="collective")]

    def events(self, fault: ActiveFault) -> list[FaultEvent]:
        assert fault.node is not None
        node = fault.node.name
        return [
            FaultEvent(
                t=fault.window.start,
                kind="Node",
                name=node,
                reason="NodeNotReady",
                message=f"Node {node} status is now: NodeNotReady",
                node=node,
            )
        ]


class ExporterDown(FaultKind):
    """dcgm-exporter is crash-looping: the node is Ready but reports no GPU series."""

    name = "exporter_down"
    layer = "telemetry"
    target = "node"
    ends_on_drain = False
    fatal = (
        'level=fatal msg="Failed to watch metrics: Error watching fields: The third-party '
        'Profiling module returned an unrecoverable error"'
    )

    def impacts(self, fault: ActiveFault) -> list[Impact]:
        assert fault.node is not None
        return [Impact(fault.node.name, Gone(fault.window), family="dcgm")]

    def apply_to_pods(self, fault: ActiveFault, pods: list[SimPod]) -> None:
        for pod in pods:
            if pod.workload == EXPORTER_DAEMONSET:
                pod.terminate(fault.window.start, reason="Error", restarts=6)

    def pod_log(self, fault: ActiveFault, pod: SimPod, *, until: float) -> list[LogLine]:
        if pod.workload != EXPORTER_DAEMONSET or until < fault.window.start:
            return []
        return [LogLine(fault.window.start, self.fatal)]

    def events(self, fault: ActiveFault) -> list[FaultEvent]:
        assert fault.node is not None
        return [
            FaultEvent(
                t=fault.window.start + 30.0,
                kind="Pod",
                name="nvidia-dcgm-exporter",
                reason="BackOff",
                type="Warning",
                node=fault.node.name,
                message="Back-off restarting failed container nvidia-dcgm-exporter",
            )
        ]


class ExporterStale(FaultKind):
    """A lying detector: dcgm-exporter keeps answering (`up` 1) but its values stopped
    updating when the fault began (hung DCGM host engine, a stuck field cache). Whatever
    happens to the GPUs afterwards, the series show the moment it froze."""

    name = "exporter_stale"
    layer = "telemetry"
    target = "node"
    ends_on_drain = False

    def impacts(self, fault: ActiveFault) -> list[Impact]:
        assert fault.node is not None
        return [Impact(fault.node.name, Freeze(fault.window), family="dcgm")]


class GaugeFrozen(FaultKind):
    """A lying detector on one GPU: every dcgm series of that GPU holds the value it had when
    the fault began (DCGM stopped refreshing its fields) while the other GPUs move on."""

    name = "gauge_frozen"
    layer = "telemetry"
    target = "gpu"
    ends_on_drain = False

    def impacts(self, fault: ActiveFault) -> list[Impact]:
        assert fault.node is not None and fault.gpu is not None
        entity = ("gpu", str(fault.gpu.index))
        return [Impact(fault.node.name, Freeze(fault.window), family="dcgm", entity=entity)]


class DevicePluginUnhealthy(FaultKind):
    """The device plugin marked a GPU unhealthy after XID 69: allocatable < capacity."""

    name = "device_plugin_unhealthy"
    layer = "kubernetes"
    target = "gpu"
    ends_on_drain = False

    def impacts(self, fault: ActiveFault) -> list[Impact]:
        return [*gpu_impacts(fault, xid_gauge(fault, 69)), unhealthy_gpu(fault)]

    def kernel_log(self, fault: ActiveFault, until: float) -> list[LogLine]:
        if until < fault.window.start:
            return []
        return xid_lines(fault, 69, times=[fault.window.start])


class DriverVersionSkew(FaultKind):
    """The node runs another driver than the rest of the fleet (`DCGM_FI_DRIVER_VERSION`)."""

    name = "driver_version_skew"
    layer = "node_software"
    target = "node"
    needs = frozenset({"version"})
    ends_on_drain = False

    def driver_version(self, fault: ActiveFault) -> str | None:
        return fault.version

    def workload_effects(self, fault: ActiveFault) -> list[WorkloadEffect]:
        # NCCL/CUDA mismatches between ranks typically stall the communicator with no clear
        # error line: the only evidence is the DCGM_FI_DRIVER_VERSION label.
        return [JobEffect(fault.window, node=fault.node_name, hang="collective")]


NODE_FAULTS: tuple[FaultKind, ...] = (
    NodeNotReady(),
    ExporterDown(),
    ExporterStale(),
    GaugeFrozen(),
    DevicePluginUnhealthy(),
    DriverVersionSkew(),
)
