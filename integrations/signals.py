"""The signal catalog: named signals -> exporter metric + evaluation, loaded from YAML.

A signal names one exporter metric (dcgm-exporter, node_exporter, kube-state-metrics, vLLM,
job metrics), a range function that mirrors PromQL (`rate`, `increase`, `changes`, `last`, ...)
and the labels that identify a sample (`per`). The Prometheus adapter renders it to PromQL; the
simulated fleet evaluates it natively over its own series, so both read the same semantics.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from integrations.errors import IntegrationError, UnknownSignal

Source = Literal["dcgm", "node_exporter", "kube_state_metrics", "vllm", "job"]
RangeFn = Literal[
    "last", "rate", "increase", "changes", "max_over_time", "min_over_time", "avg_over_time"
]
Per = Literal["gpu", "hca", "node", "pod", "workload"]

#: Labels that identify one sample within a node, by `per`.
IDENTITY_LABELS: dict[str, tuple[str, ...]] = {
    "gpu": ("gpu", "UUID"),
    "hca": ("device", "port"),
    "node": (),
    "pod": ("namespace", "pod"),
    "workload": (),
}

#: Default host label per exporter family (settings may override; DOMAIN.md §1.2, §3, §7).
DEFAULT_HOST_LABELS: dict[str, str] = {
    "dcgm": "Hostname",
    "node_exporter": "instance",
    "kube_state_metrics": "node",
    "vllm": "node",
    "job": "node",
}


class SignalSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""
    layer: str
    help: str
    unit: str = ""
    source: Source
    metric: str = Field(pattern=r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
    fn: RangeFn = "last"
    scale: float = 1.0
    match: dict[str, str] = Field(default_factory=dict)
    per: Per = "node"
    default_off: bool = False
    """dcgm-exporter ships this counter disabled: an absent series means *not configured*."""
    keep_labels: tuple[str, ...] = ()
    """Extra labels to carry into samples (e.g. `err_code` on the XID gauge)."""

    @property
    def identity_labels(self) -> tuple[str, ...]:
        return IDENTITY_LABELS[self.per] + self.keep_labels


class SignalCatalogFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    apiVersion: Literal["gpu-oncall/v1"]
    kind: Literal["SignalCatalog"]
    signals: dict[str, SignalSpec]


class SignalCatalogError(IntegrationError):
    """The signal catalog file is malformed."""


class SignalCatalog:
    """Lookup of SignalSpec by name."""

    def __init__(self, specs: dict[str, SignalSpec]) -> None:
        self._specs = specs

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __len__(self) -> int:
        return len(self._specs)

    def names(self) -> list[str]:
        return sorted(self._specs)

    def get(self, name: str) -> SignalSpec:
        try:
            return self._specs[name]
        except KeyError:
            raise UnknownSignal(f"unknown signal '{name}'") from None


def load_signal_catalog(path: Path) -> SignalCatalog:
    """Read and validate a signal catalog YAML file. Errors name the file and the field."""
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise SignalCatalogError(f"{path}: cannot read signal catalog: {exc}") from exc
    try:
        parsed = SignalCatalogFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise SignalCatalogError(f"{path}: field '{where}': {first['msg']}") from exc
    specs = {name: spec.model_copy(update={"name": name}) for name, spec in parsed.signals.items()}
    return SignalCatalog(specs)
