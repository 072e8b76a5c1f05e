"""The scenario file's schema (DESIGN.md §10): a fleet, the faults placed on it, a trigger and
ground truth, as frozen pydantic models with `extra="forbid"` so a typo fails.

Reading a file, and the checks that every reference resolves in its fleet, are in scenarios.py
and scenario_checks.py; both stand above these models.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    field_validator,
)
from pydantic import model_validator as _model_validator

from integrations.durations import parse_offset, render_duration
from integrations.errors import InvalidName
from integrations.names import expand_nodes
from simulator.faults import FAULT_KINDS
from simulator.topology import node_names

Layer = Literal[
    "facility",
    "fabric",
    "gpu_hardware",
    "node_software",
    "kubernetes",
    "telemetry",
    "workload",
    "none",
]


Offset = Annotated[
    timedelta, BeforeValidator(parse_offset), PlainSerializer(render_duration, return_type=str)
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Metadata(_Model):
    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    description: str | None = None


def _check_nodes(value: str | list[str]) -> str | list[str]:
    try:
        expand_nodes(value)
    except InvalidName as exc:
        raise ValueError(str(exc)) from exc
    return value


#: Node names: `gpu-node-[08-15]`, `gpu-node-01,gpu-node-03` or a list of such items.
Nodes = Annotated[str | list[str], AfterValidator(_check_nodes)]


class WorkloadSpec(_Model):
    kind: Literal["training", "inference"]
    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    nodes: Nodes
    namespace: str = "ml"

    @property
    def node_names(self) -> list[str]:
        return expand_nodes(self.nodes)


class FleetSpec(_Model):
    nodes: int = Field(ge=1, le=100_000)
    gpus_per_node: int = Field(default=8, ge=1, le=16)
    hcas_per_node: int = Field(default=8, ge=0, le=16)
    nodes_per_rack: int = Field(default=8, ge=1)
    nodes_per_leaf: int | None = Field(default=None, ge=1)
    """Nodes behind one leaf (top-of-rack) switch; default: one leaf per rack."""
    driver_version: str = "550.54.15"
    gpu_model: str = "NVIDIA H100 80GB HBM3"
    dcgm_counters: Literal["default", "all"] = "default"
    """`default`: dcgm-exporter's shipped CSV (ECC, NVLink-error counters absent); `all`."""
    dcgm_host_label: Literal["Hostname", "hostname"] = "Hostname"
    """`Hostname` in released dcgm-exporters, `hostname` on master (DOMAIN.md §1.2)."""
    workloads: list[WorkloadSpec] = Field(default_factory=list)
    device_plugin_pods: bool = False
    """Run the NVIDIA device plugin's DaemonSet pod on every node (as the GPU Operator does),
    so a runbook can propose restarting it. Off by default: the Kubernetes contract suite
    counts each node's pods."""
    device_plugin_healthchecks: bool = True
    """False is `DP_DISABLE_HEALTHCHECKS=all` (DOMAIN.md §7): the plugin never marks a GPU
    unhealthy, so allocatable stays at capacity whatever the GPU does."""
    node_problem_detector: bool = False
    """node-problem-detector runs with the GPU rule of DOMAIN.md §7: every `NVRM: Xid` kernel
    line becomes a Warning event on the Node (reason `XidError`, the line as its message)."""
    kernel_log_readable: bool = True
    """False: the bot's role may not `get nodes/proxy`, so it cannot read kernel logs."""

    @property
    def node_names(self) -> list[str]:
        return node_names(self.nodes)

    @property
    def leaf_size(self) -> int:
        return self.nodes_per_leaf or self.nodes_per_rack

    def racks(self) -> dict[str, list[str]]:
        """Rack name -> its nodes (`rack-00` holds the first `nodes_per_rack` nodes)."""
        return _groups(self.node_names, size=self.nodes_per_rack, prefix="rack")

    def leaves(self) -> dict[str, list[str]]:
        """Leaf switch name -> the nodes cabled to it."""
        return _groups(self.node_names, size=self.leaf_size, prefix="leaf")


def _groups(names: list[str], *, size: int, prefix: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for i, name in enumerate(names):
        out.setdefault(f"{prefix}-{i // size:02d}", []).append(name)
    return out


class FlapSpec(_Model):
    """A fault that comes and goes: on for `on` out of every `period`, from `start` on."""

    period: Offset
    on: Offset

    @_model_validator(mode="after")
    def _on_within_period(self) -> FlapSpec:
        if not timedelta(0) < self.on < self.period:
            raise ValueError("flap needs 0 < on < period (e.g. {period: 10m, on: 2m})")
        return self


class FaultSpec(_Model):
    kind: str
    node: str | None = None
    nodes: Nodes | None = None
    """Several nodes at once: `gpu-node-[08-15]` or a list."""
    rack: str | None = None
    """Every node of a rack (`rack-01`): a PDU, a row's cooling."""
    leaf: str | None = None
    """Every node behind a leaf switch (`leaf-02`); an HCA fault without `hca` hits every port."""
    gpu: int | None = Field(default=None, ge=0)
    hca: int | None = Field(default=None, ge=0)
    workload: str | None = None
    start: Offset = timedelta(minutes=-10)
    code: int | None = Field(default=None, ge=1)
    version: str | None = None
    missing: int | None = Field(default=None, ge=1)
    intensity: float = Field(default=1.0, gt=0.0, le=1.0)
    duration: Offset | None = None
    """A fault that ends by itself (`10m`): transient. None = acting until drained/repaired."""
    flap: FlapSpec | None = None
    """A fault that comes and goes (`{period: 10m, on: 2m}`), until `duration` if given."""

    @field_validator("duration")
    @classmethod
    def _positive(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value <= timedelta(0):
            raise ValueError("duration must be positive (e.g. 10m)")
        return value

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in FAULT_KINDS:
            kinds = ", ".join(sorted(FAULT_KINDS))
            raise ValueError(f"unknown fault kind '{value}' (kinds: {kinds})")
        return value

    @property
    def group(self) -> str | None:
        """Which group target is set (`nodes`, `rack`, `leaf`), if any."""
        for name in ("nodes", "rack", "leaf"):
            if getattr(self, name) is not None:
                return name
        return None

    def target_nodes(self, fleet: FleetSpec) -> list[str]:
        """The nodes this fault hits: `node`, or the nodes of `nodes` / `rack` / `leaf`."""
        if self.nodes is not None:
            return expand_nodes(self.nodes)
        if self.rack is not None:
            return fleet.racks().get(self.rack, [])
        if self.leaf is not None:
            return fleet.leaves().get(self.leaf, [])
        return [self.node] if self.node is not None else []


class AlertTrigger(_Model):
    alertname: str
    labels: dict[str, str] = Field(default_factory=dict)


class StormTrigger(_Model):
    """One alert of `alertname` per node, all in one webhook: how Alertmanager, grouping by
    alert name, delivers an alert storm."""

    alertname: str
    nodes: Nodes
    """The alerting nodes: `gpu-node-[024-031]` or a list."""
    target_label: str = "Hostname"
    """The label carrying each alert's node."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Labels every alert of the storm carries besides the node."""

    def alert_labels(self) -> list[dict[str, str]]:
        """Each alert's labels, one per node."""
        return [{**self.labels, self.target_label: node} for node in expand_nodes(self.nodes)]


class Trigger(_Model):
    alert: AlertTrigger | None = None
    storm: StormTrigger | None = None
    command: str | None = None

    @_model_validator(mode="after")
    def _exactly_one(self) -> Trigger:
        given = [self.alert, self.storm, self.command]
        if sum(item is not None for item in given) != 1:
            raise ValueError("give exactly one of 'alert', 'storm' or 'command'")
        return self


#: `gpu-node-09:3`: GPU 3 of gpu-node-09 (the index, as dcgm-exporter's `gpu` label).
GpuRef = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?:\d+$")]
#: `gpu-node-02:mlx5_3`: an HCA of a node, by device name (any port).
HcaRef = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?:mlx5_\d+$")]


class Expect(_Model):
    runbook: str
    layer: Layer
    culprits: list[str] = Field(default_factory=list)
    gpus: list[GpuRef] = Field(default_factory=list)
    """The culprit GPUs, when the fault is one GPU's: eval then scores the culprit at GPU
    granularity (the verdict must name these GPUs, not just their nodes)."""
    hcas: list[HcaRef] = Field(default_factory=list)
    """The culprit HCAs (`node:mlx5_N`), scored like `gpus`."""
    actions: list[str] = Field(default_factory=list)
    not_actions: list[str] = Field(default_factory=list)
    finding: str | None = None
    """The deciding finding's mechanism (bot.diagnosis.mechanisms), e.g. `kv_exhausted`:
    eval then scores the mechanism beside the layer (a KV exhaustion reported as a traffic
    spike has the right layer and the wrong mechanism)."""


class Scenario(_Model):
    apiVersion: Literal["gpu-oncall/v1"]
    kind: Literal["Scenario"]
    metadata: Metadata
    fleet: FleetSpec
    faults: list[FaultSpec] = Field(default_factory=list)
    trigger: Trigger
    expect: Expect | None = None

    @property
    def name(self) -> str:
        return self.metadata.name
