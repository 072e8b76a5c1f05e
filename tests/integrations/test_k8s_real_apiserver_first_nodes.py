"""The bounded node read (`Cluster.first_nodes`: a pool's first few nodes by name, and how many
it has) on the REAL kube-apiserver, as the bot's own ServiceAccount: without the node cache it
is one label-selected list with `limit` (the server stops at the limit), with the cache it
costs no request and counts the pool exactly, and both give the same first nodes. The pool's
members are added out of name order, interleaved with another pool's, so name order is the
server's, not the test's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from integrations.k8s import KubernetesCluster, KubernetesEndpoint
from integrations.k8s.node_cache import NodeCache
from tests.servers.kube_real_world import RealKube, wait_until

POOL = "nvidia.com/gpu.product"
NAMES = [f"gpu-node-{i:03d}" for i in (7, 2, 11, 4, 0, 9, 5, 1, 10, 3, 8, 6)]
IN_POOL = sorted(n for n in NAMES if int(n[-3:]) % 2 == 0)  # 000, 002, ... 010


@pytest.fixture
def fleet(real_kube: RealKube) -> RealKube:
    real_kube.reset()
    for name in NAMES:
        pool = "H100-pool-0" if int(name[-3:]) % 2 == 0 else "H100-pool-1"
        real_kube.add_node(name, labels={POOL: pool}, gpu_capacity=8)
    return real_kube


def _cluster(fleet: RealKube, *, watch: bool) -> KubernetesCluster:
    endpoint = KubernetesEndpoint(kubeconfig=str(fleet.kubeconfig), in_cluster=False)
    return KubernetesCluster.from_endpoint(endpoint, retries=0, watch_nodes=watch)


@pytest.fixture
def direct(fleet: RealKube) -> Iterator[KubernetesCluster]:
    cluster = _cluster(fleet, watch=False)
    yield cluster
    cluster.close()


@pytest.fixture
def cached(fleet: RealKube) -> Iterator[KubernetesCluster]:
    cluster = _cluster(fleet, watch=True)
    cache = cluster.node_cache
    assert cache is not None
    wait_until(lambda: _current(cache), what="the node cache to list 12 nodes and watch")
    yield cluster
    cluster.close()


def _current(cache: NodeCache) -> bool:
    return len(cache) == len(NAMES) and cache.select({}, wanted=cache.version) is not None


def _requests(cluster: KubernetesCluster) -> list[str]:
    """The requests the adapter sends from now on (the cache's watch aside), with queries."""
    sent: list[str] = []
    rest: Any = cluster.api.rest_client
    request = rest.request

    def counting(method: str, url: str, *args: Any, **kw: Any) -> Any:
        if "watch=" not in url:
            sent.append(f"{method} {url.split('/api/v1/', 1)[-1]}")
        return request(method, url, *args, **kw)

    rest.request = counting
    return sent


def test_a_bounded_read_asks_the_server_for_the_limit_only(direct: KubernetesCluster) -> None:
    sent = _requests(direct)
    sample = direct.first_nodes({POOL: "H100-pool-0"}, limit=2)
    assert [n.name for n in sample.nodes] == IN_POOL[:2]
    assert all(n.labels[POOL] == "H100-pool-0" and n.gpu_capacity == 8 for n in sample.nodes)
    assert sample.partial  # 6 in the pool: the text must not claim the 2 are all
    # a label-selected page leaves remainingItemCount unset: the rest is not counted
    assert sample.total is None
    assert sample.describe() == "the first 2 nodes read (more exist)"
    (request,) = sent
    assert request.startswith("GET nodes?") and "limit=2" in request
    assert "labelSelector=nvidia.com/gpu.product%3DH100-pool-0" in request


def test_a_bounded_read_of_a_whole_pool_counts_it(direct: KubernetesCluster) -> None:
    sample = direct.first_nodes({POOL: "H100-pool-1"}, limit=50)
    assert [n.name for n in sample.nodes] == sorted(set(NAMES) - set(IN_POOL))
    assert (sample.total, sample.partial) == (6, False)
    assert sample.describe() == "all 6 nodes read"


def test_the_node_cache_answers_without_a_request_and_counts_the_pool(
    direct: KubernetesCluster, cached: KubernetesCluster
) -> None:
    sent = _requests(cached)
    for limit in (1, 3, 6, 9):
        sample = cached.first_nodes({POOL: "H100-pool-0"}, limit=limit)
        listed = direct.first_nodes({POOL: "H100-pool-0"}, limit=limit)
        assert sample.nodes == listed.nodes
        assert sample.total == len(IN_POOL)
    assert sent == []
    assert cached.first_nodes({POOL: "H100-pool-0"}, limit=3).describe() == "3 of 6 nodes read"
