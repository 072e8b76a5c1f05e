"""Fixtures for the port contract suites: one small simulated fleet, seen either through
SimCluster or through KubernetesCluster talking HTTP to the fake API server that mirrors it.

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
from simulator import Fleet, SimCluster
from simulator.marking import SimBudget, SimHealthCheck
from simulator.pods import SimPod
from tests.servers.fake_kube import FakeKube, KubeRequest, start_fake_kube
from tests.servers.kube_world import (
    MIRROR,
    FakeTimer,
    contract_fleet,
    job_permissions,
    make_kubernetes,
    required_permissions,
    role_permissions,
)


@dataclass
class World:
    """One fleet seen through one adapter, with the few setup moves both worlds support."""

    kind: str
    fleet: Fleet
    cluster: Cluster
    fake: FakeKube | None = None
    timer: FakeTimer = field(default_factory=FakeTimer)

    def sent(self, method: str | None = None, *, path: str | None = None) -> list[KubeRequest]:
        """Requests the API server received ([] in the sim world, which has none)."""
        return [] if self.fake is None else self.fake.sent(method, path=path)

    def add_budget(self, name: str, namespace: str, labels: dict[str, str], **spec: Any) -> None:
        if self.fake is not None:
            self.fake.add_pdb(name, namespace, match_labels=labels, **spec)
        else:
            self.fleet.add_budget(SimBudget(name, namespace, labels, **spec))

    def add_health_check(
        self, name: str, selector: dict[str, Any], pause_requests: list[str] | None = None
    ) -> None:
        """A medik8s NodeHealthCheck selecting nodes by `selector`, paused by `pause_requests`."""
        if self.fake is not None:
            self.fake.add_health_check(name, selector=selector, pause_requests=pause_requests)
        else:
            check = SimHealthCheck(name, selector, tuple(pause_requests or ()))
            self.fleet.set_health_check(check)

    def add_mirror_pod(self, name: str, namespace: str, *, node: str) -> None:
        """A static pod's mirror on `node` (no scenario defines one)."""
        if self.fake is not None:
            self.fake.add_pod(name, namespace, node=node, annotations={MIRROR: "checksum"})
        else:
            pod = SimPod(name, namespace, node, "Running", None, {}, mirror=True)
            self.fleet.pods[(namespace, name)] = pod

    def deny(self, verb: str, resource: str, subresource: str = "", group: str = "") -> None:
        if self.fake is not None:
            self.fake.deny(verb, resource, group=group, subresource=subresource)
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


@pytest.fixture(params=["sim", "kubernetes"])
def world(request: pytest.FixtureRequest, fleet: Fleet, tmp_path: Path) -> Iterator[World]:
    if request.param == "sim":
        yield World("sim", fleet, SimCluster(fleet))
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

