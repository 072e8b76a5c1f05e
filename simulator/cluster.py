"""SimCluster: the Cluster port over the simulated fleet (nodes, pods, events, logs, actions).

What kubectl would show for the fleet at the fleet clock's "now": node conditions and taints
follow the kube-state-metrics series, so the API view and the metrics always agree. Writes are
idempotent, journaled and counted on the fleet (`fleet.cordon_calls`, `fleet.drain_calls`).
Names are validated as `KubernetesCluster` validates them, and `deny()` plays RBAC: a denied
permission raises ClusterForbidden just as a 403 does on a real cluster.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

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
    select_by_labels,
)
from integrations.errors import ClusterForbidden, JobNotFound, NodeNotFound
from integrations.names import (
    check_annotation_value,
    check_container_name,
    check_job_name,
    check_label_value,
    check_namespace,
    check_node_name,
    check_pod_name,
    check_qualified_key,
    check_taint_effect,
)
from integrations.selectors import InvalidSelector
from simulator.fleet import Fleet
from simulator.marking import render_taints
from simulator.metrics import EntityKey

_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
_STATUS = {"true": "True", "false": "False", "unknown": "Unknown"}
#: The series a node's description reads.
_DESCRIBED_BY = (
    "kube_node_status_condition",
    "kube_node_status_capacity",
    "kube_node_status_allocatable",
)


Selector = tuple[tuple[str, str | None], ...]
KeptList = tuple[int, tuple[NodeInfo, ...], tuple[int, ...]]
"""A selector's last answer: the fleet's write count then, the nodes, where the unsteady are."""


@dataclass(frozen=True)
class KeptCount:
    """A selector's last count: the fleet's write count then, the steady nodes counted, and
    the unsteady nodes (a fault on them), described again at each read."""

    writes: int
    steady: NodeCount
    unsteady: tuple[str, ...]


class SimCluster:
    """Reads and changes the simulated fleet's Kubernetes objects."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.denied: set[tuple[str, str]] = set()
        self._described: dict[str, tuple[tuple[int, int], NodeInfo]] = {}
        self._lists: dict[Selector, KeptList] = {}
        self._selected: dict[Selector, tuple[int, tuple[str, ...]]] = {}
        self._counted: dict[Selector, KeptCount] = {}
        if not fleet.scenario.fleet.kernel_log_readable:
            self.deny("get", "nodes/proxy")

    def deny(self, verb: str, resource: str) -> None:
        """Refuse `verb` on `resource` (e.g. "patch", "nodes" or "create", "pods/eviction")."""
        self.denied.add((verb, resource))

    def check_permissions(self, needed: Collection[Permission]) -> list[Permission]:
        return [
            replace(
                p,
                allowed=(p.verb, _what(p)) not in self.denied,
                reason="simulated fleet" if (p.verb, _what(p)) not in self.denied else "denied",
            )
            for p in needed
        ]

    def nodes(
        self,
        names: Collection[str] | None = None,
        *,
        labels: Mapping[str, str | None] | None = None,
    ) -> list[NodeInfo]:
        """Nodes by name (all when None, or those `labels` select: None is "absent"). An
        unknown name raises NodeNotFound with known names."""
        self._allowed("list" if names is None else "get", "nodes")
        if names is None:
            return self._listed(labels or {})
        wanted = [check_node_name(n) for n in names]
        for name in wanted:
            if name not in self.fleet.nodes:
                raise NodeNotFound(name, self.fleet.node_names)
        at = self.fleet.now()
        with self.fleet.lock:  # writers hold it until their change is applied
            return [self._describe(name, at) for name in wanted]

    def _listed(self, labels: Mapping[str, str | None]) -> list[NodeInfo]:
        """Every node, or those `labels` select. Which nodes a selector selects changes only
        with a write (labels are written, never computed from time), and so does a steady
        node's description: until the next write, a selector's answer is its last one with
        only the unsteady nodes (a fault on them) described again, as an informer's indexed
        list answers."""
        selector = tuple(sorted(labels.items(), key=lambda kv: kv[0]))
        at = self.fleet.now()
        with self.fleet.lock:  # writers hold it until their change is applied
            writes = self.fleet.writes
            kept = self._lists.get(selector)
            if kept is not None and kept[0] == writes:
                found = list(kept[1])
                for index in kept[2]:
                    found[index] = self._describe(found[index].name, at)
                return found
            every = [self._describe(name, at) for name in self.fleet.nodes]
            found = select_by_labels(every, labels) if labels else every
            unsteady = tuple(i for i, n in enumerate(found) if n.name not in self._described)
            self._lists = {k: v for k, v in self._lists.items() if v[0] == writes}
            self._lists[selector] = (writes, tuple(found), unsteady)
            return found

    def first_nodes(self, labels: Mapping[str, str | None], *, limit: int) -> NodeSample:
        """The first `limit` nodes (by name) `labels` selects, and how many: only those are
        described. Which names a selector selects is kept until the next write, as the
        Kubernetes node cache keeps its sorted label index."""
        if limit < 1:
            raise ValueError(f"a bounded node read needs a limit of at least 1, not {limit}")
        self._allowed("list", "nodes")
        selector = tuple(sorted(labels.items(), key=lambda kv: kv[0]))
        at = self.fleet.now()
        with self.fleet.lock:  # writers hold it until their change is applied
            writes = self.fleet.writes
            kept = self._selected.get(selector)
            if kept is None or kept[0] != writes:
                names = tuple(n for n in sorted(self.fleet.nodes) if self._selects(n, labels))
                self._selected = {k: v for k, v in self._selected.items() if v[0] == writes}
                kept = self._selected[selector] = (writes, names)
            chosen = kept[1][:limit]
            return NodeSample(tuple(self._describe(n, at) for n in chosen), len(kept[1]))

    def count_nodes(self, labels: Mapping[str, str | None]) -> NodeCount:
        """The nodes `labels` selects counted. The steady nodes' count is kept until the next
        write (as the Kubernetes node cache keeps its counts per label value); only the
        unsteady nodes are described again."""
        self._allowed("list", "nodes")
        selector = tuple(sorted(labels.items(), key=lambda kv: kv[0]))
        at = self.fleet.now()
        with self.fleet.lock:  # writers hold it until their change is applied
            writes = self.fleet.writes
            kept = self._counted.get(selector)
            if kept is None or kept.writes != writes:
                names = [n for n in self.fleet.nodes if self._selects(n, labels)]
                described = [self._describe(n, at) for n in names]
                steady = count_of(n for n in described if n.name in self._described)
                unsteady = tuple(n.name for n in described if n.name not in self._described)
                self._counted = {k: v for k, v in self._counted.items() if v.writes == writes}
                kept = self._counted[selector] = KeptCount(writes, steady, unsteady)
            fresh = count_of(self._describe(n, at) for n in kept.unsteady)
            down = sorted((*kept.steady.down, *fresh.down), key=lambda n: n.name)
            return NodeCount(
                kept.steady.nodes + fresh.nodes, kept.steady.gpus + fresh.gpus, tuple(down)
            )

    def _selects(self, name: str, labels: Mapping[str, str | None]) -> bool:
        have = self.fleet.node_labels(name)
        return all(have.get(key) == value for key, value in labels.items())

    def _describe(self, name: str, at: datetime) -> NodeInfo:
        """The node as a list returns it (called under the fleet's lock). A steady node (no
        fault, its condition and capacity series constant) is described once and kept until
        the next write to it or to the fleet, as an informer's cache keeps it: listing a
        steady fleet costs a lookup per node."""
        revision = self.fleet.revision(name)
        kept = self._described.get(name)
        if kept is not None and kept[0] == revision:
            return kept[1]
        info = self._node_info(name, at)
        if self.fleet.steady(name, _DESCRIBED_BY):
            self._described[name] = (revision, info)
        else:
            self._described.pop(name, None)
        return info

    def pods_on(self, node: str) -> list[PodInfo]:
        self._allowed("list", "pods")
        return [pod.info() for pod in self.fleet.pods_on(check_node_name(node))]

    def events(self, node: str, *, since: datetime) -> list[ClusterEvent]:
        self._allowed("list", "events")
        return self.fleet.events(check_node_name(node), since=since, until=self.fleet.now())

    def pod_logs(
        self,
        pod: str,
        namespace: str,
        *,
        tail_lines: int = 500,
        container: str | None = None,
        since: timedelta | None = None,
    ) -> str:
        """The pod's log (each simulated pod has one container; `since` is not modelled: the
        simulated lines carry their own timestamps)."""
        check_pod_name(pod)
        check_namespace(namespace)
        if container is not None:
            check_container_name(container)
        self._allowed("get", "pods/log")
        lines = self.fleet.pod_log(self.fleet.pod(pod, namespace), self.fleet.now())
        return "\n".join(lines[-tail_lines:] if tail_lines > 0 else [])

    def node_logs(self, node: str, *, tail_lines: int = 500) -> str:
        """The kernel log (verbatim `NVRM: Xid` lines); empty while the kubelet is down."""
        self._allowed("get", "nodes/proxy")
        lines = self.fleet.kernel_log(check_node_name(node), self.fleet.now())
        return "\n".join(lines[-tail_lines:] if tail_lines > 0 else [])

    def cordon(self, node: str) -> Outcome:
        self._allowed("patch", "nodes")
        return self.fleet.cordon(check_node_name(node))

    def uncordon(self, node: str) -> Outcome:
        self._allowed("patch", "nodes")
        return self.fleet.uncordon(check_node_name(node))

    def drain(self, node: str, *, grace: timedelta) -> DrainReport:
        """Cordon and evict; a PodDisruptionBudget that refuses now refuses until the grace
        deadline too (nothing else moves while the simulated drain runs)."""
        self._allowed("patch", "nodes")
        self._allowed("create", "pods/eviction")
        return self.fleet.drain(check_node_name(node), grace=grace)

    def taint(self, node: str, *, key: str, value: str = "", effect: str = "NoSchedule") -> Outcome:
        name = check_node_name(node)
        check_qualified_key(key, what="taint key")
        check_label_value(value, what="taint value")
        check_taint_effect(effect)
        self._allowed("patch", "nodes")
        return self.fleet.taint(name, key=key, value=value, effect=effect)

    def untaint(self, node: str, *, key: str, effect: str = "NoSchedule") -> Outcome:
        name = check_node_name(node)
        check_qualified_key(key, what="taint key")
        check_taint_effect(effect)
        self._allowed("patch", "nodes")
        return self.fleet.untaint(name, key=key, effect=effect)

    def delete_pod(self, pod: str, namespace: str, *, grace: timedelta) -> Outcome:
        check_pod_name(pod)
        check_namespace(namespace)
        self._allowed("delete", "pods")
        return self.fleet.delete_pod(pod, namespace, grace=grace)

    def annotate(self, node: str, annotations: Mapping[str, str | None]) -> Outcome:
        name = check_node_name(node)
        for key, value in annotations.items():
            check_qualified_key(key, what="annotation key")
            if value is not None:
                check_annotation_value(value)
        self._allowed("patch", "nodes")
        return self.fleet.annotate(name, annotations)

    def label(self, node: str, labels: Mapping[str, str | None]) -> Outcome:
        name = check_node_name(node)
        for key, value in labels.items():
            check_qualified_key(key, what="label key")
            if value is not None:
                check_label_value(value)
        self._allowed("patch", "nodes")
        return self.fleet.label(name, labels)

    def remediation_pauses(self, node: NodeInfo) -> list[RemediationPause]:
        """Paused NodeHealthChecks (`fleet.set_health_check`) selecting the node; none unless
        a test added one. One with a malformed selector is skipped, as KubernetesCluster does."""
        check_node_name(node.name)
        self._allowed("list", "nodehealthchecks")
        pauses = []
        for check in sorted(self.fleet.health_checks.values(), key=lambda c: c.name):
            with contextlib.suppress(InvalidSelector):
                if (pause := check.pause_for(node.labels)) is not None:
                    pauses.append(pause)
        return pauses

    def create_job(self, manifest: Mapping[str, Any]) -> JobRun:
        """Run the Job on the simulated node named by `spec.template.spec.nodeName`: journaled,
        complete at once (the same name again is ALREADY_DONE, as a 409 then a read is)."""
        meta = manifest.get("metadata") or {}
        name = check_job_name(str(meta.get("name", "")))
        namespace = check_namespace(str(meta.get("namespace", "")))
        pod = ((manifest.get("spec") or {}).get("template") or {}).get("spec") or {}
        node = check_node_name(str(pod.get("nodeName", "")))
        containers = pod.get("containers") or [{}]
        args = [*(containers[0].get("command") or []), *(containers[0].get("args") or [])]
        self._allowed("create", "jobs")
        outcome = self.fleet.run_job(name, namespace, node=node, args=[str(a) for a in args])
        return JobRun(name, namespace, "complete", outcome=outcome)

    def read_job(self, name: str, namespace: str) -> JobRun:
        job, ns = check_job_name(name), check_namespace(namespace)
        self._allowed("get", "jobs")
        if (ns, job) not in self.fleet.jobs:
            raise JobNotFound(job, ns)
        return JobRun(job, ns, "complete")

    def job_logs(self, name: str, namespace: str, *, tail_lines: int = 20) -> str:
        job, ns = check_job_name(name), check_namespace(namespace)
        self._allowed("list", "pods")
        self._allowed("get", "pods/log")
        ran = self.fleet.jobs.get((ns, job))
        if ran is None or tail_lines <= 0:
            return ""
        return f"simulated node {ran['node']}: ran {' '.join(ran['args'])}: exit 0"

    def _allowed(self, verb: str, resource: str) -> None:
        if (verb, resource) in self.denied:
            raise ClusterForbidden(verb=verb, resource=resource)

    def _node_info(self, name: str, at: datetime) -> NodeInfo:
        fleet = self.fleet
        status = fleet.values("kube_node_status_condition", name, at=at)
        conditions = {cond: _condition(status, cond) for cond in _CONDITIONS}
        cordoned = fleet.state[name].cordoned
        taints = ["node.kubernetes.io/unschedulable:NoSchedule"] if cordoned else []
        if conditions["Ready"] != "True":
            kind = "not-ready" if conditions["Ready"] == "False" else "unreachable"
            taints += [
                f"node.kubernetes.io/{kind}:NoSchedule",
                f"node.kubernetes.io/{kind}:NoExecute",
            ]
        taints += render_taints(fleet.state[name])
        gpu = ("resource", "nvidia_com_gpu")
        capacity = fleet.values("kube_node_status_capacity", name, at=at).get(gpu) or 0.0
        allocatable = fleet.values("kube_node_status_allocatable", name, at=at).get(gpu) or 0.0
        return NodeInfo(
            name=name,
            ready=conditions["Ready"] == "True",
            unschedulable=cordoned,
            conditions=conditions,
            labels=fleet.node_labels(name),
            taints=tuple(taints),
            gpu_capacity=int(capacity),
            gpu_allocatable=max(0, int(allocatable)),
            annotations=dict(fleet.state[name].annotations),
        )


def _condition(values: Mapping[EntityKey, float | None], condition: str) -> str:
    """The condition's status as kubectl shows it: the status whose series reads 1."""
    for status, shown in _STATUS.items():
        if values.get(("condition", condition, status)) == 1.0:
            return shown
    return "Unknown"


def _what(permission: Permission) -> str:
    sub = permission.subresource
    return permission.resource + (f"/{sub}" if sub else "")
