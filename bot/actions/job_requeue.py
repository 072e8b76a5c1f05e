"""What a drain does to jobs that cannot be requeued: the drain action's `on_no_requeue` param
(`block` | `cancel`), for clusters whose workloads have a requeue flag (Slurm).

The Cluster port's `drain` has no such choice (on Kubernetes a pod is evicted or a
PodDisruptionBudget blocks it; the port never deletes past a PDB), so the param goes only to a
cluster that says it requeues jobs (`requeues_jobs = True`, the Slurm adapter); elsewhere it
has no meaning and the drain is the port's own. Without the param the cluster's setting decides
(`slurm.drain_mode`). The runbook schema checks the value (bot/engine/schema.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Protocol, cast

from integrations.cluster import Cluster, DrainReport

PARAM = "on_no_requeue"
CHOICES = ("block", "cancel")


class RequeueingCluster(Protocol):
    requeues_jobs: bool

    def drain(
        self, node: str, *, grace: timedelta, on_no_requeue: Any = None
    ) -> DrainReport: ...


def drain_node(
    cluster: Cluster, node: str, *, grace: timedelta, params: Mapping[str, Any]
) -> DrainReport:
    """The port's drain, with the runbook's `on_no_requeue` for a cluster that requeues jobs."""
    choice = params.get(PARAM)
    if choice is None or not getattr(cluster, "requeues_jobs", False):
        return cluster.drain(node, grace=grace)
    if choice not in CHOICES:  # the schema refuses it at load; a hand-made call may not
        raise ValueError(f"{PARAM} must be one of {', '.join(CHOICES)} (found {choice!r})")
    return cast(RequeueingCluster, cluster).drain(node, grace=grace, on_no_requeue=choice)
