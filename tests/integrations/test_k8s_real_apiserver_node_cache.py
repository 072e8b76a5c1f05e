"""The adapter's node cache (one list+watch) on the REAL kube-apiserver, as the bot's own
ServiceAccount (the deployed ClusterRole must grant `watch nodes`): a pool read costs no
request once the cache is current, it answers what a label-selected list answers, the bot's
own writes are in it at once (write-through: the PATCH's answer) and a node never moves back
to an older resourceVersion (a late event, a stale answer, a re-list from before the write),
another writer's change the bot has read is counted whatever the watch's lag, it re-lists after
a 410 Gone, and it says no (the caller lists) when its watch is down. The watch's lag is made
by holding its events (`Held`), never by waiting. bench/k8s_fleet_scale.py times it."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from bot.actions.guarding import SafetyGuard
from bot.actions.limits import SafetyLimits
from bot.clock import FakeClock
from integrations.cluster import count_of
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
    assert [n.name for n in observed.nodes] == [TARGET]  # the pool and rack counted, not listed
    pool, rack = (
        observed.counts[f"pool {POOL}=H100-pool-0"],
        observed.counts[f"domain {RACK}=rack-1"],
    )
    assert (pool.nodes, pool.gpus, pool.down) == (6, 48, ())
    assert (rack.nodes, rack.gpus, rack.down) == (3, 24, ())
    assert cached.count_nodes({POOL: "H100-pool-0"}) == count_of(listed)
    fields = lambda n: (n.name, n.ready, n.unschedulable, n.labels, n.gpu_capacity)  # noqa: E731
    assert sorted(map(fields, from_cache)) == sorted(map(fields, listed))
    assert cached.nodes(labels={POOL: None}) == []  # absence selects the unlabelled: none


class Held:
    """The cache's watch, lagging: its events are kept (in order) until `release`."""

    def __init__(self, cache: NodeCache) -> None:
        self.apply = cache._apply
        self.events: list[Mapping[str, Any]] = []
        self._lock, self._holding = threading.Lock(), True

    def __call__(self, event: Mapping[str, Any]) -> None:
        with self._lock:
            if self._holding:
                self.events.append(event)
                return
        self.apply(event)

    def versions(self, name: str) -> list[str]:
        return [
            e["object"]["metadata"]["resourceVersion"]
            for e in list(self.events)
            if e.get("type") == "MODIFIED" and e["object"]["metadata"]["name"] == name
        ]

    def release(self, through: int | None = None) -> None:
        """Apply the held events; with `through`, only those up to that resourceVersion (the
        rest stay held)."""
        with self._lock:
            while self.events and (through is None or _version(self.events[0]) <= through):
                self.apply(self.events.pop(0))
            self._holding = through is not None


def _version(event: Mapping[str, Any]) -> int:
    return int(event["object"]["metadata"]["resourceVersion"])


@pytest.fixture
def held(cached: KubernetesCluster, monkeypatch: pytest.MonkeyPatch) -> Held:
    cache = cached.node_cache
    assert cache is not None
    hold = Held(cache)
    monkeypatch.setattr(cache, "_apply", hold)
    return hold


def _down(cluster: KubernetesCluster, action: str) -> list[str]:
    guard = SafetyGuard(limits=SafetyLimits(), cluster=cluster, clock=FakeClock())
    observed = guard.observe(action=action, target=TARGET, target_kind="node")
    return sorted({n.name for count in observed.counts.values() for n in count.down})


def test_the_bots_own_write_is_read_back_without_waiting_for_the_watch(
    cached: KubernetesCluster, held: Held
) -> None:
    """The drain's guard after the bot's own cordon counts the target out of service from the
    cache while the watch has delivered nothing: no wait, no fallback list."""
    cache = cached.node_cache
    assert cache is not None
    cached.cordon(TARGET)
    sent, _ = _requests(cached)

    assert _down(cached, "drain") == [TARGET]
    assert sent == [f"GET {TARGET}"]  # pool and rack from the cache, not a fallback list

    wait_until(lambda: len(held.versions(TARGET)) == 1, what="the watch's event of the cordon")
    (written,) = held.versions(TARGET)
    held.release()  # the watch's own event of that write: a no-op
    assert cache.holds(TARGET, int(written)) and not cache.holds(TARGET, int(written) + 1)
    assert _down(cached, "drain") == [TARGET]


def test_an_older_version_arriving_late_never_moves_a_node_back(
    fleet: RealKube, cached: KubernetesCluster, held: Held
) -> None:
    """Another writer labels the target, then the bot cordons it: the label's event, older
    than the write-through and delivered after it, and the pre-cordon Node handed in again,
    change nothing; the cached target stays the cordon's answer (cordoned, and labelled)."""
    cache = cached.node_cache
    assert cache is not None
    fleet.core.patch_node(TARGET, {"metadata": {"labels": {"team": "infra"}}})
    serializer: Any = fleet.api
    before = serializer.sanitize_for_serialization(fleet.core.read_node(TARGET))
    cached.cordon(TARGET)
    wait_until(lambda: len(held.versions(TARGET)) == 2, what="the label's and cordon's events")
    label_event, cordon_event = map(int, held.versions(TARGET))
    assert int(before["metadata"]["resourceVersion"]) == label_event < cordon_event

    assert cache.wrote(before)  # a stale answer: the cache holds a newer one, and keeps it
    held.release(through=label_event)  # the label's event comes late; the cordon's still held
    sent, _ = _requests(cached)

    (node,) = [n for n in cached.nodes(labels={POOL: "H100-pool-0"}) if n.name == TARGET]
    assert node.unschedulable and node.labels["team"] == "infra"
    assert sent == []  # the cache answered: the watch has applied the label, the bot's own read
    assert cache.holds(TARGET, cordon_event) and not cache.holds(TARGET, cordon_event + 1)


def test_a_relist_from_before_the_bots_write_keeps_the_write(
    fleet: RealKube, cached: KubernetesCluster, held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A paged list is a snapshot at its first page's revision: a 410 re-list that read the
    fleet before the bot's cordon keeps the cordon the cache already holds."""
    cache = cached.node_cache
    assert cache is not None
    raw, watch = cache._raw, cache._watch
    old_page = raw(lambda: cached.transport.core.list_node(_preload_content=False))
    cached.cordon(TARGET)
    pages, gone = [old_page], [Gone("too old resource version")]

    def compacted_once() -> None:
        if gone:
            raise gone.pop()
        watch()

    monkeypatch.setattr(cache, "_raw", lambda call: pages.pop() if pages else raw(call))
    monkeypatch.setattr(cache, "_watch", compacted_once)
    cache._response.shutdown()
    wait_until(lambda: cache.relists == 1 and _current(cache, 12), what="a re-list after 410")
    sent, _ = _requests(cached)

    assert _down(cached, "drain") == [TARGET]  # no event after the old page applied yet
    assert sent == [f"GET {TARGET}"]  # from the cache: it holds the bot's own write


def test_another_writers_change_the_bot_read_is_counted_whatever_the_watchs_lag(
    fleet: RealKube, cached: KubernetesCluster, held: Held
) -> None:
    """Another writer cordons a pool member and the bot reads it: with the watch behind, the
    guard lists the pool by label (after `catch_up_seconds`); once the watch delivers, the
    cache answers, the member counted either way. A deletion the bot did not read is counted
    once the watch delivers it."""
    cache = cached.node_cache
    assert cache is not None
    cache.catch_up_seconds = 0.05
    fleet.core.patch_node("gpu-node-001", {"spec": {"unschedulable": True}})
    fleet.core.delete_node("gpu-node-005")
    cached.nodes(["gpu-node-001"])
    wait_until(lambda: _listed_down(fleet) == ["gpu-node-001"], what="the API's watch cache")
    sent, _ = _requests(cached)

    assert _down(cached, "cordon") == ["gpu-node-001"]
    assert sent.count("GET nodes") == 2  # the pool and the rack by label: the cache said no

    held.release()
    sent.clear()
    wait_until(lambda: "gpu-node-005" not in {n.name for n in cache.select({}, wanted=0) or []},
               what="the watch to deliver the deletion")  # fmt: skip
    assert _down(cached, "cordon") == ["gpu-node-001"]
    assert sent == [f"GET {TARGET}"]
    assert cached.count_nodes({POOL: "H100-pool-0"}).nodes == 5  # the deletion, counted


def _listed_down(fleet: RealKube) -> list[str]:
    """The cordoned nodes in what a label list answers (the API server's watch cache)."""
    listed: Any = fleet.core.list_node(label_selector=f"{POOL}=H100-pool-0", resource_version="0")
    return sorted(n.metadata.name for n in listed.items if n.spec.unschedulable)


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
    moved = cached.count_nodes({POOL: "H100-pool-0"}), cached.count_nodes({POOL: "H100-pool-1"})
    assert [(c.nodes, c.gpus) for c in moved] == [(7, 56), (5, 40)]  # counted as it moved
    cache.close()
    assert cache.select({POOL: "H100-pool-0"}, wanted=0) is None
    assert len(cached.nodes(labels={POOL: "H100-pool-0"})) == 7  # listed by label instead


def test_an_error_event_410_is_gone_and_another_error_names_itself() -> None:
    cache = NodeCache(api=None)  # type: ignore[arg-type]  # _apply needs no transport
    with pytest.raises(Gone):
        cache._apply({"type": "ERROR", "object": {"code": 410, "message": "too old"}})
    with pytest.raises(ClusterError, match="node watch error: etcd is down"):
        cache._apply({"type": "ERROR", "object": {"code": 500, "message": "etcd is down"}})
