"""API objects -> the Cluster port's records (NodeInfo, PodInfo, ClusterEvent, JobRun,
RemediationPause), and which pods a drain leaves alone.

Reads attributes of the kubernetes client's models without importing `kubernetes` (only
`integrations.k8s` may); pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from integrations.cluster import ClusterEvent, JobRun, NodeInfo, Outcome, PodInfo, RemediationPause
from integrations.selectors import matches

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
_EPOCH = datetime.min.replace(tzinfo=UTC)


def node_info(node: Any) -> NodeInfo:
    status, spec, meta = node.status, node.spec, node.metadata
    conditions = {c.type: c.status for c in (status.conditions if status else None) or []}
    return NodeInfo(
        name=meta.name,
        ready=conditions.get("Ready") == "True",
        unschedulable=bool(spec.unschedulable) if spec else False,
        conditions=conditions,
        labels=dict(meta.labels or {}),
        taints=tuple(render_taint(t) for t in (spec.taints if spec else None) or []),
        gpu_capacity=_gpus(status.capacity if status else None),
        gpu_allocatable=_gpus(status.allocatable if status else None),
        annotations=dict(meta.annotations or {}),
    )


def render_taint(taint: Any) -> str:
    """`key=value:Effect`, or `key:Effect` without a value."""
    head = f"{taint.key}={taint.value}" if taint.value else taint.key
    return f"{head}:{taint.effect}"


def pod_info(pod: Any) -> PodInfo:
    meta, spec, status = pod.metadata, pod.spec, pod.status
    owner = controller(meta.owner_references or [])
    statuses = (status.container_statuses if status else None) or []
    terminated = [
        s.last_state.terminated
        for s in statuses
        if s.last_state is not None and s.last_state.terminated is not None
    ]
    latest = max(terminated, key=lambda t: t.finished_at or _EPOCH, default=None)
    return PodInfo(
        name=meta.name,
        namespace=meta.namespace,
        node=spec.node_name if spec else None,
        phase=(status.phase if status else None) or "Unknown",
        labels=dict(meta.labels or {}),
        workload=_workload(owner, meta.labels or {}),
        restarts=sum(int(s.restart_count or 0) for s in statuses),
        last_terminated_reason=latest.reason if latest is not None else None,
        gpus=sum(_gpus(c.resources.limits if c.resources else None) for c in spec.containers or []),
        owner_kind=owner.kind if owner is not None else None,
        mirror=MIRROR_ANNOTATION in (meta.annotations or {}),
    )


def cluster_event(event: Any) -> ClusterEvent:
    involved = event.involved_object
    at = event.last_timestamp or event.event_time or event.first_timestamp
    at = at or event.metadata.creation_timestamp or _EPOCH
    return ClusterEvent(
        at=at if at.tzinfo else at.replace(tzinfo=UTC),
        kind=involved.kind or "",
        name=involved.name or "",
        reason=event.reason or "",
        message=event.message or "",
        type=event.type or "Normal",
        namespace=involved.namespace or "",
    )


def health_check_pause(
    check: Mapping[str, Any], labels: Mapping[str, str]
) -> RemediationPause | None:
    """The pause of a medik8s NodeHealthCheck (a custom object, as JSON) when it selects a node
    with these `labels` and has `spec.pauseRequests`; None otherwise. An empty or missing
    `spec.selector` selects every node, as NHC's own `LabelSelectorAsSelector` does; a
    malformed one raises `selectors.InvalidSelector`."""
    spec = check.get("spec") or {}
    requests = tuple(str(r) for r in spec.get("pauseRequests") or [])
    if not requests or not matches(spec.get("selector"), labels):
        return None
    name = str((check.get("metadata") or {}).get("name", ""))
    return RemediationPause(controller="NodeHealthCheck", name=name, requests=requests)


def controller(owners: list[Any]) -> Any:
    for owner in owners:
        if owner.controller:
            return owner
    return owners[0] if owners else None


def _workload(owner: Any, labels: Mapping[str, str]) -> str | None:
    """The owning workload's name: a Job, DaemonSet or StatefulSet by name, a Deployment from
    its ReplicaSet (`<deployment>-<pod-template-hash>`)."""
    if owner is None:
        return None
    name = str(owner.name)
    if owner.kind == "ReplicaSet":
        suffix = labels.get("pod-template-hash")
        if suffix and name.endswith(f"-{suffix}"):
            return name.removesuffix(f"-{suffix}")
        return name.rsplit("-", 1)[0]
    return name


def skip_reason(pod: Any) -> str:
    """Why a drain leaves this pod alone ("" to evict it)."""
    owner = controller(pod.metadata.owner_references or [])
    if owner is not None and owner.kind == "DaemonSet":
        return "DaemonSet-owned"
    if MIRROR_ANNOTATION in (pod.metadata.annotations or {}):
        return "mirror pod (static pod managed by the kubelet)"
    phase = pod.status.phase if pod.status else None
    if phase in ("Succeeded", "Failed"):
        return f"finished ({phase})"
    return ""


def _gpus(resources: Mapping[str, str] | None) -> int:
    value = (resources or {}).get("nvidia.com/gpu")
    try:
        return int(str(value)) if value is not None else 0
    except ValueError:
        return 0


def job_run(job: Any, *, outcome: Outcome = Outcome.ALREADY_DONE) -> JobRun:
    """A batch/v1 Job's state from its conditions: Complete or Failed (status True), else
    running. A Failed condition's reason and message become `reason`."""
    meta, status = job.metadata, job.status
    state, reason = "running", ""
    for condition in (status.conditions if status else None) or []:
        if condition.status != "True":
            continue
        if condition.type == "Complete":
            state = "complete"
        elif condition.type == "Failed":
            state = "failed"
            reason = ": ".join(p for p in (condition.reason, condition.message) if p)
            break
    return JobRun(meta.name, meta.namespace, state, reason, outcome)
