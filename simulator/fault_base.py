"""What a fault kind is: its target, and how it changes series, logs, events and pods.

A kind is one small class with a few optional hooks (`impacts`, `kernel_log`, `pod_log`,
`events`, `apply_to_pods`, `driver_version`, `workload_effects`); the fleet calls them and owns
all state. `impacts` change exporter series directly; `workload_effects` change how a training
job or an inference service runs (training.py, serving.py), which is how a node fault surfaces
as a job symptom. Kind modules build on this; `faults.py` is the registry.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal

from simulator.entities import EntityKey, Family, gpu_entity, hca_entity
from simulator.pods import SimPod
from simulator.topology import GpuSpec, HcaSpec, NodeSpec
from simulator.tracks import Effect, FaultWindow
from simulator.xids import render_xid_line

Target = Literal["node", "gpu", "hca", "workload"]
Layer = Literal[
    "facility", "fabric", "gpu_hardware", "node_software", "kubernetes", "telemetry", "workload"
]
#: At most this many repeated lines per fault in a log (the newest are kept).
MAX_REPEATED_LINES = 200


@dataclass(frozen=True)
class ActiveFault:
    """One fault placed on the fleet: what it hit, how hard, and when (its window)."""

    kind: str
    window: FaultWindow
    intensity: float = 1.0
    node: NodeSpec | None = None
    gpu: GpuSpec | None = None
    hca: HcaSpec | None = None
    workload: str | None = None
    code: int | None = None
    version: str | None = None
    missing: int | None = None
    pid: int = 0
    """PID of the process using the GPU (XID lines name it)."""
    fleet_size: int = 0
    workload_size: int = 0

    @property
    def node_name(self) -> str | None:
        return self.node.name if self.node else None

    def gpus(self) -> tuple[GpuSpec, ...]:
        """The GPU it targets, or every GPU of its node when it names none."""
        if self.gpu is not None:
            return (self.gpu,)
        return self.node.gpus if self.node else ()


@dataclass(frozen=True)
class Impact:
    """An effect on the tracks of one node: a metric (or a whole exporter family), an entity
    (or all of them)."""

    node: str
    effect: Effect
    metric: str | None = None
    family: Family | None = None
    entity: EntityKey | None = None


@dataclass(frozen=True)
class JobEffect:
    """How a fault changes a training job: the ranks on `node`, or every rank of `workload`.

    Factors multiply, so faults compose: two slow nodes, a slow node and a slow network.
    """

    window: FaultWindow
    node: str | None = None
    """The ranks on this node; None = every rank of `workload`."""
    workload: str | None = None
    """The job; None = whichever training job runs on `node`."""
    compute: float = 1.0
    """x time the rank spends computing a step (throttled clocks, a straggler)."""
    network: float = 1.0
    """x the rank's inter-node bandwidth; 0 = its collectives never complete (a hang)."""
    data_wait: float = 0.0
    """Fraction of every step spent waiting for input (data-loader starvation, all ranks)."""
    hang: Literal["", "collective", "init"] = ""
    """`collective`: collectives stop completing; `init`: the first one never completes."""
    checkpoint_s: float = 0.0
    """Each periodic checkpoint save takes this long and stalls every rank."""
    behind: int = 0
    """NCCL works this rank's last-completed lags the others (a straggler)."""
    transport: Literal["IB", "Socket"] = "IB"
    """What NCCL selected for the rank's inter-node traffic."""
    nccl_warn: Literal["", "ib_completion", "port_event"] = ""
    """NCCL WARN lines the rank and its ring peers log (IB completion errors, port events)."""
    hca: str = ""
    """The HCA the fault is on (`mlx5_3`), for the NCCL lines that name it."""


@dataclass(frozen=True)
class ServiceEffect:
    """How a fault changes an inference service: its replica on `node`, or all of `workload`.

    Factors multiply and additive terms add, so faults compose.
    """

    window: FaultWindow
    node: str | None = None
    workload: str | None = None
    load: float = 1.0
    """x request rate served."""
    compute: float = 1.0
    """x prefill/decode latency (throttled clocks)."""
    kv_usage: float = 0.0
    """KV-cache usage floor (0 = unchanged)."""
    waiting: float = 0.0
    """+ requests queued."""
    queue_s: float = 0.0
    """+ p99 queue time, seconds."""
    preemptions_per_s: float = 0.0


WorkloadEffect = JobEffect | ServiceEffect


@dataclass(frozen=True)
class LogLine:
    """A log line at fleet time `t` (seconds since t0)."""

    t: float
    text: str


@dataclass(frozen=True)
class FaultEvent:
    """A Kubernetes event a fault causes, at fleet time `t`."""

    t: float
    kind: str
    name: str
    reason: str
    message: str
    type: str = "Normal"
    node: str | None = None


class FaultKind:
    """Base of every fault kind. Subclasses set the class attributes and override hooks."""

    name: ClassVar[str]
    layer: ClassVar[Layer]
    target: ClassVar[Target]
    needs: ClassVar[frozenset[str]] = frozenset()
    """Extra scenario fields this kind requires: `code`, `version`, `missing`."""
    accepts_gpu: ClassVar[bool] = False
    """A node-target kind that may be narrowed to one GPU."""
    ends_on_drain: ClassVar[bool] = True
    """Whether draining the node stops it (errors caused by load stop with the load)."""
    silences_node: ClassVar[bool] = False
    """The kubelet is gone: the node's log cannot be read while the fault is active."""
    pins_node: ClassVar[bool] = False
    """A workload fault that strikes one node: without `node`, the workload's first node."""
    workload_kind: ClassVar[Literal["training", "inference"] | None] = None
    """The kind of workload a workload-target fault needs (None: any)."""

    def impacts(self, fault: ActiveFault) -> list[Impact]:
        """How the fault changes exporter series (effects share `fault.window`)."""
        return []

    def kernel_log(self, fault: ActiveFault, until: float) -> list[LogLine]:
        """Kernel lines it has written by fleet time `until` (verbatim driver formats)."""
        return []

    def pod_log(self, fault: ActiveFault, pod: SimPod, *, until: float) -> list[LogLine]:
        """Lines it adds to the log of `pod` (a pod on its node or of its workload)."""
        return []

    def events(self, fault: ActiveFault) -> list[FaultEvent]:
        """Kubernetes events it causes (recorded once, when placed)."""
        return []

    def apply_to_pods(self, fault: ActiveFault, pods: list[SimPod]) -> None:
        """Change the pods the fault hits (its workload's, or those on its node) when it is
        placed on the fleet."""

    def driver_version(self, fault: ActiveFault) -> str | None:
        """The driver version the node reports instead of the fleet's, if this kind sets one."""
        return None

    def workload_effects(self, fault: ActiveFault) -> list[WorkloadEffect]:
        """How it changes the training jobs / inference services it touches (they share
        `fault.window`). A node fault names its node; the fleet finds the job running there."""
        return []


# --- helpers shared by the kind modules -------------------------------------------------------


def gpu_impacts(
    fault: ActiveFault, effects: Mapping[str, Effect], *, gpu: GpuSpec | None = None
) -> list[Impact]:
    """One impact per `metric: effect` on the fault's GPU (or on `gpu`)."""
    target = gpu or fault.gpu
    assert fault.node is not None and target is not None, "gpu fault without node/gpu"
    entity = gpu_entity(target.index)
    return [Impact(fault.node.name, e, metric=m, entity=entity) for m, e in effects.items()]


def hca_impacts(fault: ActiveFault, effects: Mapping[str, Effect]) -> list[Impact]:
    """One impact per `metric: effect` on the fault's HCA port."""
    assert fault.node is not None and fault.hca is not None, "hca fault without node/hca"
    entity = hca_entity(fault.hca.index)
    return [Impact(fault.node.name, e, metric=m, entity=entity) for m, e in effects.items()]


def node_impact(fault: ActiveFault, metric: str, *, effect: Effect, entity: EntityKey) -> Impact:
    """An impact on one node-level series (a condition, a resource)."""
    assert fault.node is not None, "node fault without node"
    return Impact(fault.node.name, effect, metric=metric, entity=entity)


def per_second(per_minute: float, fault: ActiveFault) -> float:
    return per_minute * fault.intensity / 60.0


def occurrences(
    window: FaultWindow, *, every_s: float, until: float, first_s: float = 0.0
) -> Iterator[float]:
    """Times of a repeated event while the window is open: `start + first_s`, then every
    `every_s`; only the newest `MAX_REPEATED_LINES`."""
    begin = window.start + first_s
    stop = window.clip(until)
    if stop < begin or every_s <= 0:
        return iter(())
    count = int(math.floor((stop - begin) / every_s)) + 1
    first = max(0, count - MAX_REPEATED_LINES)
    return (begin + k * every_s for k in range(first, count))


def gpu_preamble(gpu: GpuSpec, t: float) -> list[LogLine]:
    """`NVRM: GPU at PCI:...: GPU-uuid` and the board serial, printed before a GPU's first XID."""
    return [
        LogLine(t - 0.000_2, f"NVRM: GPU at PCI:{gpu.kernel_pci}: {gpu.uuid}"),
        LogLine(t - 0.000_1, f"NVRM: GPU Board Serial Number: {gpu.serial}"),
    ]


def xid_lines(
    fault: ActiveFault, code: int, *, times: Iterable[float], gpu: GpuSpec | None = None
) -> list[LogLine]:
    """Verbatim `NVRM: Xid (PCI:...): <code>, ...` lines at the given times (with preamble)."""
    target = gpu or fault.gpu
    assert target is not None, "xid lines need a GPU"
    lines: list[LogLine] = []
    for t in times:
        if not lines:
            lines.extend(gpu_preamble(target, t))
        text = render_xid_line(pci=target.kernel_pci, code=code, pid=fault.pid)
        lines.append(LogLine(t, text))
    return lines
