"""Dry run of proposed actions from the triage message: what each would do right now, read from
the cluster and changing nothing. The approval stays open.

Supported for the node actions whose effect the Cluster port can read ahead (cordon, uncordon,
drain); for the others the reply says what approving would do. Gang-aware: a drain preview
names the jobs that would lose ranks with the node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.slack import messages
from bot.slack.kit import Line
from integrations.cluster import Cluster, PodInfo
from integrations.errors import IntegrationError, NodeNotFound

PREVIEWABLE = frozenset({"cordon", "uncordon", "drain"})
"""Actions whose triage message offers a Dry run button."""


def preview(cluster: Cluster, proposal: Mapping[str, Any]) -> Line:
    """What `proposal` would do now, as one line."""
    action, target = str(proposal.get("action")), str(proposal.get("target"))
    if action not in PREVIEWABLE:
        return Line("?", messages.no_dry_run(action, str(proposal.get("description"))))
    try:
        node = cluster.nodes([target])[0]
        pods = [p for p in cluster.pods_on(target) if p.phase in ("Running", "Pending")]
    except NodeNotFound:
        return Line("x", messages.preview_gone(action, target))
    except IntegrationError as exc:
        return Line("x", messages.preview_unreadable(action, target, exc))
    gang = [p for p in pods if p.gpus > 0]
    if action == "cordon":
        if node.unschedulable:
            return Line("+", messages.preview_unchanged(action, target, "cordoned"))
        return Line(".", messages.preview_cordon(target, len(pods), _jobs(gang)))
    if action == "uncordon":
        if not node.unschedulable:
            return Line("+", messages.preview_unchanged(action, target, "schedulable"))
        return Line(".", messages.preview_uncordon(target))
    if not gang:
        return Line("+", messages.preview_drain_empty(target))
    grace = dict(proposal.get("params") or {}).get("grace_seconds", 30)
    gpus = sum(p.gpus for p in gang)
    jobs = _jobs(gang, losing=True)
    return Line(
        ".", messages.preview_drain(target, pods=len(gang), gpus=gpus, grace=grace, jobs=jobs)
    )


def _jobs(pods: list[PodInfo], *, losing: bool = False) -> str:
    counts: dict[str, tuple[int, int]] = {}
    for pod in pods:
        name = pod.workload or pod.name
        n, gpus = counts.get(name, (0, 0))
        counts[name] = (n + 1, gpus + pod.gpus)
    if not counts:
        return ""
    listed = ", ".join(f"{name} ({n} pods, {g} GPUs)" for name, (n, g) in sorted(counts.items()))
    return messages.jobs_list(listed, losing=losing)
