"""Gather steps: read a signal from Telemetry or objects/logs from the Cluster.

Outputs are summaries that expressions can read: for a signal, `max`, `min`, `sum`, `count`,
`any`, `argmax`, `over_zero` and `missing`/`missing_nodes`. A missing signal has `max == null`,
so a check that needs it becomes *unknown* instead of silently passing.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from langgraph.runtime import Runtime

from bot.diagnosis.logs import classify_text
from bot.engine.loading import LoadedRunbook
from bot.engine.schema import Step
from bot.engine.state import Deps, RunState
from bot.engine.steps.common import (
    format_window,
    output,
    parse_duration,
    step_window,
    target_nodes,
)
from integrations.errors import TelemetryUnavailable
from integrations.telemetry import Sample, SignalQuery, SignalResult

NodeFn = Callable[[RunState, Runtime[Deps]], dict[str, Any]]
MAX_SAMPLES = 64


def summarize_signal(
    result: SignalResult, *, nodes: list[str], window: timedelta, error: str | None = None
) -> dict[str, Any]:
    """Turn a SignalResult into the JSON-safe summary expressions read."""
    samples = sorted(result.samples, key=lambda s: (-s.value, s.node))
    values = [s.value for s in samples]
    missing = not samples
    over_zero = [_sample_dict(s) for s in samples if s.value > 0]
    summary: dict[str, Any] = {
        "signal": result.signal,
        "nodes": nodes,
        "window": format_window(window),
        "count": len(samples),
        "max": max(values) if values else None,
        "min": min(values) if values else None,
        "sum": sum(values) if values else None,
        "any": (len(over_zero) > 0) if values else None,
        "argmax": _sample_dict(samples[0]) if samples else {},
        "over_zero": over_zero[:MAX_SAMPLES],
        "over_zero_nodes": sorted({s["node"] for s in over_zero}),
        "samples": [_sample_dict(s) for s in samples[:MAX_SAMPLES]],
        "missing": missing,
        "missing_nodes": list(result.missing_nodes),
        "queries": result.queries,
    }
    if error:
        summary["error"] = error
    return summary


def _sample_dict(sample: Sample) -> dict[str, Any]:
    return {"node": sample.node, "value": sample.value, **sample.labels}


def make_signal_node(step: Step, loaded: LoadedRunbook) -> NodeFn:
    signal = step.signal or ""

    def signal_node(state: RunState, runtime: Runtime[Deps]) -> dict[str, Any]:
        nodes = target_nodes(loaded, step, state)
        window = step_window(loaded, step, state)
        workload = state.get("inputs", {}).get("job") or state.get("inputs", {}).get("service")
        query = SignalQuery(signal=signal, nodes=tuple(nodes), window=window, workload=workload)
        try:
            result = runtime.context.telemetry.read(query)
            error = None
        except TelemetryUnavailable as exc:
            result = SignalResult(signal=signal, missing_nodes=tuple(nodes), queries=1)
            error = f"telemetry unavailable: {exc}"
        return output(step, summarize_signal(result, nodes=nodes, window=window, error=error))

    return signal_node


def make_cluster_node(step: Step, loaded: LoadedRunbook) -> NodeFn:
    readers: dict[str, Callable[[Deps, list[str], RunState], dict[str, Any]]] = {
        "node": _read_node,
        "pods": _read_pods,
        "events": _read_events,
        "node_logs": _read_node_logs,
        "pod_logs": _read_pod_logs,
    }
    reader = readers[step.cluster or "node"]

    def cluster_node(state: RunState, runtime: Runtime[Deps]) -> dict[str, Any]:
        nodes = target_nodes(loaded, step, state)
        return output(
            step, {"read": step.cluster, "nodes": nodes, **reader(runtime.context, nodes, state)}
        )

    return cluster_node


def _read_node(deps: Deps, nodes: list[str], state: RunState) -> dict[str, Any]:
    infos = deps.cluster.nodes(nodes)
    items = [
        {
            "name": n.name,
            "ready": n.ready,
            "unschedulable": n.unschedulable,
            "conditions": n.conditions,
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
    since = deps.clock.now() - step_window_default(state)
    events = [e for node in nodes for e in deps.cluster.events(node, since=since)]
    return {
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
    }


def _read_node_logs(deps: Deps, nodes: list[str], state: RunState) -> dict[str, Any]:
    text = "\n".join(deps.cluster.node_logs(node) for node in nodes)
    return _classified(deps, text)


def _read_pod_logs(deps: Deps, nodes: list[str], state: RunState) -> dict[str, Any]:
    pods = [p for node in nodes for p in deps.cluster.pods_on(node) if p.workload]
    text = "\n".join(deps.cluster.pod_logs(p.name, p.namespace) for p in pods)
    return _classified(deps, text) | {"pods": [p.name for p in pods[:MAX_SAMPLES]]}
