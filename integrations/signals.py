"""The signal catalog: named signals -> exporter metric + evaluation, loaded from YAML.

A signal names one exporter metric (dcgm-exporter, node_exporter, kube-state-metrics, vLLM,
training-job metrics, Prometheus' own `up`), a range function that mirrors PromQL (`rate`,
`increase`, `changes`, `last`, `*_over_time`, `quantile` for histograms), the labels that
identify a sample (`per`), how series sharing an identity combine (`agg`), label joins onto
info series (`joins`) and whether a query selects series by node or by workload (`selector`).
The Prometheus adapter renders it to PromQL; the simulated fleet evaluates it natively over its
own series, so both read the same semantics. docs/signals.md is the reference.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from integrations import durations
from integrations.errors import IntegrationError, UnknownSignal

Source = Literal["dcgm", "node_exporter", "kube_state_metrics", "vllm", "job", "scrape"]
RangeFn = Literal[
    "last",
    "rate",
    "increase",
    "changes",
    "max_over_time",
    "min_over_time",
    "avg_over_time",
    "quantile",
]
Per = Literal["gpu", "hca", "node", "pod", "rank", "workload"]
Agg = Literal["max", "min", "avg", "sum", "count"]
Selector = Literal["node", "workload"]

#: Labels that identify one sample within a node, by `per`.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader (about ten times faster), the pure-Python one where it is missing."""

IDENTITY_LABELS: dict[str, tuple[str, ...]] = {
    "gpu": ("gpu", "UUID"),
    "hca": ("device", "port"),
    "node": (),
    "pod": ("namespace", "pod"),
    "rank": ("rank",),
    "workload": (),
}

#: Default host label per exporter family (settings may override; DOMAIN.md §1.2, §3, §7).
#: `scrape` is Prometheus' own `up` series, whose node label comes from relabeling
#: (`__meta_kubernetes_pod_node_name` -> `node`, the kube-prometheus convention).
DEFAULT_HOST_LABELS: dict[str, str] = {
    "dcgm": "Hostname",
    "node_exporter": "instance",
    "kube_state_metrics": "node",
    "vllm": "node",
    "job": "node",
    "scrape": "node",
}

#: Default workload label per source (settings may override): the training job's name on job
#: metrics, the inference service's name on vLLM series, and the pod's
#: `app.kubernetes.io/name` label as kube-state-metrics exports it through `kube_pod_labels`.
DEFAULT_WORKLOAD_LABELS: dict[str, str] = {
    "job": "job",
    "vllm": "service",
    "kube_state_metrics": "label_app_kubernetes_io_name",
}

#: Sources whose series carry a workload label natively: their signals select by workload.
WORKLOAD_SOURCES = frozenset({"job", "vllm"})


class LabelJoin(BaseModel):
    """Copy `labels` from an info series (value 1) whose `keys` labels match: PromQL's
    `* on(<keys>) group_left(<labels>) <metric>`. Series without a partner are dropped.
    (Not `on:` in YAML: YAML 1.1 reads a bare `on` as a boolean.)"""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str = Field(pattern=r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
    keys: tuple[str, ...] = Field(min_length=1)
    labels: tuple[str, ...] = Field(min_length=1)


class SignalSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""
    layer: str
    help: str
    unit: str = ""
    source: Source
    metric: str = Field(pattern=r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
    """The exported metric; for `fn: quantile` the histogram's base name (without `_bucket`)."""
    fn: RangeFn = "last"
    quantile: float | None = Field(default=None, gt=0.0, lt=1.0)
    """For `fn: quantile`: which quantile of the histogram over the window (e.g. 0.99)."""
    scale: float = 1.0
    match: dict[str, str] = Field(default_factory=dict)
    per: Per = "node"
    agg: Agg = "max"
    """How series that share a sample identity (node + identity labels) combine."""
    selector: Selector | None = None
    """`workload`: a query's `workload` selects series by the source's workload label (default
    for `job`/`vllm` sources); `node`: series are selected by node, a workload standing for
    the nodes it runs on. None = the source's default."""
    joins: tuple[LabelJoin, ...] = ()
    default_off: bool = False
    """dcgm-exporter ships this counter disabled: an absent series means *not configured*."""
    keep_labels: tuple[str, ...] = ()
    """Extra labels to carry into samples (e.g. `err_code` on the XID gauge)."""
    changed_by: str | None = None
    """For a gauge that holds its last value after the fault is gone (dcgm-exporter's XID
    gauge): the `fn: changes` signal over the same metric. A non-zero sample counts only when
    its series changed within `changed_within`; otherwise it is a held value (stale)."""
    changed_within: str = Field(default="24h", pattern=durations.PATTERN)
    """How recent the last change of a `changed_by` gauge must be for its value to count."""

    @model_validator(mode="after")
    def _quantile_needs_a_value(self) -> SignalSpec:
        if (self.fn == "quantile") != (self.quantile is not None):
            raise ValueError("'quantile' is required with fn: quantile, and only then")
        return self

    @property
    def identity_labels(self) -> tuple[str, ...]:
        return IDENTITY_LABELS[self.per] + self.keep_labels

    @property
    def selects_by_workload(self) -> bool:
        """Whether a query's `workload` matches the series' workload label (else its nodes)."""
        if self.selector is not None:
            return self.selector == "workload"
        return self.source in WORKLOAD_SOURCES

    @property
    def series_metric(self) -> str:
        """The metric whose series are read: `<metric>_bucket` for a histogram quantile."""
        return f"{self.metric}_bucket" if self.fn == "quantile" else self.metric


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
        raw = yaml.load(path.read_text(), Loader=_LOADER)  # noqa: S506 (a safe loader)
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
