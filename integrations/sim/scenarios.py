"""Scenario files (DESIGN.md §10): a fleet, the faults placed on it, a trigger and ground truth.

Pydantic at the edge, `extra="forbid"` so a typo fails. Every error, YAML or schema or a
reference the fleet cannot satisfy, raises ScenarioError naming the file and the field path:
`scenarios/x.yaml: field 'faults.0.kind': unknown fault kind 'ecc_storm' (kinds: ...)`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    field_validator,
)
from pydantic import model_validator as _model_validator

from integrations.errors import InvalidName, ScenarioError
from integrations.names import expand_nodes
from integrations.sim.faults import FAULT_KINDS
from integrations.sim.topology import NODE_PREFIX, node_name_width, node_names

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_OFFSET = re.compile(r"^(?P<sign>[+-])?(?P<body>(\d+(\.\d+)?(ms|s|m|h|d))+)$")
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")

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


def parse_offset(value: object) -> timedelta:
    """`-10m`, `30s`, `1h30m`, `+2m` (or a number of seconds) -> timedelta; negative = past."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(seconds=float(value))
    text = str(value).strip().replace(" ", "")
    match = _OFFSET.match(text)
    if match is None:
        raise ValueError(f"invalid duration '{value}': use e.g. -10m, 30s, 1h, 1h30m")
    seconds = sum(float(n) * _UNITS[unit] for n, unit in _PART.findall(match["body"]))
    return timedelta(seconds=-seconds if match["sign"] == "-" else seconds)


def render_offset(value: timedelta) -> str:
    """The inverse of `parse_offset`: `-10m`, `30s`, `1h`, `1500ms`."""
    millis = round(value.total_seconds() * 1000)
    sign, millis = ("-" if millis < 0 else ""), abs(millis)
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if millis % size == 0 and millis:
            return f"{sign}{millis // size}{unit}"
    return f"{sign}{millis}ms" if millis else "0s"


Offset = Annotated[
    timedelta, BeforeValidator(parse_offset), PlainSerializer(render_offset, return_type=str)
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Metadata(_Model):
    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    description: str | None = None


class WorkloadSpec(_Model):
    kind: Literal["training", "inference"]
    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    nodes: str | list[str]
    namespace: str = "ml"

    @field_validator("nodes")
    @classmethod
    def _expand(cls, value: str | list[str]) -> str | list[str]:
        try:
            expand_nodes(value)
        except InvalidName as exc:
            raise ValueError(str(exc)) from exc
        return value

    @property
    def node_names(self) -> list[str]:
        return expand_nodes(self.nodes)


class FleetSpec(_Model):
    nodes: int = Field(ge=1, le=100_000)
    gpus_per_node: int = Field(default=8, ge=1, le=16)
    hcas_per_node: int = Field(default=8, ge=0, le=16)
    nodes_per_rack: int = Field(default=8, ge=1)
    driver_version: str = "550.54.15"
    gpu_model: str = "NVIDIA H100 80GB HBM3"
    dcgm_counters: Literal["default", "all"] = "default"
    """`default`: dcgm-exporter's shipped CSV (ECC, NVLink-error counters absent); `all`."""
    dcgm_host_label: Literal["Hostname", "hostname"] = "Hostname"
    """`Hostname` in released dcgm-exporters, `hostname` on master (DOMAIN.md §1.2)."""
    workloads: list[WorkloadSpec] = Field(default_factory=list)

    @property
    def node_names(self) -> list[str]:
        return node_names(self.nodes)


class FaultSpec(_Model):
    kind: str
    node: str | None = None
    gpu: int | None = Field(default=None, ge=0)
    hca: int | None = Field(default=None, ge=0)
    workload: str | None = None
    start: Offset = timedelta(minutes=-10)
    code: int | None = Field(default=None, ge=1)
    version: str | None = None
    missing: int | None = Field(default=None, ge=1)
    intensity: float = Field(default=1.0, gt=0.0, le=1.0)

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in FAULT_KINDS:
            kinds = ", ".join(sorted(FAULT_KINDS))
            raise ValueError(f"unknown fault kind '{value}' (kinds: {kinds})")
        return value


class AlertTrigger(_Model):
    alertname: str
    labels: dict[str, str] = Field(default_factory=dict)


class Trigger(_Model):
    alert: AlertTrigger | None = None
    command: str | None = None

    @_model_validator(mode="after")
    def _exactly_one(self) -> Trigger:
        if (self.alert is None) == (self.command is None):
            raise ValueError("give exactly one of 'alert' or 'command'")
        return self


class Expect(_Model):
    runbook: str
    layer: Layer
    culprits: list[str] = Field(default_factory=list)
    actions: list[str] = Field(default_factory=list)
    not_actions: list[str] = Field(default_factory=list)


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


def load_scenario(path: Path | str) -> Scenario:
    """Read and validate a scenario file. Every error names the file and the field."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read scenario: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: invalid YAML: {exc}") from exc
    return parse_scenario(raw, source=str(path))


def parse_scenario(raw: Any, *, source: str = "<scenario>") -> Scenario:
    """Validate already-parsed YAML (a dict). Errors name `source` and the field path."""
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ScenarioError(f"{source}: field '{where}': {_message(first, raw)}") from exc
    for where, problem in _reference_problems(scenario):
        raise ScenarioError(f"{source}: field '{where}': {problem}")
    return scenario


def _message(error: Any, raw: Any) -> str:
    if error["type"] == "extra_forbidden":
        fields = _fields_at(Scenario, tuple(error["loc"][:-1]))
        hint = f" (fields: {', '.join(fields)})" if fields else ""
        return f"unknown field{hint}"
    return str(error["msg"]).removeprefix("Value error, ")


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names of the model found at `loc` (list indices skipped)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(part) if _is_model(current) else None
        if field is None:
            return []
        current = _inner_model(field.annotation)
    return list(current.model_fields) if _is_model(current) else []


def _is_model(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, BaseModel)


def _inner_model(annotation: Any) -> Any:
    if _is_model(annotation):
        return annotation
    for arg in get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


# --- references the fleet must satisfy ------------------------------------------------------


def _reference_problems(s: Scenario) -> Iterator[tuple[str, str]]:
    known = set(s.fleet.node_names)
    yield from _workload_problems(s, known)
    workloads = {w.name for w in s.fleet.workloads}
    for i, fault in enumerate(s.faults):
        yield from _fault_problems(s, fault, where=f"faults.{i}", known=known, workloads=workloads)
    yield from _trigger_problems(s, known)
    if s.expect is not None:
        for i, culprit in enumerate(s.expect.culprits):
            if culprit.startswith(NODE_PREFIX) and culprit not in known:
                yield f"expect.culprits.{i}", _unknown_node(culprit, s)


def _workload_problems(s: Scenario, known: set[str]) -> Iterator[tuple[str, str]]:
    seen: set[str] = set()
    for i, workload in enumerate(s.fleet.workloads):
        if workload.name in seen:
            yield f"fleet.workloads.{i}.name", f"duplicate workload name '{workload.name}'"
        seen.add(workload.name)
        for node in workload.node_names:
            if node not in known:
                yield f"fleet.workloads.{i}.nodes", _unknown_node(node, s)


def _fault_problems(
    s: Scenario, fault: FaultSpec, *, where: str, known: set[str], workloads: set[str]
) -> Iterator[tuple[str, str]]:
    kind = FAULT_KINDS[fault.kind]
    required = {
        "gpu": ("node", "gpu"),
        "hca": ("node", "hca"),
        "node": ("node",),
        "workload": ("workload",),
    }[kind.target]
    for name in (*required, *sorted(kind.needs)):
        if getattr(fault, name) is None:
            yield f"{where}.{name}", f"{fault.kind} needs '{name}'"
    if fault.gpu is not None and kind.target != "gpu" and not kind.accepts_gpu:
        yield f"{where}.gpu", f"{fault.kind} targets a {kind.target}, not a GPU"
    if fault.hca is not None and kind.target != "hca":
        yield f"{where}.hca", f"{fault.kind} targets a {kind.target}, not an HCA"
    if fault.node is not None and fault.node not in known:
        yield f"{where}.node", _unknown_node(fault.node, s)
    if fault.gpu is not None and fault.gpu >= s.fleet.gpus_per_node:
        yield f"{where}.gpu", _out_of_range("GPU", fault.gpu, count=s.fleet.gpus_per_node)
    if fault.hca is not None and fault.hca >= s.fleet.hcas_per_node:
        yield f"{where}.hca", _out_of_range("HCA", fault.hca, count=s.fleet.hcas_per_node)
    if fault.workload is not None and fault.workload not in workloads:
        names = ", ".join(sorted(workloads)) or "none defined"
        yield f"{where}.workload", f"unknown workload '{fault.workload}' (workloads: {names})"


def _trigger_problems(s: Scenario, known: set[str]) -> Iterator[tuple[str, str]]:
    if s.trigger.command is not None:
        for word in s.trigger.command.split():
            if word.startswith(NODE_PREFIX) and word not in known:
                yield "trigger.command", _unknown_node(word, s)
    if s.trigger.alert is not None:
        for label, value in s.trigger.alert.labels.items():
            if value.startswith(NODE_PREFIX) and value not in known:
                yield f"trigger.alert.labels.{label}", _unknown_node(value, s)


def _unknown_node(node: str, s: Scenario) -> str:
    names = s.fleet.node_names
    width = node_name_width(s.fleet.nodes)
    return (
        f"unknown node '{node}' (fleet has {names[0]} .. {names[-1]}; indexes are "
        f"zero-padded to {width} digits)"
    )


def _out_of_range(what: str, index: int, *, count: int) -> str:
    return f"{what} index {index} out of range (the fleet has {count} per node: 0-{count - 1})"
