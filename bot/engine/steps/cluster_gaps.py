"""A cluster read that failed is an unavailable input, exactly like a silent telemetry signal.

A gather step whose Cluster call raised (a kubelet that cannot serve the node-log query, RBAC,
a 5xx) records `unavailable: cluster`, `missing: true` and `error: "<what> unavailable: <why>"`
instead of failing the run (see steps.gather). Checks that read it are *unknown* (steps.check
lists the error as a missing input), so the layer it would have ruled out is not ruled out,
and the verdict's notes say which read failed and why. An unknown node is still an error: it
is bad input, not a gap.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from integrations.errors import ClusterError, ClusterForbidden, ReadUnsupported

#: What each cluster read is called in a verdict.
READ_NAMES = {
    "node": "node object",
    "pods": "pods on the node",
    "events": "node events",
    "node_logs": "kernel log",
    "pod_logs": "pod logs",
}
_FALLBACKS = {
    "node_logs": "rely on the XID gauge, node events and the device plugin's allocatable count",
    "pod_logs": "rely on the workload's metrics",
    "events": "rely on the node's conditions",
}


def unavailable_read(read: str, exc: ClusterError) -> dict[str, Any]:
    """The gather output of a cluster read that raised `exc`."""
    what = READ_NAMES.get(read, read)
    why = str(exc)
    if isinstance(exc, ClusterForbidden):
        why = f"the bot's identity may not {exc.verb} {exc.resource} (RBAC)"
    elif isinstance(exc, ReadUnsupported):
        pass  # the backend says why in its own words
    elif read == "node_logs":
        why = f"the kubelet's node-log query is disabled or unreachable (NodeLogQuery): {why}"
    fallback = _FALLBACKS.get(read)
    hint = f"; {fallback}" if fallback else ""
    return {"unavailable": "cluster", "missing": True, "error": f"{what} unavailable: {why}{hint}"}


def cluster_gaps(steps: Mapping[str, Any]) -> list[str]:
    """The error of every cluster read that failed in this run, by step id."""
    return [
        str(data["error"])
        for _, data in sorted(steps.items())
        if isinstance(data, Mapping)
        and data.get("kind") == "cluster"
        and data.get("unavailable")
        and data.get("error")
    ]
