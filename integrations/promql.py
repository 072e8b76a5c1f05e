"""PromQL rendering for named signals (pure): label escaping, node-set regexes, and one query
per signal for a whole set of nodes.

Every value interpolated into a query passes through here: label values become PromQL string
literals (backslash, double quote and newline escaped) and regex alternatives have every RE2
metacharacter quoted first, so no node name, workload or matcher value can change a query's
shape. Label names are checked against Prometheus's grammar. No I/O: `integrations.prometheus`
sends what this renders.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from integrations import durations
from integrations.errors import InvalidName
from integrations.signals import SignalSpec

LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
#: Go's regexp.QuoteMeta set: these are backslash-escaped inside a regex alternative.
_RE2_META = frozenset("\\.+*?()|[]{}^$")
#: Resolution of the subqueries `changes` and `avg_over_time` run over: dcgm-exporter's 30 s
#: collect interval (the simulated fleet samples its range functions on the same grid).
GRID_STEP = timedelta(seconds=30)
_OPS = frozenset({"=", "!=", "=~", "!~"})


def escape_label_value(value: str) -> str:
    """Escape a label value for a PromQL string literal or the text exposition format."""
    if "\\" not in value and '"' not in value and "\n" not in value:
        return value  # the common case, on the exporter's hot path
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def quote(value: str) -> str:
    """`value` as a double-quoted PromQL string literal."""
    return f'"{escape_label_value(value)}"'


def escape_regex(value: str) -> str:
    """`value` as an RE2 pattern matching exactly that text (Go's QuoteMeta, plus control
    characters as `\\x{..}` so the pattern holds no raw newline)."""
    out: list[str] = []
    for char in value:
        if char in _RE2_META:
            out.append("\\" + char)
        elif ord(char) < 0x20 or char == "\x7f":
            out.append(f"\\x{{{ord(char):02x}}}")
        else:
            out.append(char)
    return "".join(out)


def regex_alternation(values: Iterable[str]) -> str:
    """`^(?:a|b)$` matching exactly the given values (deduplicated, order kept)."""
    unique = list(dict.fromkeys(values))
    if not unique:
        raise ValueError("regex_alternation needs at least one value")
    return "^(?:" + "|".join(escape_regex(v) for v in unique) + ")$"


def check_label_name(name: str) -> str:
    """Return `name` if it is a valid Prometheus label name, else raise InvalidName."""
    if not LABEL_NAME.match(name):
        raise InvalidName(
            f"invalid label name '{name}': use letters, digits and '_', not starting with a digit"
        )
    return name


@dataclass(frozen=True)
class Matcher:
    """One label matcher; the value is escaped when rendered, never before."""

    label: str
    op: str
    value: str

    def __post_init__(self) -> None:
        check_label_name(self.label)
        if self.op not in _OPS:
            raise ValueError(f"matcher operator '{self.op}' (valid: {', '.join(sorted(_OPS))})")

    def render(self) -> str:
        return f"{self.label}{self.op}{quote(self.value)}"


def render_selector(metric: str, matchers: Sequence[Matcher]) -> str:
    """`metric{a="x",b=~"^(?:y)$"}`, or the bare metric name without matchers."""
    if not matchers:
        return metric
    return metric + "{" + ",".join(m.render() for m in matchers) + "}"


def render_duration(delta: timedelta) -> str:
    """A PromQL range in the largest unit that divides it: `15m`, `30s`, `1500ms`."""
    if delta <= timedelta(0):
        raise ValueError(f"a PromQL range must be positive, not {delta}")
    return durations.render_duration(delta)


def node_matchers(host_label: str, nodes: Sequence[str]) -> list[Matcher]:
    """The host-label matcher for a set of nodes (any host when the set is empty)."""
    if not nodes:
        return [Matcher(host_label, "!=", "")]
    return [Matcher(host_label, "=~", regex_alternation(nodes))]


@dataclass(frozen=True)
class SignalQueryText:
    """A rendered signal query and the labels each returned sample carries. Rows labelled
    `MISSING_LABEL` are not samples: each names a node that should have one (`members`)."""

    promql: str
    host_label: str
    labels: tuple[str, ...]


#: Label of the marker rows a membership query adds for member nodes without a sample.
MISSING_LABEL = "gpu_oncall_missing"


def render_signal(
    spec: SignalSpec,
    *,
    window: timedelta,
    host_label: str,
    nodes: Sequence[str] = (),
    workload: str | None = None,
    workload_label: str | None = None,
    pod_label: str = "label_app_kubernetes_io_name",
    match: Mapping[str, str] | None = None,
) -> SignalQueryText:
    """One PromQL query reading `spec` for every node in `nodes` at once.

    The range function runs over `window`; label joins (`* on(keys) group_left(labels) info`)
    follow; then `<agg> by (<host>, <identity labels>)` leaves each sample exactly the labels
    that identify it. `changes` runs over a 30 s subquery of that aggregation, so a gauge whose
    labels churn with its value (the XID gauge's `err_code`/`err_msg`) counts value changes
    instead of splitting into series; `avg_over_time` over a 30 s subquery is time-weighted.

    Selection: a workload signal matches `workload` on `workload_label` (node and workload
    matchers go on whichever selector carries the label: the base metric or a joined info
    series). A node signal reads `nodes`; without nodes, the nodes `workload`'s Running pods
    are on (kube-state-metrics, pod label `pod_label`), or every node, in the same query,
    which also returns a `MISSING_LABEL` row for each such node without a sample. `match`
    adds matchers to every selector (`{cluster: "h100-east"}` on a shared Prometheus).
    """
    by = tuple(dict.fromkeys((host_label, *spec.identity_labels)))
    for label in (*by, *((workload_label,) if workload_label else ()), pod_label):
        check_label_name(label)
    extra = [Matcher(k, "=", v) for k, v in sorted((match or {}).items())]
    targeted: dict[str, list[Matcher]] = {}
    by_workload = bool(workload) and spec.selects_by_workload
    if nodes or not by_workload:
        targeted.setdefault(_carrier(spec, host_label), []).extend(node_matchers(host_label, nodes))
    if by_workload:
        if not workload_label:
            raise ValueError(f"signal '{spec.name}': no workload label for '{spec.source}'")
        targeted.setdefault(_carrier(spec, workload_label), []).append(
            Matcher(workload_label, "=", workload or "")
        )
    base = render_selector(
        spec.series_metric,
        [
            *extra,
            *(Matcher(k, "=", v) for k, v in sorted(spec.match.items())),
            *targeted.get("", []),
        ],
    )
    joins = [
        f" * on({', '.join(j.keys)}) group_left({', '.join(j.labels)}) "
        + render_selector(j.metric, [*extra, *targeted.get(j.metric, [])])
        for j in spec.joins
    ]
    grouping = f"{spec.agg} by ({', '.join(by)})"
    expr = _scaled(
        _expression(spec, base, joins=joins, window=window, grouping=grouping, by=by), spec.scale
    )
    if not nodes and not spec.selects_by_workload:
        members = render_members(workload, pod_label=pod_label, host_label=host_label, extra=extra)
        marker = f'label_replace({members}, "{MISSING_LABEL}", "true", "", "")'
        # A workload's nodes filter the samples; a fleet-wide read keeps every sample, so it
        # still answers where kube-state-metrics is not scraped (just without marker rows).
        kept = f"({expr} and on({host_label}) {members})" if workload else f"({expr})"
        expr = f"{kept} or on({host_label}) {marker}"
    return SignalQueryText(promql=expr, host_label=host_label, labels=by)


def render_members(
    workload: str | None, *, pod_label: str, host_label: str, extra: Sequence[Matcher] = ()
) -> str:
    """One series per node (labelled `host_label`) that `workload`'s Running pods are on, or
    per node of the cluster when `workload` is None (kube-state-metrics)."""
    if workload is None:
        nodes = f"max by (node) ({render_selector('kube_node_info', extra)})"
    else:
        running = render_selector(
            "kube_pod_status_phase", [*extra, Matcher("phase", "=", "Running")]
        )
        info = render_selector("kube_pod_info", [*extra, Matcher("node", "!=", "")])
        labels = render_selector("kube_pod_labels", [*extra, Matcher(pod_label, "=", workload)])
        nodes = (
            f"max by (node) ((({running} == 1) * on(namespace, pod) group_left(node) {info})"
            f" * on(namespace, pod) group_left() {labels})"
        )
    if host_label == "node":
        return nodes
    return f'label_replace({nodes}, "{host_label}", "$1", "node", "(.*)")'


def _carrier(spec: SignalSpec, label: str) -> str:
    """Which selector carries `label`: the first join that copies it, else the base ("")."""
    for join in spec.joins:
        if label in join.labels:
            return join.metric
    return ""


def _joined(expr: str, joins: Sequence[str]) -> str:
    for join in joins:
        expr = f"({expr}{join})"
    return expr


def _expression(
    spec: SignalSpec,
    base: str,
    *,
    joins: Sequence[str],
    window: timedelta,
    grouping: str,
    by: tuple[str, ...],
) -> str:
    w = render_duration(window)
    if spec.fn == "last":
        return f"{grouping} ({_joined(base, joins)})"
    if spec.fn == "changes":
        step = render_duration(GRID_STEP)
        inner = f"changes({grouping} ({_joined(base, joins)})[{w}:{step}])"
        return f"{grouping} ({inner})"
    if spec.fn == "quantile":
        rates = _joined(f"rate({base}[{w}])", joins)
        q = spec.quantile if spec.quantile is not None else 0.5
        return f"histogram_quantile({q!r}, sum by (le, {', '.join(by)}) ({rates}))"
    if spec.fn == "avg_over_time":
        # Time-weighted at the 30 s grid, so a burst of extra scrapes cannot skew the mean.
        ranged = f"avg_over_time({base}[{w}:{render_duration(GRID_STEP)}])"
        return f"{grouping} ({_joined(ranged, joins)})"
    if spec.fn in ("rate", "increase", "max_over_time", "min_over_time"):
        return f"{grouping} ({_joined(f'{spec.fn}({base}[{w}])', joins)})"
    raise ValueError(f"range function '{spec.fn}' has no PromQL rendering")


def _scaled(expr: str, scale: float) -> str:
    if not math.isfinite(scale):
        raise ValueError(f"signal scale must be finite, not {scale}")
    return expr if scale == 1.0 else f"{expr} * {scale!r}"
