"""An action costs the same at any fleet size, on the REAL kube-apiserver: the safety guard's
observation before a cordon and a drain, the approval's impact read and the evidence
snapshot's peers read the target by name and its pool / topology domain by label, never a list
of every node (which made one ECC incident list the fleet four times: 47 requests and ~2 s per
removal at 2,016 nodes). bench/k8s_fleet_scale.py measures the time; this counts requests.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bot.actions.guarding import SafetyGuard
from bot.actions.impact import JobReadings, read_impact
from bot.actions.limits import SafetyLimits
from bot.clock import FakeClock
from integrations.k8s import KubernetesCluster, KubernetesEndpoint
from integrations.telemetry import SignalQuery, SignalResult
from tests.servers.kube_real_world import RealKube

POOL, RACK = "nvidia.com/gpu.product", "gpu-oncall.io/rack"
TARGET = "gpu-node-003"


class NoJobSignals:
    def read(self, query: SignalQuery) -> SignalResult:
        return SignalResult(signal=query.signal)


@contextmanager
def counted(cluster: KubernetesCluster) -> Iterator[list[str]]:
    """The requests the adapter sends while the block runs, as `METHOD path?query`."""
    sent: list[str] = []
    rest: Any = cluster.api.rest_client
    request = rest.request

    def counting(method: str, url: str, *args: Any, **kw: Any) -> Any:
        sent.append(f"{method} /{url.split('://', 1)[-1].split('/', 1)[-1]}")
        return request(method, url, *args, **kw)

    rest.request = counting
    try:
        yield sent
    finally:
        rest.request = request


def _fleet(real: RealKube, size: int) -> None:
    real.reset()
    for i in range(size):
        labels = {POOL: f"H100-pool-{i // 10}", RACK: f"rack-{i // 4}"}
        real.add_node(f"gpu-node-{i:03d}", labels=labels)


def _action_requests(real: RealKube) -> dict[str, list[str]]:
    endpoint = KubernetesEndpoint(kubeconfig=str(real.kubeconfig), in_cluster=False)
    cluster = KubernetesCluster.from_endpoint(endpoint, retries=0)
    guard = SafetyGuard(limits=SafetyLimits(), cluster=cluster, clock=FakeClock())
    readings = JobReadings(NoJobSignals(), [])
    found = {}
    try:
        for action in ("cordon", "drain"):
            with counted(cluster) as sent:
                observed = guard.observe(action=action, target=TARGET, target_kind="node")
            found[f"guard {action}"] = sent
            sizes = {scope: count.nodes for scope, count in observed.counts.items()}
            assert [n.name for n in observed.nodes] == [TARGET]  # the pool and rack counted
            assert sizes == {f"pool {POOL}=H100-pool-0": 10, f"domain {RACK}=rack-0": 4}
        with counted(cluster) as sent:
            impact = read_impact(cluster=cluster, readings=readings, node=TARGET, pool_label=POOL)
        found["impact"] = sent
        assert impact.pool == "H100-pool-0"
    finally:
        cluster.close()
    return found


def test_actions_read_the_target_and_its_pool_never_the_fleet(real_kube: RealKube) -> None:
    _fleet(real_kube, 20)
    small = _action_requests(real_kube)
    _fleet(real_kube, 60)
    large = _action_requests(real_kube)

    assert {k: len(v) for k, v in small.items()} == {k: len(v) for k, v in large.items()}
    every = [r for requests in large.values() for r in requests]
    node_lists = [r for r in every if r.startswith("GET /api/v1/nodes?")]
    assert node_lists and all("labelSelector=" in r for r in node_lists), node_lists
    assert f"GET /api/v1/nodes/{TARGET}" in every  # the target by name
