"""kube-state-metrics' pod series: phase, info, labels, restarts, last termination reason.

Real names and labels (DOMAIN.md §7): `kube_pod_status_phase{namespace,pod,uid,phase}`,
`kube_pod_info{...,node}` (node empty while unscheduled), `kube_pod_labels{...,label_*}` for the
allow-listed pod labels (`app.kubernetes.io/name`, `gpu-oncall.io/rank`),
`kube_pod_container_status_restarts_total` and `..._last_terminated_reason{reason}`, which exists
only once a container has terminated. Series are laid out per pod from the live pods, with the
time each pod was evicted or its containers were killed, so past reads stay right.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Literal

from simulator.metric_base import MetricDef, NodeView, Seed
from simulator.pods import SimPod
from simulator.topology import unit_hash
from simulator.tracks import Computed, Effect, FaultWindow, Gone, Step, Track

PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
_FOREVER = -1.0e18
#: Pod labels kube-state-metrics is told to export (`--metric-labels-allowlist=pods=[...]`).
EXPORTED_POD_LABELS = {
    "app.kubernetes.io/name": "label_app_kubernetes_io_name",
    "gpu-oncall.io/rank": "label_gpu_oncall_io_rank",
}


def _none(_view: NodeView) -> list[Seed]:
    return []


def _pod_metric(name: str, help_: str, kind: Literal["gauge", "counter"] = "gauge") -> MetricDef:
    return MetricDef(
        name=name,
        family="kube_state_metrics",
        kind=kind,
        help=help_,
        seeds=_none,
        pod_level=True,
    )


POD_METRICS: dict[str, MetricDef] = {
    m.name: m
    for m in (
        _pod_metric("kube_pod_status_phase", "The pods current phase."),
        _pod_metric("kube_pod_info", "Information about pod."),
        _pod_metric("kube_pod_labels", "Kubernetes labels converted to Prometheus labels."),
        _pod_metric(
            "kube_pod_container_status_restarts_total",
            "The number of container restarts per container.",
            "counter",
        ),
        _pod_metric(
            "kube_pod_container_status_last_terminated_reason",
            "Describes the last reason the container was in terminated state.",
        ),
    )
}


@functools.lru_cache(maxsize=65_536)
def _uid(namespace: str, name: str) -> str:
    return str(uuid.UUID(bytes=unit_hash("pod", namespace, name)[:16], version=4))


def pod_uid(pod: SimPod) -> str:
    """The pod's uid: deterministic, so the same scenario always exports the same series."""
    return _uid(pod.namespace, pod.name)


def pod_tracks(metric: str, pods: Iterable[SimPod]) -> Iterator[Track]:
    """The metric's series for `pods` (kube-state-metrics sees every pod, placed or not)."""
    layout = _LAYOUTS[metric]
    for pod in pods:
        yield from layout(pod)


def _identity(pod: SimPod) -> dict[str, str]:
    return {"namespace": pod.namespace, "pod": pod.name, "uid": pod_uid(pod)}


def _track(
    pod: SimPod,
    entity: tuple[str, ...],
    *,
    labels: dict[str, str],
    base: float,
    effects: tuple[Effect, ...] = (),
) -> Track:
    return Track(
        node=pod.node or "",
        labels={**_identity(pod), **labels},
        base=base,
        effects=effects,
        entity=("pod", pod.namespace, pod.name, *entity),
    )


def _phase_at(pod: SimPod) -> Callable[[float], str]:
    never_placed = pod.node is None and pod.stopped_at is None

    def phase(t: float) -> str:
        if never_placed or (pod.stopped_at is not None and t >= pod.stopped_at):
            return "Pending"
        return pod.phase if pod.node is not None else "Running"

    return phase


def _phases(pod: SimPod) -> Iterator[Track]:
    phase = _phase_at(pod)
    for name in PHASES:
        if pod.stopped_at is None:  # the phase never changed: a constant series
            yield _track(
                pod, ("phase", name), labels={"phase": name}, base=float(phase(0.0) == name)
            )
            continue
        read = _is_phase(phase, name)
        yield _track(
            pod, ("phase", name), labels={"phase": name}, base=0.0, effects=(Computed(read),)
        )


def _is_phase(phase: Callable[[float], str], name: str) -> Callable[[float], float]:
    return lambda t: 1.0 if phase(t) == name else 0.0


def _info(pod: SimPod) -> Iterator[Track]:
    index = int.from_bytes(unit_hash("ip", pod.namespace, pod.name)[:2], "big")
    owner = "DaemonSet" if pod.daemonset else "Job"
    labels = {
        "node": pod.node or "",
        "pod_ip": f"10.244.{index // 256}.{index % 256}" if pod.node else "",
        "created_by_kind": owner,
        "created_by_name": pod.workload or "",
    }
    yield _track(pod, ("info",), labels=labels, base=1.0)


def _labels(pod: SimPod) -> Iterator[Track]:
    labels = {
        exported: pod.labels[label]
        for label, exported in EXPORTED_POD_LABELS.items()
        if label in pod.labels
    }
    yield _track(pod, ("labels",), labels=labels, base=1.0)


def _restarts(pod: SimPod) -> Iterator[Track]:
    counted = sum(n for _t, _r, n in pod.terminations)
    effects: tuple[Effect, ...] = tuple(
        Step(FaultWindow(t), float(n)) for t, _reason, n in pod.terminations
    )
    labels = {"container": pod.container}
    yield _track(
        pod, ("restarts",), labels=labels, base=float(pod.restarts - counted), effects=effects
    )


def _last_terminated(pod: SimPod) -> Iterator[Track]:
    """One series per run of terminations with the same reason, present from the run's first
    termination until a termination with another reason."""
    runs: list[tuple[float, str]] = []
    for t, reason, _n in pod.terminations:
        if not runs or runs[-1][1] != reason:
            runs.append((t, reason))
    for i, (t, reason) in enumerate(runs):
        effects: list[Effect] = [Gone(FaultWindow(_FOREVER, t))]
        if i + 1 < len(runs):
            effects.append(Gone(FaultWindow(runs[i + 1][0])))
        labels = {"container": pod.container, "reason": reason}
        yield _track(pod, ("terminated", str(i)), labels=labels, base=1.0, effects=tuple(effects))


_LAYOUTS: dict[str, Callable[[SimPod], Iterator[Track]]] = {
    "kube_pod_status_phase": _phases,
    "kube_pod_info": _info,
    "kube_pod_labels": _labels,
    "kube_pod_container_status_restarts_total": _restarts,
    "kube_pod_container_status_last_terminated_reason": _last_terminated,
}
