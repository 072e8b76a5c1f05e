"""slurmrestd answers -> the port's records (pure). Tolerant of the REST versions: 22.05's
`state: "mixed"` + `state_flags: ["DRAIN"]` and 24.11's `state: ["MIXED", "DRAIN"]`; times as
epoch numbers or `{set, infinite, number}`.

A node's Slurm state becomes `ready` (not DOWN, not NOT_RESPONDING, not FAIL), `unschedulable`
(the DRAIN flag: draining or drained; decided from the flag, never from the reason text, which
24.11 keeps after a RESUME) and `conditions` (`Ready`, plus one per flag). Partitions, features
and GRES become labels (pool = partition; topology domains from features by a configured
prefix map). The drain reason becomes annotations: the bot's own markers (kept in the node's
`comment` as JSON) and, for a drain that is not the bot's, `slurm.schedmd.com/cordoned-by`.
A job becomes a `PodInfo` (name = job id, namespace = partition, workload = job name) with the
GPUs it holds on that node (`gres_detail`) and its user, requeue flag and start time as labels.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from integrations.cluster import ClusterEvent, NodeInfo, PodInfo
from integrations.slurm.hostlists import expand_hostlist, gres_indices

PREFIX = "slurm.schedmd.com"
PARTITION = f"{PREFIX}/partition"
STATE = f"{PREFIX}/state"
DRAINED_BY = f"{PREFIX}/cordoned-by"  # read by coexistence as a foreign owner
DRAIN_REASON = f"{PREFIX}/reason"
JOB_USER, JOB_REQUEUE = f"{PREFIX}/user", f"{PREFIX}/requeue"
JOB_START, JOB_GPUS = f"{PREFIX}/start-time", f"{PREFIX}/gpu-indices"
JOB_NODES, JOB_STATE = f"{PREFIX}/nodes", f"{PREFIX}/job-state"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable:NoSchedule"
NOT_READY = frozenset({"DOWN", "NOT_RESPONDING", "FAIL", "FUTURE", "UNKNOWN", "INVAL"})


@dataclass(frozen=True)
class Labelling:
    """How Slurm facts become node labels: `domain_features` maps a feature prefix to the
    label it fills (`{"rack-": "gpu-oncall.io/rack"}`: feature `rack-07` -> rack=rack-07)."""

    domain_features: Mapping[str, str] = field(default_factory=dict)
    reason_prefix: str = "gpu-oncall:"
    markers_prefix: str = "gpu-oncall.io"
    bot: str = "gpu-oncall"  # the `cordoned-by` value of the bot's own drains


def epoch(value: Any) -> datetime | None:
    """An epoch number or 24.11's `{set, infinite, number}` -> UTC, or None when unset."""
    if isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if not isinstance(value, int | float) or value <= 0:
        return None
    return datetime.fromtimestamp(value, tz=UTC)


def node_flags(raw: Mapping[str, Any]) -> tuple[str, ...]:
    """The base state then its flags, upper case: ("MIXED", "DRAIN")."""
    state = raw.get("state")
    words = [state] if isinstance(state, str) else list(state or [])
    words += list(raw.get("state_flags") or [])
    seen: list[str] = []
    for word in words:
        upper = str(word).upper()
        if upper and upper not in seen:
            seen.append(upper)
    return tuple(seen)


def node_info(raw: Mapping[str, Any], labelling: Labelling) -> NodeInfo:
    flags = node_flags(raw)
    gres = str(raw.get("gres") or "")
    gpus = gpu_count(gres)
    drained = "DRAIN" in flags
    ready = not (set(flags) & NOT_READY)
    conditions = {"Ready": "True" if ready else "Unknown" if "NOT_RESPONDING" in flags else "False"}
    conditions |= {_camel(flag): "True" for flag in flags[1:]}
    drained_gpus = gpu_count(str(raw.get("gres_drained") or ""))
    return NodeInfo(
        name=str(raw["name"]),
        ready=ready,
        unschedulable=drained,
        conditions=conditions,
        labels=node_labels(raw, labelling, flags=flags),
        taints=(UNSCHEDULABLE,) if drained else (),  # a drained node is cordoned
        gpu_capacity=gpus,
        gpu_allocatable=0 if drained else max(0, gpus - drained_gpus),
        annotations=node_annotations(raw, labelling, drained=drained),
    )


def node_labels(
    raw: Mapping[str, Any], labelling: Labelling, *, flags: Sequence[str]
) -> dict[str, str]:
    partitions = [str(p) for p in raw.get("partitions") or []]
    features = _features(raw.get("active_features") or raw.get("features"))
    labels = {"kubernetes.io/hostname": str(raw["name"]), STATE: "-".join(flags).lower()}
    if partitions:
        labels[PARTITION] = partitions[0]
        labels[f"{PREFIX}/partitions"] = ".".join(partitions)
    for feature in features:
        labels[f"{PREFIX}/feature.{feature}"] = "true"
        for prefix, label in labelling.domain_features.items():
            if feature.startswith(prefix):
                labels[label] = feature
    name, kind, count = _gres_parts(str(raw.get("gres") or ""))
    if name == "gpu":
        labels["nvidia.com/gpu.count"] = str(count)
        if kind:
            labels["nvidia.com/gpu.product"] = kind
    return labels


def node_annotations(
    raw: Mapping[str, Any], labelling: Labelling, *, drained: bool
) -> dict[str, str]:
    """The bot's markers from the comment; who holds a drain from its reason. The bot owns a
    drain only while the DRAIN flag is set and the reason starts with its prefix (NHC writes
    `NHC:`; admins write anything): a foreign drain drops the stored `cordoned-by`."""
    annotations = parse_markers(str(raw.get("comment") or ""))
    reason = str(raw.get("reason") or "")
    cordoned_by = f"{labelling.markers_prefix}/cordoned-by"
    if reason:
        annotations[DRAIN_REASON] = reason
    if drained and reason.startswith(labelling.reason_prefix):
        annotations.setdefault(cordoned_by, labelling.bot)
    if drained and not reason.startswith(labelling.reason_prefix):
        annotations.pop(cordoned_by, None)
        who = str(raw.get("reason_set_by_user") or "unknown")
        at = epoch(raw.get("reason_changed_at"))
        when = f" at {at:%Y-%m-%dT%H:%M:%SZ}" if at else ""
        annotations[DRAINED_BY] = f"{reason or 'no reason'} (by {who}{when})"
    return annotations


def parse_markers(comment: str) -> dict[str, str]:
    """The bot's markers kept in the node comment (a JSON object); {} for any other comment."""
    try:
        data = json.loads(comment) if comment.startswith("{") else {}
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): str(v) for k, v in data.items() if v is not None}


def render_markers(markers: Mapping[str, str]) -> str:
    return json.dumps(dict(sorted(markers.items())), separators=(",", ":")) if markers else ""


def job_info(raw: Mapping[str, Any], node: str) -> PodInfo:
    """One job as seen from `node`: the GPUs it holds there come from `gres_detail`, whose
    entries follow the job's expanded node list."""
    nodes = expand_hostlist(str(raw.get("nodes") or ""))
    details = list(raw.get("gres_detail") or [])
    indices = gres_indices(str(details[nodes.index(node)])) if node in nodes and details else []
    start = epoch(raw.get("start_time"))
    state = job_state(raw)
    labels = {
        JOB_USER: str(raw.get("user_name") or raw.get("user_id") or ""),
        JOB_REQUEUE: "true" if raw.get("requeue") else "false",
        JOB_NODES: str(raw.get("nodes") or ""),
        JOB_STATE: state.lower(),
        JOB_GPUS: "-".join(str(i) for i in indices),
    }
    if start is not None:
        labels[JOB_START] = start.strftime("%Y-%m-%dT%H:%M:%SZ")
    return PodInfo(
        name=str(raw["job_id"]),
        namespace=str(raw.get("partition") or ""),
        node=node,
        phase={"RUNNING": "Running", "PENDING": "Pending"}.get(state, "Unknown"),
        labels=labels,
        workload=str(raw.get("name") or "") or None,
        restarts=int(raw.get("restart_cnt") or 0),
        gpus=len(indices),
        owner_kind="SlurmJob",
    )


def job_state(raw: Mapping[str, Any]) -> str:
    state = raw.get("job_state")
    return str(state[0] if isinstance(state, list) and state else state or "").upper()


def reason_event(raw: Mapping[str, Any]) -> ClusterEvent | None:
    """The node's current reason (what `sinfo -R` shows) as an event, when it has one."""
    reason, at = str(raw.get("reason") or ""), epoch(raw.get("reason_changed_at"))
    if not reason or at is None:
        return None
    who = str(raw.get("reason_set_by_user") or "unknown")
    flags = "+".join(node_flags(raw))
    return ClusterEvent(
        at=at,
        kind="Node",
        name=str(raw["name"]),
        reason="SlurmReason",
        message=f"{reason} (set by {who}; state {flags})",
        type="Warning" if set(node_flags(raw)) & (NOT_READY | {"DRAIN"}) else "Normal",
    )


def gpu_count(gres: str) -> int:
    """GPUs in a GRES string (`gpu:h100:8`, `gpu:8(S:0-1)`, `gpu:h100:8,shard:4`)."""
    return sum(c for name, _, c in map(_gres_parts, gres.split(",")) if name == "gpu")


def _gres_parts(entry: str) -> tuple[str, str, int]:
    entry = entry.split("(", 1)[0].strip()
    parts = entry.split(":")
    if not parts or not parts[-1].isdigit():
        return (parts[0] if parts else "", "", 0)
    kind = parts[1] if len(parts) == 3 else ""
    return parts[0], kind, int(parts[-1])


def _features(value: Any) -> list[str]:
    items = value.split(",") if isinstance(value, str) else list(value or [])
    return [str(f).strip() for f in items if str(f).strip()]


def _camel(flag: str) -> str:
    return "".join(word.capitalize() for word in flag.lower().split("_"))
