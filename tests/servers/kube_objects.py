"""Kubernetes objects and API semantics for the fake API server (tests/servers/fake_kube.py).

Pure helpers: object builders in the JSON shape the real API serves, Status bodies, the three
patch types (strategic merge / JSON merge / JSON patch), field and label selectors, and the
disruption controller's `disruptionsAllowed` for a PodDisruptionBudget. No HTTP here.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

JSON = dict[str, Any]
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
CONTROLLER_TAINTS = (
    "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
)
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
NHC_API_VERSION = "remediation.medik8s.io/v1alpha1"
EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list."
)
NODE_SELECTOR_FIELDS = ("metadata.name", "spec.unschedulable")
POD_SELECTOR_FIELDS = (
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
EVENT_SELECTOR_FIELDS = (
    "metadata.name",
    "metadata.namespace",
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)


def stamp(at: datetime) -> str:
    """RFC 3339 in UTC, as the API server writes timestamps."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_stamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def status_body(
    code: int, reason: str, message: str, *, details: JSON | None = None, success: bool = False
) -> JSON:
    """A metav1.Status as the API server answers errors (and evictions)."""
    body: JSON = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if success else "Failure",
        "code": code,
    }
    if not success:
        body |= {"message": message, "reason": reason}
    if details:
        body["details"] = details
    return body


def parse_taint(text: str) -> JSON:
    """`key=value:Effect` or `key:Effect` -> a v1 Taint."""
    head, _, effect = text.rpartition(":")
    key, _, value = head.partition("=")
    taint: JSON = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def node_object(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    taints: list[str] | None = None,
    unschedulable: bool = False,
    conditions: Mapping[str, str] | None = None,
    gpu_capacity: int = 8,
    gpu_allocatable: int | None = None,
) -> JSON:
    """A v1 Node (status as the kubelet and device plugin report it)."""
    spec: JSON = {"taints": [parse_taint(t) for t in taints or []]}
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name} | dict(labels or {}),
            "annotations": dict(annotations or {}),
            "creationTimestamp": stamp(EPOCH),
        },
        "spec": spec,
        "status": node_status(
            conditions or {"Ready": "True"},
            capacity=gpu_capacity,
            allocatable=gpu_capacity if gpu_allocatable is None else gpu_allocatable,
        ),
    }


def node_status(conditions: Mapping[str, str], *, capacity: int, allocatable: int) -> JSON:
    resources = {"cpu": "96", "memory": "2113567460Ki", "pods": "110"}
    return {
        "conditions": [
            {
                "type": kind,
                "status": value,
                "reason": f"Kubelet{kind}" if value == "True" else f"Kubelet{kind}Not",
                "lastHeartbeatTime": stamp(EPOCH),
                "lastTransitionTime": stamp(EPOCH),
            }
            for kind, value in conditions.items()
        ],
        "capacity": resources | {"nvidia.com/gpu": str(capacity)},
        "allocatable": resources | {"nvidia.com/gpu": str(allocatable)},
    }


def controller_taints(node: JSON) -> list[JSON]:
    """The taints the node lifecycle controller keeps on a node: unschedulable when cordoned,
    not-ready / unreachable (NoSchedule and NoExecute) from the Ready condition."""
    taints: list[JSON] = []
    if node["spec"].get("unschedulable"):
        taints.append({"key": CONTROLLER_TAINTS[0], "effect": "NoSchedule"})
    ready = {c["type"]: c["status"] for c in node["status"].get("conditions", [])}.get("Ready")
    if ready in ("False", "Unknown"):
        kind = "not-ready" if ready == "False" else "unreachable"
        for effect in ("NoSchedule", "NoExecute"):
            taints.append({"key": f"node.kubernetes.io/{kind}", "effect": effect})
    return taints


def reconcile_taints(node: JSON) -> None:
    """Act as the node lifecycle controller: keep others' taints, set the controller's own."""
    own = [t for t in node["spec"].get("taints") or [] if t["key"] not in CONTROLLER_TAINTS]
    node["spec"]["taints"] = controller_taints(node) + own


def pod_object(
    name: str,
    namespace: str,
    *,
    node: str | None,
    phase: str = "Running",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner: tuple[str, str] | None = None,
    containers: tuple[str, ...] = ("main",),
    gpus: int = 0,
    restarts: int = 0,
    last_terminated_reason: str | None = None,
    ready: bool = True,
) -> JSON:
    """A v1 Pod; `owner` is the controller (kind, name)."""
    metadata: JSON = {
        "name": name,
        "namespace": namespace,
        "labels": dict(labels or {}),
        "annotations": dict(annotations or {}),
        "creationTimestamp": stamp(EPOCH),
    }
    if owner is not None:
        kind, owner_name = owner
        metadata["ownerReferences"] = [
            {
                "apiVersion": "batch/v1" if kind == "Job" else "apps/v1",
                "kind": kind,
                "name": owner_name,
                "uid": f"uid-{kind.lower()}-{owner_name}",
                "controller": True,
            }
        ]
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    spec: JSON = {
        "containers": [
            {"name": c, "image": "registry.example/app:1", "resources": {"limits": limits}}
            for c in containers
        ],
        "restartPolicy": "Always",
    }
    if node is not None:
        spec["nodeName"] = node
    statuses = []
    for c in containers:
        status: JSON = {"name": c, "ready": ready, "restartCount": restarts, "image": "app:1"}
        status["imageID"] = ""
        if last_terminated_reason:
            terminated = {"reason": last_terminated_reason, "exitCode": 137}
            status["lastState"] = {"terminated": terminated}
        statuses.append(status)
    return {
        "metadata": metadata,
        "spec": spec,
        "status": {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": statuses,
        },
    }


def event_object(
    *,
    name: str,
    namespace: str,
    kind: str,
    object_name: str,
    object_namespace: str,
    reason: str,
    message: str,
    at: datetime,
    type: str = "Normal",
) -> JSON:
    """A core/v1 Event (no eventTime: the kubelet and node controller's legacy events)."""
    involved: JSON = {"kind": kind, "name": object_name, "apiVersion": "v1"}
    if object_namespace:
        involved["namespace"] = object_namespace
    return {
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": stamp(at)},
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "type": type,
        "count": 1,
        "firstTimestamp": stamp(at),
        "lastTimestamp": stamp(at),
        "source": {"component": "kubelet" if kind == "Pod" else "node-controller"},
    }


def pdb_object(
    name: str,
    namespace: str,
    *,
    match_labels: Mapping[str, str],
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
) -> JSON:
    """A policy/v1 PodDisruptionBudget (exactly one of minAvailable / maxUnavailable)."""
    if (min_available is None) == (max_unavailable is None):
        raise ValueError("a PodDisruptionBudget takes exactly one of minAvailable/maxUnavailable")
    spec: JSON = {"selector": {"matchLabels": dict(match_labels)}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    else:
        spec["maxUnavailable"] = max_unavailable
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def health_check_object(
    name: str, *, selector: JSON | None = None, pause_requests: list[str] | None = None
) -> JSON:
    """A medik8s NodeHealthCheck as the API serves it (cluster-scoped: no namespace)."""
    spec: JSON = {
        "selector": copy.deepcopy(selector) if selector is not None else {},
        "minHealthy": "51%",
        "remediationTemplate": {
            "apiVersion": "self-node-remediation.medik8s.io/v1alpha1",
            "kind": "SelfNodeRemediationTemplate",
            "namespace": "medik8s",
            "name": "self-node-remediation-automatic-strategy-template",
        },
        "unhealthyConditions": [
            {"type": "Ready", "status": "False", "duration": "300s"},
            {"type": "Ready", "status": "Unknown", "duration": "300s"},
        ],
    }
    if pause_requests:
        spec["pauseRequests"] = list(pause_requests)
    return {
        "apiVersion": NHC_API_VERSION,
        "kind": "NodeHealthCheck",
        "metadata": {"name": name, "creationTimestamp": stamp(EPOCH)},
        "spec": spec,
    }


def matches_labels(selector: Mapping[str, str | None], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def pod_healthy(pod: JSON) -> bool:
    """Running and Ready, as the disruption controller counts a healthy pod."""
    ready = {c["type"]: c["status"] for c in pod["status"].get("conditions", [])}.get("Ready")
    return pod["status"].get("phase") == "Running" and ready == "True"


def _scaled(value: int | str, total: int, *, round_up: bool) -> int:
    if isinstance(value, int):
        return value
    percent = int(str(value).rstrip("%")) * total / 100
    return math.ceil(percent) if round_up else math.floor(percent)


def budget(pdb: JSON, pods: list[JSON]) -> tuple[int, int, int]:
    """(disruptionsAllowed, desiredHealthy, currentHealthy) over the PDB's matching pods, as
    the disruption controller computes them. Expected pods stand in for the controllers'
    scale: the most matching pods ever seen (an evicted pod's controller replaces it)."""
    spec, status = pdb["spec"], pdb.setdefault("status", {})
    expected = max(len(pods), int(status.get("expectedPods", 0)))
    status["expectedPods"] = expected
    healthy = sum(1 for p in pods if pod_healthy(p))
    if "minAvailable" in spec:
        desired = _scaled(spec["minAvailable"], expected, round_up=True)
    else:
        desired = expected - _scaled(spec["maxUnavailable"], expected, round_up=True)
    return max(0, healthy - desired), desired, healthy


# --- patches ---------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: maps merge, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class PatchError(ValueError):
    """A JSON patch that cannot apply (a failed `test`, a missing path)."""


def json_patch(target: JSON, operations: list[JSON]) -> JSON:
    """RFC 6902 JSON patch with the operations the bot could send (add/remove/replace/test)."""
    doc = copy.deepcopy(target)
    for op in operations:
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]
        ]
        holder: Any = doc
        for part in parents:
            holder = holder[int(part)] if isinstance(holder, list) else holder.setdefault(part, {})
        kind = op["op"]
        if kind == "test":
            current = holder[int(last)] if isinstance(holder, list) else holder.get(last)
            if current != op["value"]:
                raise PatchError(f"testing value {op['path']} failed")
        elif kind == "remove":
            if isinstance(holder, list):
                holder.pop(int(last))
            elif last not in holder:
                raise PatchError(f"unable to remove nonexistent key: {last}: missing value")
            else:
                del holder[last]
        elif kind in ("add", "replace"):
            if isinstance(holder, list):
                index = len(holder) if last == "-" else int(last)
                if kind == "add":
                    holder.insert(index, op["value"])
                else:
                    holder[index] = op["value"]
            else:
                holder[last] = op["value"]
        else:
            raise PatchError(f"Unexpected kind: {kind}")
    return doc


# --- selectors -------------------------------------------------------------------------------


def field_value(obj: JSON, path: str) -> str:
    """A field's value as field selectors compare it (missing -> "")."""
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if path == "source" and isinstance(obj.get("source"), dict):
        value = obj["source"].get("component")
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def parse_selector(text: str, *, supported: tuple[str, ...]) -> list[tuple[str, str, bool]]:
    """`a=b,c!=d` -> [(field, value, equal)]. Raises ValueError naming an unsupported field."""
    terms = []
    for term in filter(None, text.split(",")):
        equal = "!=" not in term
        field, _, value = term.partition("!=" if not equal else "=")
        if field.endswith("="):  # `a==b`
            field = field[:-1]
        value = value.lstrip("=")
        if field not in supported:
            raise ValueError(f'field label not supported: {field}')
        terms.append((field, value, equal))
    return terms


def selected(obj: JSON, terms: list[tuple[str, str, bool]]) -> bool:
    return all((field_value(obj, f) == v) == eq for f, v, eq in terms)


def parse_label_selector(text: str) -> dict[str, str | None]:
    """Equality-based label selectors (`a=b,c=d`) and absence (`!e`: None)."""
    found: dict[str, str | None] = {}
    for term in filter(None, text.split(",")):
        if term.startswith("!"):
            found[term[1:]] = None
        else:
            key, _, value = term.partition("=")
            found[key.rstrip("=")] = value
    return found
