"""The fleet's workloads as running things: training jobs and inference services over time.

Owns the `JobEffect`s / `ServiceEffect`s faults place and builds, on demand, one `TrainingJob` or
`InferenceService` model per workload from the ranks/replicas whose pods are placed. A node fault
names only its node: the effect lands on whatever job runs there, which is how an IB port down
becomes an NCCL hang. Models are rebuilt after any placement or effect change.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from simulator.fault_base import JobEffect, ServiceEffect, WorkloadEffect
from simulator.pods import SimPod
from simulator.scenario_specs import WorkloadSpec
from simulator.serving import InferenceService
from simulator.training import TrainingJob


@dataclass(frozen=True)
class Placement:
    """A workload's pod on a node: which workload, its rank/replica, the pod."""

    workload: WorkloadSpec
    rank: int
    pod: SimPod


class Workloads:
    """Training jobs and inference services of one fleet, with the effects faults put on them."""

    def __init__(
        self, specs: Mapping[str, WorkloadSpec], pods: Mapping[tuple[str, str], SimPod]
    ) -> None:
        self._specs = dict(specs)
        self._pods = pods
        self._effects: list[WorkloadEffect] = []
        self._lock = threading.Lock()
        self._jobs: dict[str, TrainingJob] | None = None
        self._services: dict[str, InferenceService] | None = None
        self._placements: dict[str, Placement] | None = None

    def add(self, effects: list[WorkloadEffect]) -> None:
        with self._lock:
            self._effects.extend(effects)
            self._reset()

    def placement_changed(self) -> None:
        """Pods moved (evicted, left pending): rebuild the models on the next read."""
        with self._lock:
            self._reset()

    def on(self, node: str) -> Placement | None:
        """The workload pod that runs (or ran, until evicted) on `node`."""
        return self._placements_now().get(node)

    def job(self, name: str) -> TrainingJob | None:
        jobs, _ = self._models()
        return jobs.get(name)

    def service(self, name: str) -> InferenceService | None:
        _, services = self._models()
        return services.get(name)

    def hosts(self, name: str) -> list[str]:
        """Nodes the workload's pods run (or ran, until evicted) on: the only nodes with its
        job or vLLM series (their seeds follow the placement)."""
        return [n for n, p in self._placements_now().items() if p.workload.name == name]

    def running_nodes(self, name: str) -> list[str]:
        """Nodes where the workload's pods run now (not evicted, not pending), by rank: what
        kube-state-metrics' Running pods of the workload say."""
        placed = [(p.rank, n) for n, p in self._placements_now().items() if p.workload.name == name]
        return [n for rank, n in sorted(placed) if self._placements_now()[n].pod.node == n]

    def _reset(self) -> None:
        self._jobs = self._services = self._placements = None

    def _placements_now(self) -> dict[str, Placement]:
        placements = self._placements
        if placements is None:
            placements = {}
            for pod in self._pods.values():
                spec = self._specs.get(pod.workload or "")
                host = pod.node or (pod.home if pod.stopped_at is not None else None)
                if spec is None or pod.daemonset or host is None:
                    continue
                rank = int(pod.labels.get("gpu-oncall.io/rank", "0"))
                placements[host] = Placement(workload=spec, rank=rank, pod=pod)
            self._placements = placements
        return placements

    def _models(self) -> tuple[dict[str, TrainingJob], dict[str, InferenceService]]:
        jobs, services = self._jobs, self._services
        if jobs is None or services is None:
            jobs, services = self._build()
            self._jobs, self._services = jobs, services
        return jobs, services

    def _build(self) -> tuple[dict[str, TrainingJob], dict[str, InferenceService]]:
        placements = self._placements_now()
        members: dict[str, dict[str, int]] = {name: {} for name in self._specs}
        for node, placement in placements.items():
            members[placement.workload.name][node] = placement.rank
        jobs: dict[str, TrainingJob] = {}
        services: dict[str, InferenceService] = {}
        for name, spec in self._specs.items():
            if spec.kind == "training":
                job_effects = [e for e in self._effects if isinstance(e, JobEffect)]
                mine = [e for e in job_effects if self._touches(e, name, members[name])]
                jobs[name] = TrainingJob(name, ranks=members[name], effects=mine)
            else:
                service_effects = [e for e in self._effects if isinstance(e, ServiceEffect)]
                touching = [e for e in service_effects if self._touches(e, name, members[name])]
                services[name] = InferenceService(name, replicas=members[name], effects=touching)
        return jobs, services

    @staticmethod
    def _touches(effect: WorkloadEffect, name: str, members: Mapping[str, int]) -> bool:
        if effect.workload is not None and effect.workload != name:
            return False
        return effect.node is None or effect.node in members
