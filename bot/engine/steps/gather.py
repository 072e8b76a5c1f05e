"""Gather steps: read a signal from Telemetry or objects/logs from the Cluster.

Outputs are summaries that expressions can read: for a signal, `max`, `min`, `sum`, `count`,
`any`, `argmax`, `argmin`, `median`, `over_zero`, `zero_nodes`, `present_nodes`, the samples far
from the median (`low_outliers`/`high_outliers` and their nodes), per-label spreads for the signal's
`keep_labels` (`distinct`, `majority`, `minority_nodes`, `node_labels`) and
`missing`/`missing_nodes`. A missing signal has `max == null`, so a check that needs it becomes
*unknown* instead of silently passing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from datetime import timedelta
from operator import attrgetter
from typing import Any

from langgraph.runtime import Runtime

from bot.diagnosis.logs import classify_text
from bot.diagnosis.spread import OUTLIER_RATIO, label_spread, median, outlier_band
from bot.engine.deadlines import StepDeadlineExceeded, within_deadline
from bot.engine.loading import LoadedRunbook
from bot.engine.schema import Step
from bot.engine.state import Deps, RunState
from bot.engine.steps.cluster_gaps import unavailable_read
from bot.engine.steps.common import (
    fleet_wide,
    format_window,
    output,
    parse_duration,
    render_with,
    step_window,
    target_nodes,
)
from bot.engine.steps.freshness import Freshened, drop_held_values, stale_summary
from bot.engine.steps.log_age import aged_split
from bot.engine.steps.ranking import Ranking
from integrations.errors import ClusterError, NodeNotFound, TelemetryUnavailable
from integrations.telemetry import Sample, SignalQuery, SignalResult

_node_of = attrgetter("node")
NodeFn = Callable[[RunState, Runtime[Deps]], dict[str, Any]]
MAX_SAMPLES = 64
#: Bits decoded from a bitmask signal: DCGM's clock-event reasons use 0x1 .. 0x100.
BITMASK_BITS = 9


def summarize_signal(
    result: SignalResult,
    *,
    nodes: list[str],
    window: timedelta,
    error: str | None = None,
    keep_labels: tuple[str, ...] = (),
    outlier_ratio: float = OUTLIER_RATIO,
    bitmask: bool = False,
) -> dict[str, Any]:
    """Turn a SignalResult into the JSON-safe summary expressions read. A `bitmask` signal
    (unit `bitmask`, e.g. clock-event reasons) also gets `bit_nodes`: bit -> nodes with it set.

    Samples are listed highest value first, ties by node (see steps.ranking: only the listed
    ones are put in that order); every node set is built from the samples as read."""
    read = result.samples
    ranking = Ranking(read)
    values = ranking.ranked_values()
    top = ranking.first(MAX_SAMPLES)
    per_node = Counter(map(_node_of, read))
    # node sets in read order, not hashed: samples come node by node, so their sort is one run
    over_zero_nodes = dict.fromkeys([s.labels.get("node", s.node) for s in read if s.value > 0])
    sparse = _sparse_of(per_node, order=ranking.nodes)
    summary: dict[str, Any] = {
        "signal": result.signal,
        "nodes": nodes,
        "window": format_window(window),
        "count": len(read),
        "max": max(values) if values else None,
        "min": min(values) if values else None,
        "sum": sum(values) if values else None,
        "median": median(values),
        "any": (len(over_zero_nodes) > 0) if values else None,
        "argmax": _sample_dict(top[0]) if top else {},
        "argmin": _sample_dict(ranking.last()) if read else {},
        "over_zero": [_sample_dict(s) for s in ranking.first_above(0.0, MAX_SAMPLES)],
        # a sample's dict lets a `node` label stand for the node, and so do these names
        "over_zero_nodes": sorted(over_zero_nodes),
        "zero_nodes": sorted(dict.fromkeys([s.node for s in read if s.value <= 0])),
        "present_nodes": sorted(per_node),
        "sparse_nodes": sparse,
        "gone": _gone(read, sparse=sparse),
        "samples": [_sample_dict(s) for s in top],
        "missing": not read,
        "missing_nodes": list(result.missing_nodes),
        "queries": result.queries,
        **_outliers(ranking, ratio=outlier_ratio),
        **_label_spreads(ranking, keep_labels),
        **({"bit_nodes": _bit_nodes(read)} if bitmask else {}),
    }
    if error:
        summary["error"] = error
    return summary


def _sparse_nodes(samples: Sequence[Sample]) -> list[str]:
    """Nodes with fewer samples than most nodes have: a GPU or port gone from the exporter
    (fallen off the bus) while the rest of the node still reports."""
    per_node = Counter(map(_node_of, samples))
    return _sparse_of(per_node, order=lambda: list(per_node))


def _sparse_of(per_node: Counter[str], *, order: Callable[[], list[str]]) -> list[str]:
    """`_sparse_nodes` from each node's sample count. When counts tie for the most usual, the
    usual one is the count of the first node in `order` (called only then) that has one."""
    if not per_node:
        return []
    frequency = Counter(per_node.values())
    most = max(frequency.values())
    tied = {count for count, times in frequency.items() if times == most}
    usual = (
        next(iter(tied))
        if len(tied) == 1
        else next(per_node[n] for n in order() if per_node[n] in tied)
    )
    return sorted(n for n, count in per_node.items() if count < usual)


def _gone(samples: Sequence[Sample], *, sparse: list[str] | None = None) -> list[dict[str, str]]:
    """On each sparse node (`sparse`, when already known), the GPUs (`gpu` label) or HCAs
    (`device`) the other nodes report and it does not: `[{node, gpu}]` for the GPU that fell
    off the bus."""
    sparse = _sparse_nodes(samples) if sparse is None else sparse
    if not sparse:
        return []
    key = "gpu" if any("gpu" in s.labels for s in samples) else "device"
    present: dict[str, set[str | None]] = {node: set() for node in sparse}
    usual: set[str] = set()
    for sample in samples:
        if sample.node in present:
            present[sample.node].add(sample.labels.get(key))
        elif key in sample.labels:
            usual.add(sample.labels[key])
    gone: list[dict[str, str]] = []
    for node in sparse:
        gone += [{"node": node, key: v} for v in sorted(usual - present[node])]
        if len(gone) >= MAX_SAMPLES:
            break
    return gone[:MAX_SAMPLES]


def _outliers(ranking: Ranking, *, ratio: float) -> dict[str, Any]:
    """Samples far below / above the median, and the nodes they are on (see diagnosis.spread)."""
    band = outlier_band(ranking.ranked_values(), ratio=ratio)
    low: list[Sample] = []
    high: list[Sample] = []
    if band is not None:
        center, threshold = band
        low = ranking.below(center - threshold)[::-1]  # furthest from the median first
        high = ranking.above(center + threshold)
    return {
        "low_outliers": [_sample_dict(s) for s in low[:MAX_SAMPLES]],
        "low_outlier_nodes": sorted({s.node for s in low}),
        "high_outliers": [_sample_dict(s) for s in high[:MAX_SAMPLES]],
        "high_outlier_nodes": sorted({s.node for s in high}),
    }


def _label_spreads(ranking: Ranking, labels: tuple[str, ...]) -> dict[str, Any]:
    """For each kept label: its distinct values, the majority value, the nodes that differ,
    and each node's value (from the node's first sample in rank order), for cross-node
    correlation."""
    if not labels:
        return {}
    first = ranking.leaders()
    node_labels = {
        node: {k: found[k] for k in labels if k in found}
        for node, found in sorted((node, s.labels) for node, s in first.items())
    }
    distinct, majority, minority = {}, {}, {}
    for label in labels:
        spread = label_spread({n: v[label] for n, v in node_labels.items() if label in v})
        distinct[label] = list(spread.distinct)
        majority[label] = spread.majority
        minority[label] = list(spread.minority_nodes)
    return {
        "distinct": distinct,
        "majority": majority,
        "minority_nodes": minority,
        "node_labels": node_labels,
    }


def _bit_nodes(samples: Sequence[Sample]) -> dict[str, list[str]]:
    """For each of the 9 low bits (0x1 .. 0x100, every key always present so a check can index
    it), the nodes where some sample has it set."""
    by_value: dict[int, set[str]] = {}  # a fleet's samples take few distinct values
    for sample in samples:
        value = int(sample.value)
        if value:
            by_value.setdefault(value, set()).add(sample.node)
    found: dict[str, set[str]] = {str(1 << b): set() for b in range(BITMASK_BITS)}
    for value, nodes in by_value.items():
        for b in range(BITMASK_BITS):
            if value >> b & 1:
                found[str(1 << b)] |= nodes
    return {bit: sorted(nodes) for bit, nodes in found.items()}


def _sample_dict(sample: Sample) -> dict[str, Any]:
    return {"node": sample.node, "value": sample.value, **sample.labels}


def make_signal_node(step: Step, loaded: LoadedRunbook) -> NodeFn:
    signal = step.signal or ""

    def signal_node(state: RunState, runtime: Runtime[Deps]) -> dict[str, Any]:
        nodes = target_nodes(loaded, step, state)
        window = step_window(loaded, step, state)
        inputs = state.get("inputs", {})
        workload = (
            None if fleet_wide(loaded, step, state) else inputs.get("job") or inputs.get("service")
        )
        query = SignalQuery(signal=signal, nodes=tuple(nodes), window=window, workload=workload)
        held = Freshened(result=SignalResult(signal=signal), stale=(), within="")
        try:
            held = within_deadline(
                lambda: _read_fresh(runtime.context, query),
                deadline=runtime.context.step_deadline,
                runbook=loaded.name,
                step=step.id,
            )
            result, error, backend = held.result, None, None
        except StepDeadlineExceeded as exc:  # a step's deadline: its input is unavailable
            result = SignalResult(signal=signal, missing_nodes=tuple(nodes), queries=1)
            error, backend = str(exc), "telemetry"
        except TelemetryUnavailable as exc:
            result = SignalResult(signal=signal, missing_nodes=tuple(nodes), queries=1)
            error = f"telemetry unavailable: {exc}"
            backend = exc.backend or "telemetry"  # read by steps.backends: telemetry suspect
        ratio = render_with(loaded, step, "outlier_ratio", state)
        spec = runtime.context.signals.get(signal) if signal in runtime.context.signals else None
        summary = summarize_signal(
            result,
            nodes=nodes,
            window=window,
            error=error,
            keep_labels=spec.keep_labels if spec else (),
            outlier_ratio=float(ratio) if ratio else OUTLIER_RATIO,
            bitmask=spec is not None and spec.unit == "bitmask",
        )
        summary |= stale_summary(held)
        if held.stale:  # a held sample is stale, but its GPU is there: not "fallen off the bus"
            seen = [*result.samples, *held.stale]
            summary |= {"sparse_nodes": _sparse_nodes(seen), "gone": _gone(seen)}
        return output(step, summary | ({"unavailable": backend} if backend else {}))

    return signal_node


def _read_fresh(deps: Deps, query: SignalQuery) -> Freshened:
    """The signal's samples, held gauges that did not change dropped (steps.freshness)."""
    result = deps.telemetry.read(query)
    return drop_held_values(
        result, telemetry=deps.telemetry, signals=deps.signals, now=deps.clock.now()
    )


def make_cluster_node(step: Step, loaded: LoadedRunbook) -> NodeFn:
    readers: dict[str, Callable[[Deps, list[str], RunState], dict[str, Any]]] = {
        "node": _read_node,
        "pods": _read_pods,
        "events": _read_events,
        "node_logs": _read_node_logs,
        "pod_logs": _read_pod_logs,
    }
    read = step.cluster or "node"
    reader = readers[read]

    def cluster_node(state: RunState, runtime: Runtime[Deps]) -> dict[str, Any]:
        nodes = target_nodes(loaded, step, state)
        try:
            found = within_deadline(
                lambda: reader(runtime.context, nodes, state),
                deadline=runtime.context.step_deadline,
                runbook=loaded.name,
                step=step.id,
            )
        except NodeNotFound:
            raise  # bad input, not a gap
        except ClusterError as exc:  # a gap, like a silent signal (steps.cluster_gaps)
            found = unavailable_read(read, exc)
        except StepDeadlineExceeded as exc:  # the same gap, named by the deadline
            found = {"unavailable": "cluster", "missing": True, "error": str(exc)}
        return output(step, {"read": step.cluster, "nodes": nodes, **found})

    return cluster_node


def _read_node(deps: Deps, nodes: list[str], state: RunState) -> dict[str, Any]:
    infos = deps.cluster.nodes(nodes)
    items = [
        {
            "name": n.name,
            "ready": n.ready,
            "unschedulable": n.unschedulable,
            "conditions": n.conditions,
            "labels": n.labels,
            "taints": list(n.taints),
            "gpu_capacity": n.gpu_capacity,
            "gpu_allocatable": n.gpu_allocatable,
            "gpus_lost": max(0, n.gpu_capacity - n.gpu_allocatable),
        }
        for n in infos
    ]
    first = items[0] if items else {}
    return {
        **first,
        "items": items,
        "not_ready": [i["name"] for i in items if not i["ready"]],
        "cordoned": [i["name"] for i in items if i["unschedulable"]],
    }


def _read_pods(deps: Deps, nodes: list[str], state: RunState) -> dict[str, Any]:
    pods = [p for node in nodes for p in deps.cluster.pods_on(node)]
    return {
        "pods": [
            {
                "name": p.name,
                "namespace": p.namespace,
                "phase": p.phase,
                "workload": p.workload,
                "restarts": p.restarts,
                "last_terminated_reason": p.last_terminated_reason,
            }
            for p in pods[:MAX_SAMPLES]
        ],
        "count": len(pods),
        "running": sum(1 for p in pods if p.phase == "Running"),
        "pending": sum(1 for p in pods if p.phase == "Pending"),
        "oom_killed": [p.name for p in pods if p.last_terminated_reason == "OOMKilled"],
        "workloads": sorted({p.workload for p in pods if p.workload}),
    }


def _read_events(deps: Deps, nodes: list[str], state: RunState) -> dict[str, Any]:
    """The events of the window, and their messages classified like a kernel log: NPD's
    kernel-monitor rules put the matched line (`NVRM: Xid ... 79`) in the event's message."""
    since = deps.clock.now() - step_window_default(state)
    events = [e for node in nodes for e in deps.cluster.events(node, since=since)]
    return _classified(deps, "\n".join(e.message for e in events)) | {
        "events": [
            {
                "at": e.at.isoformat(),
                "kind": e.kind,
                "name": e.name,
                "reason": e.reason,
                "message": e.message,
                "type": e.type,
            }
            for e in events[:MAX_SAMPLES]
        ],
        "count": len(events),
        "warnings": sum(1 for e in events if e.type == "Warning"),
        "reasons": sorted({e.reason for e in events}),
    }


def step_window_default(state: RunState) -> timedelta:
    return parse_duration(str(state.get("inputs", {}).get("window") or "15m"))


def _classified(deps: Deps, text: str) -> dict[str, Any]:
    found = classify_text(text, deps.log_catalog)
    return {
        "lines": text.count("\n") + (1 if text and not text.endswith("\n") else 0),
        "layer": found.layer,
        "signature": found.signal,
        "xids": list(found.xids),
        "has_xid": bool(found.xids),
        "matches": [
            {
                "signature": m.signature,
                "layer": m.layer,
                "severity": m.severity,
                "line": m.line[:300],
                "xid": m.xid,
            }
            for m in found.matches[:20]
        ],
        "match_count": len(found.matches),
        "signatures": sorted({m.signature for m in found.matches}),
        "layers": sorted({m.layer for m in found.matches if m.layer and not m.secondary}),
        "critical_layers": sorted(
            {
                m.layer
                for m in found.matches
                if m.layer and not m.secondary and m.severity == "critical"
            }
        ),
    }


def _read_node_logs(deps: Deps, nodes: list[str], state: RunState) -> dict[str, Any]:
    """The kernel log's recent lines classified; older fault lines kept as `history`."""
    text = "\n".join(deps.cluster.node_logs(node) for node in nodes)
    recent, aged = aged_split(
        text,
        now=deps.clock.now(),
        window=step_window_default(state),
        lookback=deps.kernel_lookback,
        catalog=deps.log_catalog,
    )
    return _classified(deps, recent) | aged


def _read_pod_logs(deps: Deps, nodes: list[str], state: RunState) -> dict[str, Any]:
    pods = [p for node in nodes for p in deps.cluster.pods_on(node) if p.workload]
    text = "\n".join(deps.cluster.pod_logs(p.name, p.namespace) for p in pods)
    return _classified(deps, text) | {"pods": [p.name for p in pods[:MAX_SAMPLES]]}
