"""SlurmCluster: the Cluster port on a Slurm cluster (slurmrestd, plus `scontrol` where the
served REST version lacks the call). With `integrations.slurm.client` and `.scontrol`, the only
code that talks to Slurm.

The verbs in Slurm terms: cordon = DRAIN with a reason that marks ownership (`gpu-oncall:
INC-42: ...`), uncordon = RESUME; drain = cordon, then requeue the node's jobs that allow it
(`scontrol requeue`; no REST version has requeue) or cancel them (`drain_mode`), a job already
gone being "already done"; pods = the jobs whose host list includes the node. The bot's
markers (the Kubernetes adapter's annotations) live in the node's `comment` as JSON, so a
person's RESUME is still recognised after 22.05 clears the reason. Taints have no Slurm meaning
and are refused; kernel logs need the node agent (`node_logs` answers "" and says so in the
log). Reads and writes are idempotent in the port's sense: a write reads first and answers
ALREADY_DONE when there is nothing to change.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Literal

from integrations.cluster import (
    ClusterEvent,
    DrainReport,
    JobRun,
    NodeCount,
    NodeInfo,
    NodeSample,
    Outcome,
    Permission,
    PodInfo,
    RemediationPause,
    count_of,
    first_of,
    select_by_labels,
)
from integrations.errors import (
    ClusterError,
    JobNotFound,
    NodeNotFound,
    PodNotFound,
    ReadUnsupported,
)
from integrations.names import (
    check_annotation_value,
    check_job_name,
    check_label_value,
    check_namespace,
    check_node_name,
    check_pod_name,
    check_qualified_key,
    check_taint_effect,
)
from integrations.slurm.client import SlurmRest
from integrations.slurm.hostlists import expand_hostlist
from integrations.slurm.records import (
    JOB_REQUEUE,
    Labelling,
    epoch,
    job_info,
    job_state,
    node_flags,
    node_info,
    parse_markers,
    reason_event,
    render_markers,
)
from integrations.slurm.scontrol import JobGone, Scontrol
from integrations.slurm.turns import NodeTurns

logger = logging.getLogger(__name__)
DrainMode = Literal["requeue", "cancel"]
NoRequeue = Literal["block", "cancel"]
ON_NODE = frozenset({"RUNNING", "SUSPENDED", "CONFIGURING", "COMPLETING", "STOPPED"})
#: Job states a cancel still changes (COMPLETING is already ending: cancelling it is a no-op).
CANCELLABLE = frozenset({"RUNNING", "SUSPENDED", "CONFIGURING", "STOPPED", "PENDING", "REQUEUED"})
LABEL_MARK = "label:"  # labels the bot sets are kept with its markers, under this key prefix


class TaintUnsupported(ClusterError):
    """Slurm nodes have no taints; a runbook that taints needs `cordon` (DRAIN) instead."""

    retryable = False


class SlurmCluster:
    """The Cluster port over slurmrestd and scontrol."""

    requeues_jobs = True
    """Jobs carry a requeue flag: `drain` takes the runbook's `on_no_requeue`."""

    def __init__(
        self,
        rest: SlurmRest,
        scontrol: Scontrol,
        *,
        labelling: Labelling | None = None,
        drain_mode: DrainMode = "requeue",
        turns: NodeTurns | None = None,
    ) -> None:
        self.rest, self.scontrol = rest, scontrol
        self.labelling = labelling or Labelling()
        self.drain_mode: DrainMode = drain_mode
        self.turns = turns or NodeTurns(rest.url)
        """Reads of one node take turns (integrations/slurm/turns.py: overlapping ones crash
        a 22.05 slurmctld); by default within this process only."""

    def close(self) -> None:
        self.rest.http.close()

    # --- reads -----------------------------------------------------------------------------

    def nodes(
        self,
        names: Collection[str] | None = None,
        *,
        labels: Mapping[str, str | None] | None = None,
    ) -> list[NodeInfo]:
        """All nodes (one GET nodes), one named node (one GET node/N), or several (one GET
        nodes, filtered; an unknown name raises NodeNotFound naming known ones). `labels` (with
        `names` None) keeps the nodes whose labels (partition, features: `_info`) match; None is
        "absent". slurmctld has no label index: it is one GET nodes, filtered here."""
        if names is not None:
            wanted = [check_node_name(n) for n in names]
            if len(wanted) == 1:
                return [self._info(self._read_node(wanted[0]))]
        raws = self._read_nodes()
        if names is None:
            found = [self._info(raw) for raw in raws]
            if labels:
                found = select_by_labels(found, labels)
            return found
        by_name = {str(raw["name"]): raw for raw in raws}
        for name in wanted:
            if name not in by_name:
                raise NodeNotFound(name, sorted(by_name))
        return [self._info(by_name[name]) for name in wanted]

    def first_nodes(self, labels: Mapping[str, str | None], *, limit: int) -> NodeSample:
        """The first `limit` nodes `labels` selects, by name, and how many it selects.
        slurmrestd has neither a label index nor a limit on GET nodes: this is the one GET
        `nodes(labels=...)` sends, cut here (the cost is the controller's answer)."""
        return first_of(self.nodes(labels=labels), limit=limit)

    def count_nodes(self, labels: Mapping[str, str | None]) -> NodeCount:
        """The nodes `labels` selects counted: the one GET `nodes(labels=...)` sends, counted
        here (slurmrestd has no label index)."""
        return count_of(self.nodes(labels=labels))

    def pods_on(self, node: str) -> list[PodInfo]:
        """The jobs running on the node (one GET jobs; host lists expanded here, since no
        version filters by node), each with the GPUs it holds there."""
        name = check_node_name(node)
        jobs = [job_info(raw, name) for raw in self._jobs_on(name)]
        if not jobs:
            self._read_node(name)  # an unknown node is NodeNotFound, not "no jobs"
        return jobs

    def events(self, node: str, *, since: datetime) -> list[ClusterEvent]:
        """What the controller can tell without accounting (slurmdbd): the node's current
        reason with who and when (`sinfo -R`), and when its slurmd last started."""
        raw = self._read_node(check_node_name(node))
        events = []
        started = epoch(raw.get("slurmd_start_time"))
        if started is not None:
            flags = "+".join(node_flags(raw))
            events.append(
                ClusterEvent(started, "Node", str(raw["name"]), "SlurmdStarted", f"state {flags}")
            )
        reason = reason_event(raw)
        if reason is not None:
            events.append(reason)
        return sorted((e for e in events if e.at >= since), key=lambda e: e.at)

    def pod_logs(
        self,
        pod: str,
        namespace: str,
        *,
        tail_lines: int = 500,
        container: str | None = None,
        since: timedelta | None = None,
    ) -> str:
        check_pod_name(pod)
        check_namespace(namespace)
        raise ClusterError(
            f"job {pod}'s output is a file on its nodes (StdOut); slurmrestd cannot read it"
        )

    def node_logs(self, node: str, *, tail_lines: int = 500) -> str:
        """Slurm serves no kernel log: ReadUnsupported, which a run records as an unavailable
        input (the kernel layer is not ruled out; the runbook falls back to the XID gauge)."""
        self._read_node(check_node_name(node))  # an unknown node is still NodeNotFound
        raise ReadUnsupported(
            f"Slurm serves no kernel log for {node} (slurmctld and slurmrestd have no log "
            "reader; read dmesg on the node)"
        )

    def remediation_pauses(self, node: NodeInfo) -> list[RemediationPause]:
        """Slurm has no pause objects; another remediator's hold is its drain (coexistence)."""
        return []

    # --- writes ----------------------------------------------------------------------------

    def cordon(self, node: str) -> Outcome:
        """DRAIN with the bot's reason (`gpu-oncall: <incident>: <why>`, from its markers)."""
        raw = self._read_node(check_node_name(node))
        if "DRAIN" in node_flags(raw):
            return Outcome.ALREADY_DONE
        self._set_state(str(raw["name"]), "DRAIN", reason=self._reason(raw))
        return Outcome.CHANGED

    def uncordon(self, node: str) -> Outcome:
        raw = self._read_node(check_node_name(node))
        if "DRAIN" not in node_flags(raw):
            return Outcome.ALREADY_DONE
        self._set_state(str(raw["name"]), "RESUME")
        return Outcome.CHANGED

    def drain(
        self, node: str, *, grace: timedelta, on_no_requeue: NoRequeue | None = None
    ) -> DrainReport:
        """Cordon, then requeue (or cancel) each job on the node. `on_no_requeue` (the drain
        action's runbook param) says what happens to a job submitted with `--no-requeue`:
        `block` leaves it running and reports it in `blocked`, `cancel` cancels it; jobs that
        allow requeue are requeued either way. Without it, `drain_mode` (the setting) decides:
        `requeue` is `block`, `cancel` cancels every job. `grace` is Slurm's to apply: a requeue
        or cancel sends SIGTERM, then SIGKILL after `KillWait`."""
        self.cordon(node)
        done: list[str] = []
        blocked: list[str] = []
        reasons: dict[str, str] = {}
        for job in self.pods_on(node):
            key = f"{job.namespace}/{job.name}"
            action = _job_action(
                job.labels.get(JOB_REQUEUE) == "true", self.drain_mode, on_no_requeue
            )
            if action == "block":
                blocked.append(job.name)
                reasons[key] = "job does not allow requeue (--no-requeue): cancel it or wait"
                continue
            if self._requeue(job.name) if action == "requeue" else self._cancel(job.name):
                done.append(job.name)
                reasons[key] = "requeued" if action == "requeue" else "cancelled"
        outcome = Outcome.CHANGED if done else Outcome.ALREADY_DONE
        ways = sorted(set(reasons.values()) & {"requeued", "cancelled"})
        return DrainReport(
            outcome, tuple(done), (), tuple(blocked), reasons,
            moved_as=f"job(s) {' or '.join(ways or ['requeued'])}",
            blocked_as="left running (submitted with --no-requeue)",
        )  # fmt: skip

    def delete_pod(self, pod: str, namespace: str, *, grace: timedelta) -> Outcome:
        """Cancel the job (ALREADY_DONE when it has ended or is unknown); `namespace` is its
        partition, checked like a Kubernetes namespace but not needed to find it."""
        check_namespace(namespace)
        return Outcome.CHANGED if self._cancel(check_pod_name(pod)) else Outcome.ALREADY_DONE

    def annotate(self, node: str, annotations: Mapping[str, str | None]) -> Outcome:
        for key, value in annotations.items():
            check_qualified_key(key, what="annotation key")
            if value is not None:
                check_annotation_value(value)
        return self._merge_markers(check_node_name(node), annotations)

    def label(self, node: str, labels: Mapping[str, str | None]) -> Outcome:
        for key, value in labels.items():
            check_qualified_key(key, what="label key")
            if value is not None:
                check_label_value(value)
        return self._merge_markers(
            check_node_name(node), {LABEL_MARK + k: v for k, v in labels.items()}
        )

    def taint(self, node: str, *, key: str, value: str = "", effect: str = "NoSchedule") -> Outcome:
        """Refused (after the same checks as on Kubernetes, and NodeNotFound for an unknown
        node): Slurm has no taints."""
        check_qualified_key(key, what="taint key")
        check_label_value(value, what="taint value")
        check_taint_effect(effect)
        self._read_node(check_node_name(node))
        raise TaintUnsupported(
            f"taint {key} on {node}: Slurm nodes have no taints; use the `cordon` action "
            "(DRAIN with the bot's reason)"
        )

    def untaint(self, node: str, *, key: str, effect: str = "NoSchedule") -> Outcome:
        return self.taint(node, key=key, effect=effect)

    # --- node agent and permissions (Kubernetes Jobs have no Slurm meaning here) ----------

    def create_job(self, manifest: Mapping[str, Any]) -> JobRun:
        meta = manifest.get("metadata") or {}
        check_job_name(str(meta.get("name", "")))
        raise ClusterError(
            "the node agent's Kubernetes Job variant has no Slurm meaning; on Slurm "
            "agent.mode=job runs a Slurm batch job (integrations/slurm/agent.py, docs/slurm.md)"
        )

    def read_job(self, name: str, namespace: str) -> JobRun:
        raise JobNotFound(check_job_name(name), namespace)

    def job_logs(self, name: str, namespace: str, *, tail_lines: int = 20) -> str:
        raise JobNotFound(check_job_name(name), namespace)

    def check_permissions(self, needed: Collection[Permission]) -> list[Permission]:
        """Slurm has no per-call grants: every call needs an operator (see SlurmCheck)."""
        return [
            Permission(p.verb, p.resource, p.group, p.subresource, None, "see slurm check")
            for p in needed
        ]

    # --- for the Slurm node agent (integrations/slurm/agent.py) ------------------------------

    def record(self, node: str) -> dict[str, Any]:
        """The node as slurmrestd answers it (NodeNotFound for an unknown node)."""
        return self._read_node(check_node_name(node))

    def drain_reason(self, raw: Mapping[str, Any]) -> str:
        """The reason the bot writes when it drains this node (from its markers)."""
        return self._reason(raw)

    def cancel_job(self, job: str) -> bool:
        """Cancel one job; False when it had already ended."""
        return self._cancel(job)

    # --- internals -------------------------------------------------------------------------

    def _info(self, raw: Mapping[str, Any]) -> NodeInfo:
        info = node_info(raw, self.labelling)
        stored = parse_markers(str(raw.get("comment") or ""))
        labels = {k[len(LABEL_MARK) :]: v for k, v in stored.items() if k.startswith(LABEL_MARK)}
        if labels:
            notes = {k: v for k, v in info.annotations.items() if not k.startswith(LABEL_MARK)}
            info = replace(info, labels=info.labels | labels, annotations=notes)
        return info

    def _read_node(self, name: str) -> dict[str, Any]:
        with self.turns.reading(name):  # overlapping reads crash a 22.05 slurmctld
            body = self.rest.slurm(
                "GET", f"node/{name}", what=f"read node {name}", missing=lambda: NodeNotFound(name)
            )
        nodes = body.get("nodes") or []
        if not nodes:
            raise NodeNotFound(name)
        return dict(nodes[0])

    def _read_nodes(self) -> list[dict[str, Any]]:
        return [
            dict(n) for n in self.rest.slurm("GET", "nodes", what="list nodes").get("nodes") or []
        ]

    def _jobs_on(self, node: str) -> list[dict[str, Any]]:
        jobs = self.rest.slurm("GET", "jobs", what="list jobs").get("jobs") or []
        return [
            dict(job)
            for job in jobs
            if job_state(job) in ON_NODE and node in expand_hostlist(str(job.get("nodes") or ""))
        ]

    def _reason(self, raw: Mapping[str, Any]) -> str:
        markers = parse_markers(str(raw.get("comment") or ""))
        prefix = self.labelling.markers_prefix
        why = markers.get(f"{prefix}/cordon-reason") or markers.get(f"{prefix}/incident") or ""
        reason = f"{self.labelling.reason_prefix} {why}".strip()
        return " ".join(reason.split())[:250]

    def _set_state(self, node: str, state: str, *, reason: str = "") -> None:
        if self.rest.api.node_update:
            body: dict[str, Any] = {"state": [state]} | ({"reason": reason} if reason else {})
            self.rest.slurm(
                "POST",
                f"node/{node}",
                what=f"set {node} {state}",
                json=body,
                missing=lambda: NodeNotFound(node),
            )
            return
        fields = {"state": state.lower()} | ({"reason": reason} if reason else {})
        self.scontrol.update_node(node, **fields)

    def _merge_markers(self, node: str, changes: Mapping[str, str | None]) -> Outcome:
        raw = self._read_node(node)
        current = parse_markers(str(raw.get("comment") or ""))
        merged = {k: v for k, v in current.items() if k not in changes}
        merged |= {k: v for k, v in changes.items() if v is not None}
        if merged == current:
            return Outcome.ALREADY_DONE
        comment = render_markers(merged)
        if self.rest.api.node_update:
            self.rest.slurm(
                "POST",
                f"node/{node}",
                what=f"set {node}'s comment",
                json={"comment": comment},
                missing=lambda: NodeNotFound(node),
            )
        else:
            self.scontrol.update_node(node, comment=comment)
        return Outcome.CHANGED

    def _requeue(self, job: str) -> bool:
        try:
            self.scontrol.requeue(job)
        except JobGone:
            return False
        return True

    def _cancel(self, job: str) -> bool:
        """Read the job, then cancel it unless it has ended (22.05 answers 200 to a DELETE of
        a job already cancelled, so the read is what makes a repeat ALREADY_DONE)."""
        try:
            body = self.rest.slurm(
                "GET",
                f"job/{job}",
                what=f"read job {job}",
                missing=lambda: PodNotFound(job, "slurm"),
            )
            states = {job_state(raw) for raw in body.get("jobs") or []}
            if not states & CANCELLABLE:
                return False
            self.rest.slurm(
                "DELETE",
                f"job/{job}",
                what=f"cancel job {job}",
                missing=lambda: PodNotFound(job, "slurm"),
            )
        except PodNotFound:
            return False
        return True


def _job_action(
    requeueable: bool, mode: DrainMode, on_no_requeue: NoRequeue | None
) -> Literal["requeue", "cancel", "block"]:
    """What a drain does to one job: the runbook's `on_no_requeue` when given, else the
    `drain_mode` setting."""
    if on_no_requeue is None:
        if mode == "cancel":
            return "cancel"
        return "requeue" if requeueable else "block"
    return "requeue" if requeueable else on_no_requeue
