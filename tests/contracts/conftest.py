"""Fixtures for the port contract suites: one small simulated fleet, seen through SimCluster,
through KubernetesCluster talking HTTP to the fake API server that mirrors it, or through
KubernetesCluster on the REAL kube-apiserver (`apiserver`: the session's control plane, the
fleet written into it, the bot's own ServiceAccount bound to exactly the deployed roles); and the
cases with a Slurm meaning on SlurmCluster against the session's real Slurm daemons (`slurm`).
Cases that need a kubelet or a controller (logs, Jobs that finish) or an interleaving only the
fake can stage are marked `fake_api_only` and not collected for the real API server.

The "kubernetes" world's fake grants exactly the ClusterRole in deploy/kubernetes/base plus the
node agent's Job Role, so a contract case that needs an API the roles lack fails with 403; every
request the adapter sent must map to `REQUIRED_PERMISSIONS` or `JOB_PERMISSIONS` (checked at
teardown). Time never passes for real:
the adapter's backoff sleeps advance a fake monotonic clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from integrations.cluster import Cluster
from integrations.k8s import KubernetesCluster, KubernetesEndpoint
from simulator import Fleet, SimCluster
from simulator.marking import SimBudget, SimHealthCheck
from simulator.pods import SimPod
from tests.servers.fake_kube import FakeKube, KubeRequest, start_fake_kube
from tests.servers.kube_real_world import RealKube
from tests.servers.kube_world import (
    MIRROR,
    FakeTimer,
    contract_fleet,
    job_permissions,
    make_kubernetes,
    required_permissions,
    role_permissions,
)
from tests.servers.slurm import SlurmServers, make_slurm_cluster


@dataclass
class World:
    """One fleet seen through one adapter, with the few setup moves both worlds support."""

    kind: str
    fleet: Fleet
    cluster: Cluster
    fake: FakeKube | None = None
    timer: FakeTimer = field(default_factory=FakeTimer)
    real: RealKube | None = None

    def sent(self, method: str | None = None, *, path: str | None = None) -> list[KubeRequest]:
        """Requests the API server received ([] in the sim world, which has none)."""
        return [] if self.fake is None else self.fake.sent(method, path=path)

    def add_budget(self, name: str, namespace: str, labels: dict[str, str], **spec: Any) -> None:
        if self.fake is not None:
            self.fake.add_pdb(name, namespace, match_labels=labels, **spec)
        elif self.real is not None:
            self.real.add_pdb(name, namespace, match_labels=labels, **spec)
        else:
            self.fleet.add_budget(SimBudget(name, namespace, labels, **spec))

    def add_health_check(
        self, name: str, selector: dict[str, Any], pause_requests: list[str] | None = None
    ) -> None:
        """A medik8s NodeHealthCheck selecting nodes by `selector`, paused by `pause_requests`."""
        if self.fake is not None:
            self.fake.add_health_check(name, selector=selector, pause_requests=pause_requests)
        elif self.real is not None:
            self.real.add_health_check(name, selector=selector, pause_requests=pause_requests)
        else:
            check = SimHealthCheck(name, selector, tuple(pause_requests or ()))
            self.fleet.set_health_check(check)

    def add_mirror_pod(self, name: str, namespace: str, *, node: str) -> None:
        """A static pod's mirror on `node` (no scenario defines one)."""
        if self.fake is not None:
            self.fake.add_pod(name, namespace, node=node, annotations={MIRROR: "checksum"})
        elif self.real is not None:
            self.real.add_pod(name, namespace, node=node, annotations={MIRROR: "checksum"})
        else:
            pod = SimPod(name, namespace, node, "Running", None, {}, mirror=True)
            self.fleet.pods[(namespace, name)] = pod

    def deny(self, verb: str, resource: str, subresource: str = "", group: str = "") -> None:
        if self.fake is not None:
            self.fake.deny(verb, resource, group=group, subresource=subresource)
        elif self.real is not None:
            self.real.deny(verb, resource, group=group, subresource=subresource)
        else:
            assert isinstance(self.cluster, SimCluster)
            self.cluster.deny(verb, resource + (f"/{subresource}" if subresource else ""))

    def interfere(self, node: str, *, taint: str) -> None:
        """Another writer adds `taint` while the adapter is between reading and writing the
        node (in the sim, nothing can interleave: the write simply comes first)."""
        if self.fake is not None:
            self.fake.interfere(node, taint=taint)
        else:
            head, _, effect = taint.rpartition(":")
            key, _, value = head.partition("=")
            self.fleet.taint(node, key=key, value=value, effect=effect)


@pytest.fixture
def fleet() -> Fleet:
    return contract_fleet()


#: The contract cases with a Slurm meaning, run on real Slurm daemons too (the others name
#: pods, taints, PDBs, RBAC denials or Jobs that Slurm does not have; tests/slurm/ covers the
#: Slurm verbs themselves). The Slurm world's nodes are the session cluster's gpu-node-00..15.
SLURM_CASES = frozenset(
    {
        "test_nodes_by_name_and_an_unknown_name",
        "test_cordon_twice_changes_once_and_uncordon_undoes_it",
        "test_annotate_and_label_add_then_remove",
        "test_an_unknown_node_raises_node_not_found",
        "test_hostile_names_are_refused_before_any_request",
        "test_hostile_marker_values_are_refused_before_any_request",
        "test_no_health_checks_means_no_pauses",
        "test_an_unknown_job_raises_job_not_found",
        "test_hostile_job_names_are_refused_before_any_request",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect (never skip) the Slurm runs of cases that have no Slurm meaning, and the cases
    marked `fake_api_only` on the real API server (it cannot express them)."""
    keep, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        world = callspec.params.get("world") if callspec is not None else None
        name = getattr(item, "originalname", item.name)
        in_suite = item.path.parent.name == "contracts"
        off_slurm = in_suite and world == "slurm" and name not in SLURM_CASES
        off_real = world == "apiserver" and item.get_closest_marker("fake_api_only") is not None
        (dropped if off_slurm or off_real else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(params=["sim", "kubernetes", "apiserver", "slurm"])
def world(request: pytest.FixtureRequest, fleet: Fleet, tmp_path: Path) -> Iterator[World]:
    if request.param == "sim":
        yield World("sim", fleet, SimCluster(fleet))
        return
    if request.param == "apiserver":
        real: RealKube = request.getfixturevalue("real_kube")
        real.reset()
        real.seed_from_fleet(fleet)
        endpoint = KubernetesEndpoint(kubeconfig=str(real.kubeconfig), in_cluster=False)
        timer = FakeTimer()
        cluster = KubernetesCluster.from_endpoint(
            endpoint, clock=timer.clock, sleep=timer.sleep, page_size=2
        )
        yield World("apiserver", fleet, cluster, timer=timer, real=real)
        cluster.close()
        return
    if request.param == "slurm":
        servers: SlurmServers = request.getfixturevalue("slurm_servers")
        servers.reset()
        slurm = make_slurm_cluster(servers)
        yield World("slurm", fleet, slurm)
        slurm.close()
        return
    with start_fake_kube() as fake:
        fake.seed_from_fleet(fleet)
        fake.grant_only(role_permissions() | job_permissions())
        timer = FakeTimer()
        cluster = make_kubernetes(fake, tmp_path, timer=timer, page_size=2)
        yield World("kubernetes", fleet, cluster, fake, timer)
        cluster.close()
        used = {r.permission for r in fake.requests if r.permission is not None}
        allowed = required_permissions() | job_permissions()
        assert used <= allowed, used - allowed
