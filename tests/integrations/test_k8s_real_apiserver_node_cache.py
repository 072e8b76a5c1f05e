"""The adapter's node cache (one list+watch) on the REAL kube-apiserver, as the bot's own
ServiceAccount (the deployed ClusterRole must grant `watch nodes`): a pool read costs no
request once the cache is current, it answers what a label-selected list answers, it sees every
node change made before the bot's own write (read-your-writes), it re-lists after a 410 Gone,
and it says no (the caller lists) when its watch is down. bench/k8s_fleet_scale.py times it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bot.actions.guarding import SafetyGuard
from bot.actions.limits import SafetyLimits
from bot.clock import FakeClock
from integrations.errors import ClusterError
from integrations.k8s import KubernetesCluster, KubernetesEndpoint
from integrations.k8s.node_cache import Gone, NodeCache
from tests.servers.kube_real_world import RealKube, wait_until

POOL, RACK = "nvidia.com/gpu.product", "gpu-oncall.io/rack"
TARGET = "gpu-node-003"


@pytest.fixture
def fleet(real_kube: RealKube) -> RealKube:
    real_kube.reset()
    for i in range(12):
        labels = {POOL: f"H100-pool-{i // 6}", RACK: f"rack-{i // 3}"}
        real_kube.add_node(f"gpu-node-{i:03d}", labels=labels, gpu_capacity=8)
    return real_kube


@pytest.fixture
def cached(fleet: RealKube) -> Iterator[KubernetesCluster]:
    endpoint = KubernetesEndpoint(kubeconfig=str(fleet.kubeconfig), in_cluster=False)
    cluster = KubernetesCluster.from_endpoint(endpoint, retries=0, watch_nodes=True)
    cache = cluster.node_cache
    assert cache is not None
    wait_until(lambda: _current(cache, 12), what="the node cache to list 12 nodes and watch")
    yield cluster
    cluster.close()


def _current(cache: NodeCache, size: int) -> bool:
    return len(cache) == size and cache.select({}, wanted=cache.version) is not None


def _requests(cluster: KubernetesCluster) -> tuple[list[str], Any]:
    sent: list[str] = []
    rest: Any = cluster.api.rest_client
    request = rest.request

    def counting(method: str, url: str, *args: Any, **kw: Any) -> Any:
        if "watch=" not in url:  # the cache's own thread
            sent.append(f"{method} {url.split('?', 1)[0].rsplit('/', 1)[-1]}")
        return request(method, url, *args, **kw)

    rest.request = counting
    return sent, request


def test_pool_reads_cost_no_request_and_match_the_label_list(
    fleet: RealKube, cached: KubernetesCluster
) -> None:
    direct = KubernetesCluster.from_endpoint(
        KubernetesEndpoint(kubeconfig=str(fleet.kubeconfig), in_cluster=False), retries=0
    )
    try:
        listed = direct.nodes(labels={POOL: "H100-pool-0"})
    finally:
        direct.close()
    sent, _ = _requests(cached)
    guard = SafetyGuard(limits=SafetyLimits(), cluster=cached, clock=FakeClock())

    observed = guard.observe(action="cordon", target=TARGET, target_kind="node")
    from_cache = cached.nodes(labels={POOL: "H100-pool-0"})

    assert sent == [f"GET {TARGET}"]  # the target by name; pool and rack from the cache
    assert sorted(n.name for n in observed.nodes) == [f"gpu-node-{i:03d}" for i in range(6)]
    fields = lambda n: (n.name, n.ready, n.unschedulable, n.labels, n.gpu_capacity)  # noqa: E731
    assert sorted(map(fields, from_cache)) == sorted(map(fields, listed))
    assert cached.nodes(labels={POOL: None}) == []  # absence selects the unlabelled: none


def test_every_change_before_the_bots_own_write_is_counted(
    fleet: RealKube, cached: KubernetesCluster
) -> None:
    """Another actor cordons a pool member, then the bot cordons the target: the drain's
    guard (after the cordon's own write) counts both out of service, whatever the watch's lag."""
    fleet.core.patch_node("gpu-node-001", {"spec": {"unschedulable": True}})
    fleet.core.delete_node("gpu-node-005")
    cached.cordon(TARGET)
    guard = SafetyGuard(limits=SafetyLimits(), cluster=cached, clock=FakeClock())

    observed = guard.observe(action="drain", target=TARGET, target_kind="node")

    down = sorted(n.name for n in observed.nodes if n.unschedulable)
    assert down == ["gpu-node-001", TARGET]
    assert "gpu-node-005" not in {n.name for n in observed.nodes}


def test_a_dropped_watch_resumes_a_410_relists_and_a_closed_cache_says_no(
    fleet: RealKube, cached: KubernetesCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = cached.node_cache
    assert cache is not None
    watch = cache._watch
    gone = [Gone("too old resource version: 1 (4242)")]

    def compacted_once() -> None:  # what the API server answers after etcd's compaction
        if gone:
            raise gone.pop()
        watch()

    monkeypatch.setattr(cache, "_watch", compacted_once)
    cache._response.shutdown()  # drop the open watch, as a restarted API server would
    wait_until(lambda: cache.relists == 1 and _current(cache, 12), what="a re-list after 410")
    fleet.core.patch_node("gpu-node-007", {"metadata": {"labels": {POOL: "H100-pool-0"}}})
    cached.nodes(["gpu-node-007"])  # the bot read the new version: the cache must have it

    assert len(cached.nodes(labels={POOL: "H100-pool-0"})) == 7
    cache.close()
    assert cache.select({POOL: "H100-pool-0"}, wanted=0) is None
    assert len(cached.nodes(labels={POOL: "H100-pool-0"})) == 7  # listed by label instead


def test_an_error_event_410_is_gone_and_another_error_names_itself() -> None:
    cache = NodeCache(api=None)  # type: ignore[arg-type]  # _apply needs no transport
    with pytest.raises(Gone):
        cache._apply({"type": "ERROR", "object": {"code": 410, "message": "too old"}})
    with pytest.raises(ClusterError, match="node watch error: etcd is down"):
        cache._apply({"type": "ERROR", "object": {"code": 500, "message": "etcd is down"}})
