"""Gang-aware impact of taking a node out of service, for the approval message.

Before a cordon or drain the approver sees which jobs lose ranks with the node, how many, how
old their last checkpoint is (where the job metrics export it), whether spare nodes of the same
pool could take the ranks, the GPU-hours at risk, and a recommendation with its reason. A gang
job (all ranks or none) that loses one rank stops; with no spare to restart on, draining now
only turns a slow job into a stopped one.

`read_impact` reads the cluster and telemetry ports; `assess` and `render_impact` are pure.
The impact is advice: the safety limits are checked when the action runs, not here.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from integrations.cluster import Cluster, NodeInfo, PodInfo
from integrations.errors import TelemetryUnavailable
from integrations.telemetry import SignalQuery, Telemetry

CHECKPOINT_SIGNAL = "job.checkpoint_age"
"""Seconds since each job's last completed checkpoint (docs/signals.md, job-metrics contract)."""
RANKS_SIGNAL = "job.nodes"
"""One sample per node a job's ranks report from."""
FRESH_CHECKPOINT = timedelta(minutes=10)
"""A checkpoint younger than this makes a restart cheap enough to drain at once."""
MAX_SPARE_PROBES = 32
"""Same-pool candidates whose pods are read to find free GPUs (bounded on large pools)."""
POOL_READ = MAX_SPARE_PROBES + 1
"""Pool nodes read for spare candidates (the first by name; one may be the node itself): every
candidate read can be probed, so a count of free GPUs covers exactly the nodes read."""
IMPACT_ACTIONS = frozenset({"cordon", "drain"})

DRAIN_NOW = "drain now"
CORDON_AND_WAIT = "cordon and let it checkpoint"


@dataclass(frozen=True)
class JobImpact:
    """One job with ranks on the node."""

    job: str
    ranks_lost: int
    """The job's pods (ranks) on the node."""
    ranks_total: int
    """The job's ranks across the cluster (from the job metrics; at least `ranks_lost`)."""
    gpus_lost: int
    gpus_total: int
    checkpoint_age_s: float | None
    """None: the job metrics do not export it."""
    gpu_hours_at_risk: float | None
    """Work since the last checkpoint that a stop now would redo: the job's GPUs x its age."""


@dataclass(frozen=True)
class Impact:
    node: str
    pool: str
    ready: bool
    jobs: tuple[JobImpact, ...]
    spares: tuple[tuple[str, int], ...]
    """Same-pool nodes that are Ready, schedulable and have free GPUs: (name, free GPUs)."""
    gpus_needed: int
    gpu_hours_at_risk: float | None
    recommendation: str
    reason: str
    pool_read: str = ""
    """How much of the pool was searched for spares when not all of it ("33 of 4,096 nodes
    read");
    "" when every node of the pool was read."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe, for the approval payload (checkpointed run state)."""
        data = asdict(self)
        data["jobs"] = [asdict(job) for job in self.jobs]
        data["spares"] = [{"node": name, "free_gpus": free} for name, free in self.spares]
        return data


class JobReadings:
    """The job signals the impact reads, each (signal, job) read once per run however many
    nodes of the job are proposed; `queries` counts what reached the backend."""

    def __init__(
        self,
        telemetry: Telemetry,
        signals: Collection[str],
        window: timedelta = timedelta(minutes=5),
    ) -> None:
        self.telemetry, self.signals, self.window = telemetry, frozenset(signals), window
        self.queries = 0
        self._seen: dict[tuple[str, str], list[tuple[str, float]]] = {}

    def read(self, signal: str, job: str) -> list[tuple[str, float]]:
        """(node, value) of a job signal; [] when the catalog lacks it or the backend is down."""
        key = (signal, job)
        if key not in self._seen:
            self._seen[key] = self._fetch(signal, job)
        return self._seen[key]

    def _fetch(self, signal: str, job: str) -> list[tuple[str, float]]:
        if signal not in self.signals:
            return []
        query = SignalQuery(signal=signal, window=self.window, workload=job)
        try:
            result = self.telemetry.read(query)
        except TelemetryUnavailable:
            return []
        self.queries += result.queries
        return [(s.node, s.value) for s in result.samples]


def read_impact(
    *, cluster: Cluster, readings: JobReadings, node: str, pool_label: str
) -> Impact:
    """What taking `node` out of service costs its jobs, read from the cluster and telemetry.
    Spares are looked for among the pool's first `POOL_READ` nodes (one bounded read by
    label, never the pool or the fleet); the text says so when the pool has more."""
    (target,) = cluster.nodes([node])
    pool = target.labels.get(pool_label, "(unlabelled)")
    # None: the label is absent (the unlabelled pool).
    members = cluster.first_nodes({pool_label: target.labels.get(pool_label)}, limit=POOL_READ)
    jobs = [
        _job_impact(readings, job, pods)
        for job, pods in sorted(_jobs_on(cluster.pods_on(node)).items())
    ]
    needed = sum(j.gpus_lost for j in jobs)
    candidates = [
        n
        for n in members.nodes
        if n.name != node
        and n.labels.get(pool_label, "(unlabelled)") == pool
        and n.ready
        and not n.unschedulable
        and n.gpu_allocatable > 0
    ]
    spares = _spares(cluster, candidates, needed=max(needed, 1))
    read = members.describe() if members.partial else ""
    return assess(target, pool=pool, jobs=jobs, spares=spares, gpus_needed=needed, pool_read=read)


def _jobs_on(pods: Sequence[PodInfo]) -> dict[str, list[PodInfo]]:
    """Running GPU pods of jobs (not DaemonSets such as the device plugin), by job."""
    jobs: dict[str, list[PodInfo]] = {}
    for pod in pods:
        running = pod.gpus > 0 and pod.phase == "Running" and pod.owner_kind != "DaemonSet"
        if pod.workload and running:
            jobs.setdefault(pod.workload, []).append(pod)
    return jobs


def _job_impact(readings: JobReadings, job: str, pods: Sequence[PodInfo]) -> JobImpact:
    gpus_lost = sum(p.gpus for p in pods)
    per_rank = max(gpus_lost // max(len(pods), 1), 1)
    # One query: the checkpoint age has one sample per node the job reports from, so it also
    # counts the ranks; job.nodes is read only where the age is not exported.
    ages = readings.read(CHECKPOINT_SIGNAL, job)
    reporting = ages or readings.read(RANKS_SIGNAL, job)
    ranks_total = max(len({node for node, _ in reporting}), len(pods))
    age = max(value for _, value in ages) if ages else None  # the oldest view: conservative
    gpus_total = max(ranks_total * per_rank, gpus_lost)
    at_risk = None if age is None else round(gpus_total * age / 3600, 1)
    return JobImpact(
        job=job,
        ranks_lost=len(pods),
        ranks_total=ranks_total,
        gpus_lost=gpus_lost,
        gpus_total=gpus_total,
        checkpoint_age_s=age,
        gpu_hours_at_risk=at_risk,
    )


def _spares(
    cluster: Cluster, candidates: Sequence[NodeInfo], *, needed: int
) -> list[tuple[str, int]]:
    """Candidates with free GPUs (allocatable minus what running pods hold), read until they
    can hold `needed` GPUs or MAX_SPARE_PROBES were read."""
    found: list[tuple[str, int]] = []
    for node in candidates[:MAX_SPARE_PROBES]:
        held = sum(p.gpus for p in cluster.pods_on(node.name) if p.phase in ("Running", "Pending"))
        free = node.gpu_allocatable - held
        if free > 0:
            found.append((node.name, free))
        if sum(f for _, f in found) >= needed:
            break
    return found


def assess(
    node: NodeInfo,
    *,
    pool: str,
    jobs: Sequence[JobImpact],
    spares: Sequence[tuple[str, int]],
    gpus_needed: int,
    pool_read: str = "",
) -> Impact:
    """The recommendation and its reason, from what was read (pure). `pool_read`: how much of
    the pool the spares were looked for in, when not all of it."""
    risks = [j.gpu_hours_at_risk for j in jobs]
    at_risk = None if not jobs or None in risks else sum(r or 0.0 for r in risks)
    recommendation, reason = _recommend(node, pool, jobs, spares, gpus_needed, pool_read)
    return Impact(
        node=node.name,
        pool=pool,
        ready=node.ready,
        jobs=tuple(jobs),
        spares=tuple(spares),
        gpus_needed=gpus_needed,
        gpu_hours_at_risk=at_risk,
        recommendation=recommendation,
        reason=reason,
        pool_read=pool_read,
    )


def _recommend(
    node: NodeInfo,
    pool: str,
    jobs: Sequence[JobImpact],
    spares: Sequence[tuple[str, int]],
    needed: int,
    pool_read: str,
) -> tuple[str, str]:
    if not jobs:
        return DRAIN_NOW, f"no running job has ranks on {node.name}: nothing is lost"
    names = ", ".join(j.job for j in jobs)
    if not node.ready:
        return DRAIN_NOW, f"{node.name} is NotReady: the ranks of {names} are lost already"
    free = sum(f for _, f in spares)
    if free < needed:
        where = f" on {pool_read}" if pool_read else ""
        return CORDON_AND_WAIT, (
            f"no spare capacity in pool {pool} ({free} free GPUs{where}, {names} needs "
            f"{needed}): "
            "draining now stops the job with nowhere to restart; cordon keeps new work off "
            "while it runs to its next checkpoint"
        )
    ages = [j.checkpoint_age_s for j in jobs]
    if None in ages:
        return CORDON_AND_WAIT, (
            f"the checkpoint age of {names} is unknown (no {CHECKPOINT_SIGNAL} metric): "
            "cordon now and drain once the owners confirm a fresh checkpoint"
        )
    oldest = max(a or 0.0 for a in ages)
    if oldest <= FRESH_CHECKPOINT.total_seconds():
        return DRAIN_NOW, (
            f"last checkpoint {format_age(oldest)} ago and spare nodes in pool {pool}: the "
            "job restarts on a spare at little cost"
        )
    return CORDON_AND_WAIT, (
        f"last checkpoint {format_age(oldest)} ago: draining now redoes that work; cordon, "
        "let it checkpoint, then drain; spares are ready"
    )


def format_age(seconds: float) -> str:
    minutes = seconds / 60
    if minutes < 1:
        return f"{seconds:.0f} s"
    if minutes < 120:
        return f"{minutes:.0f} min"
    return f"{minutes / 60:.1f} h"


def render_impact(impact: Mapping[str, Any] | None) -> list[str]:
    """The impact as plain lines for Slack and the terminal (pure; [] when there is none)."""
    if not impact:
        return []
    if impact.get("error"):
        return [f"Impact: unknown ({impact['error']})"]
    lines = []
    for job in impact.get("jobs", []):
        age = job.get("checkpoint_age_s")
        ckpt = f"last checkpoint {format_age(age)} ago" if age is not None else (
            "checkpoint age not exported"
        )
        risk = job.get("gpu_hours_at_risk")
        hours = f"{risk:g} GPU-hours at risk" if risk is not None else "GPU-hours at risk unknown"
        lines.append(
            f"Impact: {job['job']} loses {job['ranks_lost']} of {job['ranks_total']} ranks "
            f"({job['gpus_lost']} of {job['gpus_total']} GPUs); {ckpt}; {hours}"
        )
    if not impact.get("jobs"):
        lines.append(f"Impact: no running job has ranks on {impact['node']}")
    spares = impact.get("spares", [])
    shown = ", ".join(f"{s['node']} ({s['free_gpus']} free GPUs)" for s in spares[:4])
    read = impact.get("pool_read") or ""
    lines.append(
        f"Spares in pool {impact['pool']}: {shown}"
        + (" ..." if len(spares) > 4 else "")
        + (f" ({read})" if read else "")
        if spares
        else f"Spares in pool {impact['pool']}: none with free GPUs"
        + (f" ({read})" if read else "")
    )
    lines.append(f"Recommendation: {impact['recommendation']} ({impact['reason']})")
    return lines


def approval_notes(payload: Mapping[str, Any]) -> list[str]:
    """Lines the CLI shows under the proposals: each cordon/drain node's impact once, and the
    policy overrides the runbook made (pure)."""
    lines: list[str] = []
    seen: set[str] = set()
    for proposal in payload.get("proposals", []):
        impact = proposal.get("impact")
        if impact and impact.get("node") not in seen:
            seen.add(str(impact.get("node")))
            lines += render_impact(impact)
    policy = payload.get("policy") or {}
    lines += [f"Policy: {text}" for text in policy.get("overrides", [])]
    return lines
