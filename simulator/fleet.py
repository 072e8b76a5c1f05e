"""The simulated GPU fleet: topology, pods, node state and faults over time, in one object.

Built from a Scenario and an injected clock (`now`, timezone-aware UTC); a fault's `start` is
relative to the build time t0. Series are laid out lazily when read (series.py); a drain or
repair only closes fault windows, so nothing is rebuilt. Every write is journaled, so another
process can rebuild the same fleet (`export_state` / `restore_state`). SimTelemetry and
SimCluster are views over one shared Fleet; this module never imports them.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

from integrations.cluster import ClusterEvent, DrainReport, Outcome
from integrations.errors import NodeNotFound, PodNotFound, ScenarioError
from integrations.names import check_namespace, check_node_name, check_pod_name
from simulator.fault_base import ActiveFault, Impact
from simulator.faults import FAULT_KINDS
from simulator.job_logs import workload_lines
from simulator.logs import boot_lines, pod_lines, render_kernel_line
from simulator.marking import (
    SimBudget,
    SimHealthCheck,
    budget_fields,
    budget_refusal,
    health_check_fields,
    node_labels,
    remove_taint,
    set_annotations,
    set_labels,
    set_taint,
    skip_reason,
)
from simulator.metrics import EntityKey, MetricDef
from simulator.placing import active_faults, fault_targets
from simulator.pods import SimPod, device_plugin_pod, exporter_pod, worker_pod
from simulator.scenarios import FaultSpec, Scenario, parse_scenario
from simulator.series import Series, SeriesSource
from simulator.states import NodeState
from simulator.topology import NodeSpec, build_node
from simulator.tracks import Track
from simulator.workloads import Workloads

__all__ = ["Fleet", "Series"]
STATE_VERSION = 1


class Fleet:
    """Nodes, GPUs, HCAs, pods and active faults of one scenario, readable at any time."""

    def __init__(
        self, scenario: Scenario, now: Callable[[], datetime], *, t0: datetime | None = None
    ) -> None:
        self.scenario = scenario
        self._now = now
        self.t0 = self._checked(t0 or now())
        self.seed = scenario.name
        spec = scenario.fleet
        self.workloads = {w.name: w for w in spec.workloads}
        busy = {n for w in spec.workloads for n in w.node_names}
        self.nodes: dict[str, NodeSpec] = {
            name: build_node(
                seed=self.seed,
                name=name,
                index=i,
                gpus=spec.gpus_per_node,
                hcas=spec.hcas_per_node,
                nodes_per_rack=spec.nodes_per_rack,
                nodes_per_leaf=spec.nodes_per_leaf,
                busy=name in busy,
            )
            for i, name in enumerate(spec.node_names)
        }
        self.state = {name: NodeState() for name in self.nodes}
        self.pods: dict[tuple[str, str], SimPod] = {}
        self._homes: tuple[int, dict[str, list[SimPod]]] = (-1, {})
        self.faults: list[ActiveFault] = []
        self.budgets: list[SimBudget] = []
        self.health_checks: dict[str, SimHealthCheck] = {}
        self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
        """Node-agent Jobs by (namespace, name): {"node", "args"}; each completed at once."""
        self.cordon_calls: Counter[str] = Counter()
        self.uncordon_calls: Counter[str] = Counter()
        self.drain_calls: Counter[str] = Counter()
        self._events: list[tuple[str | None, ClusterEvent]] = []
        self._impacts: dict[str, list[Impact]] = {}
        self._journal: list[dict[str, Any]] = []
        self._node_writes: Counter[str] = Counter()
        self._fleet_writes = 0
        self._writes = 0
        self._lock = threading.RLock()
        self.running = Workloads(self.workloads, self.pods)
        self.exporters = SeriesSource(
            nodes=self.nodes,
            spec=spec,
            busy=busy,
            impacts=self._impacts,
            state=self.state,
            driver_version=self.driver_version,
            workloads=self.running,
            pods=self.pods,
        )
        self._build_pods()
        for fault in scenario.faults:
            self._place(fault, origin=0.0)

    @classmethod
    def from_scenario(
        cls, scenario: Scenario, *, now: Callable[[], datetime], t0: datetime | None = None
    ) -> Fleet:
        """Build the fleet; `t0` (default: now) is the moment fault `start`s are relative to."""
        return cls(scenario, now, t0=t0)

    # --- time ------------------------------------------------------------------------------

    def now(self) -> datetime:
        return self._checked(self._now())

    def offset(self, at: datetime) -> float:
        """Fleet time of `at`: seconds since t0 (negative before the fleet was built)."""
        return (self._checked(at) - self.t0).total_seconds()

    def wall(self, t: float) -> datetime:
        return self.t0 + timedelta(seconds=t)

    @staticmethod
    def _checked(at: datetime) -> datetime:
        if at.tzinfo is None or at.utcoffset() is None:
            raise ValueError("the simulated fleet needs timezone-aware UTC datetimes")
        return at

    # --- lookup ----------------------------------------------------------------------------

    @property
    def node_names(self) -> list[str]:
        return list(self.nodes)

    def node(self, name: str) -> NodeSpec:
        """The node called `name`; NodeNotFound (listing known nodes) otherwise."""
        spec = self.nodes.get(check_node_name(name))
        if spec is None:
            raise NodeNotFound(name, self.node_names)
        return spec

    def workload_nodes(self, name: str) -> list[str]:
        """Nodes of a workload as the scenario lays it out (empty for an unknown workload)."""
        workload = self.workloads.get(name)
        return workload.node_names if workload else []

    def running_nodes(self, name: str) -> list[str]:
        """Nodes the workload's pods are placed on now (pending ranks have none)."""
        return self.running.running_nodes(name)

    def pod(self, name: str, namespace: str) -> SimPod:
        pod = self.pods.get((namespace, name))
        if pod is None:
            raise PodNotFound(name, namespace)
        return pod

    def pods_on(self, node: str) -> list[SimPod]:
        """The pods on `node` now, from an index by the node each pod was placed on: a pod
        leaves its node only for none (evicted, deleted, left pending), never for another, so
        the pods on a node are among those placed there (as a field selector on nodeName
        answers without reading every pod)."""
        self.node(node)
        if self._homes[0] != len(self.pods):  # pods are only ever added
            homes: dict[str, list[SimPod]] = {}
            for pod in self.pods.values():
                homes.setdefault(pod.home or "", []).append(pod)
            self._homes = (len(self.pods), homes)
        return [p for p in self._homes[1].get(node, ()) if p.node == node]

    def driver_version(self, node: str) -> str:
        version = self.scenario.fleet.driver_version
        for fault in self._faults_on(node):
            version = FAULT_KINDS[fault.kind].driver_version(fault) or version
        return version

    # --- series (what the exporters expose) ------------------------------------------------

    def metric_names(self) -> list[str]:
        """Metrics the fleet's exporters expose (dcgm counters per `fleet.dcgm_counters`)."""
        return self.exporters.metric_names()

    def metric(self, name: str) -> MetricDef | None:
        """The metric (type, help) if an exporter of this fleet exposes it, else None."""
        return self.exporters.metric(name)

    def tracks(
        self, metric: str, nodes: Iterable[str] | None = None, *, workload: str | None = None
    ) -> Iterator[Track]:
        """The metric's tracks on `nodes` (all nodes when None); unknown nodes have none.
        `workload` narrows pod series to that workload's pods."""
        return self.exporters.tracks(metric, nodes, workload=workload)

    def series(self, metric: str, at: datetime) -> list[Series]:
        """Exactly what the exporters would expose for `metric` at `at` (absent series omitted)."""
        return self.exporters.series(metric, self.offset(at))

    def value(self, metric: str, node: str, *, entity: EntityKey, at: datetime) -> float | None:
        """One series' value at `at` (None when absent)."""
        return self.exporters.value(metric, node, entity=entity, t=self.offset(at))

    def values(self, metric: str, node: str, *, at: datetime) -> dict[EntityKey, float | None]:
        """Every series of `metric` on `node` at `at`, by entity (None when absent)."""
        return self.exporters.values(metric, node, t=self.offset(at))

    # --- logs and events -------------------------------------------------------------------

    def kernel_log(self, node: str, at: datetime) -> list[str]:
        """The node's kernel log up to `at`; empty while a fault has silenced the kubelet."""
        spec, t = self.node(node), self.offset(at)
        faults = self._faults_on(node)
        if any(FAULT_KINDS[f.kind].silences_node and f.window.active(t) for f in faults):
            return []
        lines = boot_lines(spec, driver_version=self.driver_version(node))
        for fault in faults:
            lines.extend(FAULT_KINDS[fault.kind].kernel_log(fault, t))
        return [
            render_kernel_line(
                line, boot_offset_s=spec.boot_offset_s, at=self.wall(line.t), host=spec.name
            )
            for line in sorted(lines, key=lambda line: line.t)
            if line.t <= t
        ]

    def pod_log(self, pod: SimPod, at: datetime) -> list[str]:
        t = self.offset(at)
        lines = workload_lines(
            pod, self.running, until=t, wall=self.wall, node_index=self._node_index
        )
        if lines is None:
            lines = pod_lines(pod, until=t, wall=self.wall)
        for fault in self.faults:
            if _hits_pod(fault, pod):
                lines.extend(FAULT_KINDS[fault.kind].pod_log(fault, pod, until=t))
        stop = t if pod.stopped_at is None else min(t, pod.stopped_at)
        return [line.text for line in sorted(lines, key=lambda line: line.t) if line.t <= stop]

    def events(self, node: str, *, since: datetime, until: datetime) -> list[ClusterEvent]:
        """Events about the node and the pods first placed on it, in `[since, until]`."""
        self.node(node)
        found = [e for n, e in self._events if n == node and since <= e.at <= until]
        if self.scenario.fleet.node_problem_detector:
            found += [e for e in self._xid_events(node, until) if since <= e.at]
        return sorted(found, key=lambda e: e.at)

    def _xid_events(self, node: str, until: datetime) -> list[ClusterEvent]:
        """node-problem-detector's XID rule (DOMAIN.md §7): one Node event per `NVRM: Xid`
        kernel line the node's faults have written by `until`."""
        t = self.offset(until)
        lines = [
            line
            for fault in self._faults_on(node)
            for line in FAULT_KINDS[fault.kind].kernel_log(fault, t)
            if line.t <= t and "NVRM: Xid" in line.text
        ]
        return [
            ClusterEvent(at=self.wall(line.t), kind="Node", name=node, reason="XidError",
                         message=line.text, type="Warning")
            for line in lines
        ]

    # --- writes (journaled) ----------------------------------------------------------------

    def cordon(self, node: str) -> Outcome:
        with self._lock:
            return self._cordon(self._write("cordon", node), node=node, on=True)

    def uncordon(self, node: str) -> Outcome:
        with self._lock:
            return self._cordon(self._write("uncordon", node), node=node, on=False)

    def drain(self, node: str, *, grace: timedelta) -> DrainReport:
        """Cordon, evict every non-DaemonSet pod, and end the faults that stop with the load."""
        with self._lock:
            t = self._write("drain", node, grace_s=grace.total_seconds())
            return self._drain(t, node=node, grace=grace)

    def taint(self, node: str, *, key: str, value: str = "", effect: str = "NoSchedule") -> Outcome:
        with self._lock:
            self._write("taint", node, key=key, value=value, effect=effect)
            return set_taint(self.state[node], key=key, value=value, effect=effect)

    def untaint(self, node: str, *, key: str, effect: str = "NoSchedule") -> Outcome:
        with self._lock:
            self._write("untaint", node, key=key, effect=effect)
            return remove_taint(self.state[node], key=key, effect=effect)

    def annotate(self, node: str, values: Mapping[str, str | None]) -> Outcome:
        with self._lock:
            self._write("annotate", node, values=dict(values))
            return set_annotations(self.state[node], values)

    def label(self, node: str, values: Mapping[str, str | None]) -> Outcome:
        with self._lock:
            self._write("label", node, values=dict(values))
            return set_labels(self.state[node], values, current=self.node_labels(node))

    def node_labels(self, node: str) -> dict[str, str]:
        spec = self.node(node)
        return node_labels(
            spec,
            self.state[spec.name],
            gpu_model=self.scenario.fleet.gpu_model,
            driver_version=self.driver_version(node),
        )

    def delete_pod(self, pod: str, namespace: str, *, grace: timedelta) -> Outcome:
        """Delete a pod: it stops now and its controller's replacement waits Pending (a pod
        that is gone or not running anywhere is ALREADY_DONE)."""
        check_pod_name(pod)
        check_namespace(namespace)
        with self._lock:
            seconds = grace.total_seconds()
            t = self._write("delete_pod", None, pod=pod, namespace=namespace, grace_s=seconds)
            return self._delete_pod(t, pod=pod, namespace=namespace, grace=grace)

    def add_budget(self, budget: SimBudget) -> None:
        """A PodDisruptionBudget that drains honour from now on."""
        with self._lock:
            self._write("budget", None, budget=budget_fields(budget))
            self.budgets.append(budget)

    def set_health_check(self, check: SimHealthCheck) -> None:
        """Create or replace a medik8s NodeHealthCheck (by name); pausing one is setting it
        again with `pause_requests`, resuming is setting it with none."""
        with self._lock:
            self._write("health_check", None, check=health_check_fields(check))
            self.health_checks[check.name] = check

    def run_job(self, name: str, namespace: str, *, node: str, args: Iterable[str]) -> Outcome:
        """A node-agent Job (gpu_reset / reboot) on `node`: the simulated node carries it out
        at once and it completes; the same name again is ALREADY_DONE. It changes no fault:
        whether the reset helped is for the runbook's verification to find out."""
        with self._lock:
            if (namespace, name) in self.jobs:
                return Outcome.ALREADY_DONE
            self._write("job", node, name=name, namespace=namespace, args=list(args))
            self.jobs[(namespace, name)] = {"node": node, "args": list(args)}
            return Outcome.CHANGED

    def repair(self, node: str) -> int:
        """End every active fault on the node now (a part swapped, a cable reseated, a
        reboot). Returns how many faults ended. Persistent hardware flags keep their value."""
        with self._lock:
            return self._repair(self._write("repair", node), node=node)

    def inject(self, spec: FaultSpec) -> ActiveFault:
        """Add a fault now; its `start` is relative to the current time, not t0."""
        fault = spec.model_dump(mode="json")
        checked = parse_scenario(
            self.scenario.model_dump(mode="json") | {"faults": [fault]}, source="inject"
        ).faults[0]
        with self._lock:
            t = self._write("inject", None, fault=fault)
            return self._place(checked, origin=t)

    def drained_at(self, node: str) -> datetime | None:
        drained = self.state[self.node(node).name].drained_t
        return None if drained is None else self.wall(drained)

    def export_state(self) -> dict[str, Any]:
        """Everything written since the build, JSON-safe, for `restore_state` in a new process."""
        with self._lock:
            return {"version": STATE_VERSION, "journal": [dict(e) for e in self._journal]}

    def restore_state(self, state: Mapping[str, Any]) -> None:
        """Replay a journal from `export_state` onto this freshly built fleet (same scenario
        and t0): cordons, drains, repairs and injected faults happen again at their times."""
        if state.get("version", STATE_VERSION) != STATE_VERSION:
            raise ScenarioError(
                f"simulated fleet state version {state.get('version')} is not "
                f"{STATE_VERSION}; start a fresh fleet"
            )
        with self._lock:
            if self._journal:
                raise ScenarioError("restore_state needs a freshly built fleet")
            for entry in state.get("journal", []):
                self._replay(dict(entry))

    def _write(self, verb: str, node: str | None, **extra: Any) -> float:
        """Validate, journal and time-stamp a write; returns its fleet time."""
        if node is not None:
            self.node(node)
        with self._lock:
            t = self.offset(self.now())
            self._journal.append({"verb": verb, "node": node, "t": t, **extra})
            self._count_write(node)
            return t

    def _count_write(self, node: str | None) -> None:
        self._writes += 1
        if node:
            self._node_writes[node] += 1
        else:
            self._fleet_writes += 1

    def revision(self, node: str) -> tuple[int, int]:
        """Changes with every write to `node` and every fleet-wide write (a fault injected, a
        pod deleted): what a cached description of the node is valid for. Read under `lock`
        with the description, since writers hold it until their change is applied."""
        return self._node_writes[node], self._fleet_writes

    @property
    def writes(self) -> int:
        """Every write so far, to any node or the fleet (read under `lock`, as `revision`)."""
        return self._writes

    @property
    def lock(self) -> threading.RLock:
        """The fleet's write lock (re-entrant)."""
        return self._lock

    def steady(self, node: str, metrics: Iterable[str]) -> bool:
        """No fault on the node and the metrics' series there constant in time: what they read
        changes only with a write."""
        return not self._faults_on(node) and all(
            self.exporters.steady(m, node) for m in metrics
        )

    def _replay(self, entry: dict[str, Any]) -> None:
        verb, node, t = entry["verb"], entry.get("node") or "", float(entry["t"])
        self._journal.append(entry)
        self._count_write(node)
        if verb in ("cordon", "uncordon"):
            self._cordon(t, node=node, on=verb == "cordon")
        elif verb == "drain":
            self._drain(t, node=node, grace=timedelta(seconds=float(entry.get("grace_s", 0))))
        elif verb == "repair":
            self._repair(t, node=node)
        elif verb == "inject":
            self._place(FaultSpec.model_validate(entry["fault"]), origin=t)
        elif verb == "taint":
            set_taint(
                self.state[node], key=entry["key"], value=entry["value"], effect=entry["effect"]
            )
        elif verb == "untaint":
            remove_taint(self.state[node], key=entry["key"], effect=entry["effect"])
        elif verb == "annotate":
            set_annotations(self.state[node], entry["values"])
        elif verb == "label":
            set_labels(self.state[node], entry["values"], current=self.node_labels(node))
        elif verb == "delete_pod":
            grace = timedelta(seconds=float(entry.get("grace_s", 0)))
            self._delete_pod(t, pod=entry["pod"], namespace=entry["namespace"], grace=grace)
        elif verb == "job":
            self.jobs[(entry["namespace"], entry["name"])] = {"node": node, "args": entry["args"]}
        elif verb == "budget":
            self.budgets.append(SimBudget(**entry["budget"]))
        elif verb == "health_check":
            fields = entry["check"]
            check = SimHealthCheck(
                fields["name"], fields["selector"], tuple(fields["pause_requests"])
            )
            self.health_checks[check.name] = check
        else:
            raise ScenarioError(f"simulated fleet state: unknown write '{verb}'")

    def _cordon(self, t: float, *, node: str, on: bool) -> Outcome:
        with self._lock:
            (self.cordon_calls if on else self.uncordon_calls)[node] += 1
            return self._set_cordon(node, on=on, t=t)

    def _drain(self, t: float, *, node: str, grace: timedelta) -> DrainReport:
        with self._lock:
            self.drain_calls[node] += 1
            changed = self._set_cordon(node, on=True, t=t) is Outcome.CHANGED
            evicted: list[str] = []
            skipped: list[str] = []
            blocked: list[str] = []
            reasons: dict[str, str] = {}
            for pod in self.pods_on(node):
                why = skip_reason(pod) or budget_refusal(pod, self.pods.values(), self.budgets)
                if why:
                    (blocked if why.startswith("Cannot evict") else skipped).append(pod.name)
                    reasons[f"{pod.namespace}/{pod.name}"] = why
                    continue
                self._evict(pod, node=node, t=t, grace=grace)
                evicted.append(pod.name)
            state = self.state[node]
            if state.drained_t is None:
                state.drained_t = t
                for fault in self._faults_on(node):
                    if FAULT_KINDS[fault.kind].ends_on_drain:
                        fault.window.cancel(t)
                        fault.window.close(t)
            outcome = Outcome.CHANGED if changed or evicted else Outcome.ALREADY_DONE
            return DrainReport(
                outcome=outcome,
                evicted=tuple(evicted),
                skipped=tuple(skipped),
                blocked=tuple(blocked),
                reasons=reasons,
            )

    def _repair(self, t: float, *, node: str) -> int:
        with self._lock:
            faults = self._faults_on(node)
            for fault in faults:
                fault.window.cancel(t)  # later episodes of a flapping fault
            return sum(fault.window.close(t) for fault in faults)

    def _set_cordon(self, node: str, *, on: bool, t: float) -> Outcome:
        state = self.state[node]
        if state.cordoned == on:
            return Outcome.ALREADY_DONE
        if on:
            state.cordons.append([t, None])
        else:
            state.cordons[-1][1] = t
        reason = "NodeNotSchedulable" if on else "NodeSchedulable"
        self._event(
            node,
            t,
            kind="Node",
            name=node,
            reason=reason,
            message=f"Node {node} status is now: {reason}",
        )
        return Outcome.CHANGED

    def _delete_pod(self, t: float, *, pod: str, namespace: str, grace: timedelta) -> Outcome:
        live = self.pods.get((namespace, pod))
        if live is None or live.node is None:
            return Outcome.ALREADY_DONE
        node = live.node
        live.node, live.phase, live.stopped_at = None, "Pending", t
        self.running.placement_changed()
        message = f"Stopping container {live.container} (grace period {grace.total_seconds():.0f}s)"
        self._event(node, t, kind="Pod", name=live.name, reason="Killing", message=message)
        return Outcome.CHANGED

    def _evict(self, pod: SimPod, *, node: str, t: float, grace: timedelta) -> None:
        pod.node, pod.phase, pod.stopped_at = None, "Pending", t
        self.running.placement_changed()
        message = f"Evicted by drain of {node} (grace period {grace.total_seconds():.0f}s)"
        self._event(
            node, t, kind="Pod", name=pod.name, reason="Evicted", message=message, type="Warning"
        )

    def _event(self, node: str | None, t: float, **fields: str) -> None:
        self._events.append((node, ClusterEvent(at=self.wall(t), **fields)))

    # --- building --------------------------------------------------------------------------

    def _build_pods(self) -> None:
        gpus = self.scenario.fleet.gpus_per_node
        for workload in self.workloads.values():
            for rank, node in enumerate(workload.node_names):
                pod = worker_pod(
                    seed=self.seed,
                    workload=workload.name,
                    kind=workload.kind,
                    namespace=workload.namespace,
                    rank=rank,
                    node=node,
                    gpus=gpus,
                )
                self.pods[(pod.namespace, pod.name)] = pod
        plugin = self.scenario.fleet.device_plugin_pods
        for node in self.nodes:
            daemons = [exporter_pod(seed=self.seed, node=node)]
            if plugin:
                daemons.append(device_plugin_pod(seed=self.seed, node=node))
            for pod in daemons:
                self.pods[(pod.namespace, pod.name)] = pod

    def _place(self, spec: FaultSpec, *, origin: float) -> ActiveFault:
        """Turn a validated FaultSpec into ActiveFaults starting at `origin + start` (one per
        target node for group targets); returns the first."""
        workload_nodes = self.workload_nodes(spec.workload) if spec.workload else []
        targets = fault_targets(
            spec, fleet=self.scenario.fleet, nodes=self.nodes, workload_nodes=workload_nodes
        )
        placed = active_faults(
            spec,
            origin=origin,
            targets=targets,
            pid_on=self._pid_on,
            fleet_size=len(self.nodes),
            workload_size=len(workload_nodes),
        )
        for fault in placed:
            self._register(fault)
        return placed[0]

    def _register(self, fault: ActiveFault) -> None:
        kind = FAULT_KINDS[fault.kind]
        self.faults.append(fault)
        healthchecks = self.scenario.fleet.device_plugin_healthchecks
        for impact in kind.impacts(fault):
            if not healthchecks and impact.metric == "kube_node_status_allocatable":
                continue  # DP_DISABLE_HEALTHCHECKS=all: the plugin never drops a GPU
            self._impacts.setdefault(impact.node, []).append(impact)
        touched = [
            p
            for p in self.pods.values()
            if (fault.workload and p.workload == fault.workload)
            or (fault.node_name and p.node == fault.node_name)
        ]
        kind.apply_to_pods(fault, touched)
        self.running.add(kind.workload_effects(fault))
        self.running.placement_changed()
        for e in kind.events(fault):
            self._event(
                e.node,
                e.t,
                kind=e.kind,
                name=e.name,
                reason=e.reason,
                message=e.message,
                type=e.type,
            )
        if fault.node_name:
            self.exporters.forget(fault.node_name)

    def _pid_on(self, node: str | None) -> int:
        for pod in self.pods.values():
            if pod.node == node and not pod.daemonset:
                return pod.pid
        return 0

    def _faults_on(self, node: str) -> list[ActiveFault]:
        return [f for f in self.faults if f.node_name == node]

    def _node_index(self, node: str) -> int:
        spec = self.nodes.get(node)
        return spec.index if spec else 0


def _hits_pod(fault: ActiveFault, pod: SimPod) -> bool:
    """Whether the fault writes to this pod's log: its workload's pods (on its node, if it has
    one), or every pod first placed on its node."""
    if fault.workload is not None:
        return pod.workload == fault.workload and fault.node_name in (None, pod.home)
    return fault.node_name == pod.home
