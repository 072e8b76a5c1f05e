"""Marks on simulated nodes and pods: labels, taints, annotations, PodDisruptionBudgets, and
other remediators' pause switches (medik8s NodeHealthChecks with pause requests).

Pure functions over a node's `NodeState` and the fleet's pods, used by the Fleet's journaled
writes so a replay applies them the same way. Each write says whether it changed anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from math import ceil
from typing import Any

from integrations.cluster import Outcome, RemediationPause
from integrations.selectors import matches
from simulator.pods import SimPod
from simulator.states import NodeState
from simulator.topology import NodeSpec

PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."


def node_labels(
    spec: NodeSpec, state: NodeState, *, gpu_model: str, driver_version: str
) -> dict[str, str]:
    """The labels kubectl would show: the node's built-in labels with the writes applied."""
    labels = {
        "kubernetes.io/hostname": spec.name,
        "nvidia.com/gpu.product": gpu_model.replace(" ", "-"),
        "nvidia.com/gpu.count": str(len(spec.gpus)),
        "nvidia.com/cuda.driver-version.full": driver_version,
        "gpu-oncall.io/rack": spec.rack,
        "gpu-oncall.io/leaf-switch": spec.leaf_switch,
    }
    for key, value in state.labels.items():
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value
    return labels


def set_taint(state: NodeState, *, key: str, value: str, effect: str) -> Outcome:
    """Add `key=value:effect` (replacing another value of the same key and effect)."""
    if (key, value, effect) in state.taints:
        return Outcome.ALREADY_DONE
    state.taints = [t for t in state.taints if (t[0], t[2]) != (key, effect)]
    state.taints.append((key, value, effect))
    return Outcome.CHANGED


def remove_taint(state: NodeState, *, key: str, effect: str) -> Outcome:
    kept = [t for t in state.taints if (t[0], t[2]) != (key, effect)]
    if len(kept) == len(state.taints):
        return Outcome.ALREADY_DONE
    state.taints = kept
    return Outcome.CHANGED


def render_taints(state: NodeState) -> list[str]:
    return [f"{k}={v}:{e}" if v else f"{k}:{e}" for k, v, e in state.taints]


def set_annotations(state: NodeState, values: Mapping[str, str | None]) -> Outcome:
    if all(state.annotations.get(k) == v for k, v in values.items()):
        return Outcome.ALREADY_DONE
    for key, value in values.items():
        if value is None:
            state.annotations.pop(key, None)
        else:
            state.annotations[key] = value
    return Outcome.CHANGED


def set_labels(
    state: NodeState, values: Mapping[str, str | None], *, current: Mapping[str, str]
) -> Outcome:
    """Write label changes over `current` (the labels shown now)."""
    if all(current.get(k) == v for k, v in values.items()):
        return Outcome.ALREADY_DONE
    state.labels.update(values)
    return Outcome.CHANGED


@dataclass(frozen=True)
class SimBudget:
    """A PodDisruptionBudget: pods in `namespace` matching `match_labels`, with exactly one of
    `min_available` / `max_unavailable` (a count or a percentage such as "50%")."""

    name: str
    namespace: str
    match_labels: Mapping[str, str]
    min_available: int | str | None = None
    max_unavailable: int | str | None = None

    def covers(self, pod: SimPod) -> bool:
        labels = pod.labels
        return pod.namespace == self.namespace and all(
            labels.get(k) == v for k, v in self.match_labels.items()
        )


def _count(value: int | str, total: int) -> int:
    return value if isinstance(value, int) else ceil(int(value.rstrip("%")) * total / 100)


def budget_refusal(pod: SimPod, pods: Iterable[SimPod], budgets: Iterable[SimBudget]) -> str | None:
    """Why the Eviction API would refuse to evict `pod` now (None: it may go), computed like
    the disruption controller: healthy = covered pods running on a node."""
    budget = next((b for b in budgets if b.covers(pod)), None)
    if budget is None or pod.phase != "Running":
        return None
    covered = [p for p in pods if budget.covers(p)]
    healthy = sum(1 for p in covered if p.phase == "Running" and p.node is not None)
    if budget.min_available is not None:
        desired = _count(budget.min_available, len(covered))
    else:
        desired = len(covered) - _count(budget.max_unavailable or 0, len(covered))
    if healthy - desired > 0:
        return None
    return (
        f"{PDB_MESSAGE} The disruption budget {budget.name} needs {desired} healthy pods and "
        f"has {healthy} currently"
    )


def skip_reason(pod: SimPod) -> str:
    """Why a drain leaves the pod alone, as `kubectl drain --ignore-daemonsets` does."""
    if pod.daemonset:
        return "DaemonSet-owned"
    if pod.mirror:
        return "mirror pod (static pod managed by the kubelet)"
    if pod.phase in ("Succeeded", "Failed"):
        return f"finished ({pod.phase})"
    return ""


def budget_fields(budget: SimBudget) -> dict[str, Any]:
    return {
        "name": budget.name,
        "namespace": budget.namespace,
        "match_labels": dict(budget.match_labels),
        "min_available": budget.min_available,
        "max_unavailable": budget.max_unavailable,
    }


@dataclass(frozen=True)
class SimHealthCheck:
    """A medik8s NodeHealthCheck: the nodes its `selector` (a LabelSelector as JSON) selects,
    and its `pause_requests` (none: it is not paused)."""

    name: str
    selector: Mapping[str, Any]
    pause_requests: tuple[str, ...] = ()

    def pause_for(self, labels: Mapping[str, str]) -> RemediationPause | None:
        if not self.pause_requests or not matches(self.selector, labels):
            return None
        return RemediationPause("NodeHealthCheck", self.name, tuple(self.pause_requests))


def health_check_fields(check: SimHealthCheck) -> dict[str, Any]:
    return {
        "name": check.name,
        "selector": dict(check.selector),
        "pause_requests": list(check.pause_requests),
    }
