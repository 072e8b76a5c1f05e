"""What one ECC-storm incident costs on the REAL kube-apiserver as the fleet grows: API requests
per step and wall time per removal, at 100, 1,000 and 5,000 nodes (and 10 pods each on 10% of
them).

Starts etcd + the pinned kube-apiserver (tests/servers/kube_apiserver.py; build it first with
tools/setup/kube-apiserver.sh), creates the fleet as admin (nodes in pools of 100 by
`nvidia.com/gpu.product`, racks of 16 by `gpu-oncall.io/rack`), then, as the bot's own
ServiceAccount bound to exactly the deployed ClusterRole, runs the Cluster calls the ECC
journey makes, through the bot's own code (the gather steps' reads, the approval's impact
read, the safety guard's observation before the cordon and before the drain, the cordon, the
drain) on a node with pods, twice: with the pool and domain reads as label-selected lists
(served from the API server's watch cache) and with the adapter's own node cache (one
list+watch, integrations/k8s/node_cache.py). Requests are counted at the client (every HTTP
request the calling thread sends; not the cache's watch). A removal (the guard's observation
before a cordon, then the cordon) is timed `--repeat` times in five modes, interleaved, each on
its own node and client (a full garbage collection, untimed, before each):

- `fleet list`: before issue 19, a paginated list of every node;
- `label lists`: the pool and domain by label from the API server's watch cache;
- `cache: scan, waits`: the node cache as it was (each read scans every cached node, and
  waits for the watch to deliver the bot's own previous write);
- `cache: index, waits`: the label index, no write-through;
- `cache: index, write-through`: the node cache now.

Median and minimum per mode, the median of each request, and of the cache's two parts: the
wait for its watch, and the selection of the pool and the domain (where the time goes).

    python bench/k8s_fleet_scale.py --sizes 100 1000 5000 --json out.json
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common import ROOT, machine

sys.path.insert(0, str(ROOT))  # tests.servers

from bot.actions.guarding import SafetyGuard  # noqa: E402
from bot.actions.impact import JobReadings, read_impact  # noqa: E402
from bot.actions.limits import SafetyLimits  # noqa: E402
from bot.clock import SystemClock  # noqa: E402
from integrations.cluster import NodeInfo  # noqa: E402
from integrations.errors import ClusterError  # noqa: E402
from integrations.k8s import KubernetesCluster, KubernetesEndpoint  # noqa: E402
from integrations.k8s.node_cache import NodeCache  # noqa: E402
from integrations.telemetry import SignalResult  # noqa: E402
from tests.servers.kube_apiserver import start_control_plane  # noqa: E402
from tests.servers.kube_real_world import RealKube  # noqa: E402

POOL, RACK = "nvidia.com/gpu.product", "gpu-oncall.io/rack"
POOL_SIZE, RACK_SIZE, PODS_PER_BUSY_NODE = 100, 16, 10


class NoTelemetry:
    """The impact read's job signals: none (the bench measures the cluster's side)."""

    def read(self, query: Any) -> SignalResult:
        return SignalResult(signal=query.signal)


class ScanningCache(NodeCache):
    """The node cache before its label index: every read looks at every cached node."""

    def _matching(self, labels: Mapping[str, str | None]) -> list[NodeInfo]:
        return [n for n in self._nodes.values() if all(
            (k not in n.labels) if v is None else n.labels.get(k) == v for k, v in labels.items()
        )]  # fmt: skip


CACHES: dict[str, Callable[[Any], NodeCache]] = {
    "cache: scan, waits": lambda api: ScanningCache(api, write_through=False),
    "cache: index, waits": lambda api: NodeCache(api, write_through=False),
    "cache: index, write-through": NodeCache,
}
"""The node cache's modes: as it was, with the label index, and now (the index and the
write-through)."""


def node_name(i: int) -> str:
    return f"gpu-node-{i:05d}"


@contextmanager
def counted(cluster: KubernetesCluster) -> Iterator[list[tuple[str, float]]]:
    """Every HTTP request the adapter sends while the block runs (method and path, seconds).
    The node cache's own watch thread uses the same client: its requests are not the
    block's, so only the calling thread's are counted."""
    sent: list[tuple[str, float]] = []
    rest: Any = cluster.api.rest_client
    request = rest.request
    caller = threading.get_ident()

    def counting(method: str, url: str, *args: Any, **kw: Any) -> Any:
        started = time.monotonic()
        try:
            return request(method, url, *args, **kw)
        finally:
            if threading.get_ident() == caller:
                path = url.split("://", 1)[-1].split("/", 1)[-1].split("?", 1)[0]
                sent.append((f"{method} /{path}", time.monotonic() - started))

    rest.request = counting
    try:
        yield sent
    finally:
        rest.request = request


def journey(cluster: KubernetesCluster, *, target: str) -> dict[str, Any]:
    """The ECC journey's cluster calls on `target` (a busy node): requests and seconds per
    step. The node is uncordoned afterwards (its pods stay evicted)."""
    guard = SafetyGuard(limits=SafetyLimits(), cluster=cluster, clock=SystemClock())
    readings = JobReadings(NoTelemetry(), [])  # type: ignore[arg-type]
    since = datetime.now(UTC) - timedelta(hours=1)

    def observe(action: str) -> Any:
        return guard.observe(action=action, target=target, target_kind="node")

    def impact() -> Any:
        return read_impact(cluster=cluster, readings=readings, node=target, pool_label=POOL)

    steps: dict[str, Callable[[], Any]] = {
        "triage: node": lambda: cluster.nodes([target]),
        "triage: kernel log": lambda: _tolerant(lambda: cluster.node_logs(target)),
        "triage: pods": lambda: cluster.pods_on(target),
        "triage: events": lambda: cluster.events(target, since=since),
        "approval: impact": impact,
        "guard: before cordon": lambda: observe("cordon"),
        "cordon": lambda: cluster.cordon(target),
        "guard: before drain": lambda: observe("drain"),
        "drain": lambda: cluster.drain(target, grace=timedelta(seconds=0)),
    }
    requests, seconds = {}, {}
    for name, step in steps.items():
        with counted(cluster) as sent:
            started = time.monotonic()
            step()
            seconds[name] = round(time.monotonic() - started, 4)
        requests[name] = len(sent)
    cluster.uncordon(target)
    return {"requests": requests, "requests_total": sum(requests.values()), "seconds": seconds}


def removals(
    modes: dict[str, tuple[KubernetesCluster, str]], *, repeat: int
) -> dict[str, dict[str, Any]]:
    """Time one removal (the guard's observation before a cordon, then the cordon) `repeat`
    times per mode, each mode on its own (client, node), the modes interleaved so load affects
    them alike; the node is uncordoned (untimed) after each, so the next removal's guard reads
    the bot's own previous write. Median and minimum seconds, requests, the median seconds of
    each request of the removal, and of the node cache's wait and selection."""
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    parts: dict[str, dict[str, list[float]]] = {mode: {"wait": [], "select": []} for mode in modes}
    per_request: dict[str, dict[str, list[float]]] = {mode: {} for mode in modes}
    requests: dict[str, int] = {}
    for _ in range(repeat):
        for mode, (cluster, target) in modes.items():
            guard = SafetyGuard(limits=SafetyLimits(), cluster=cluster, clock=SystemClock())
            gc.collect()  # the fleet-list mode's garbage is not charged to the next mode
            with counted(cluster) as sent, timed_cache(cluster) as took:
                started = time.monotonic()
                if mode == "fleet list":  # before issue 19: the guard listed every node
                    cluster.nodes()
                    cluster.nodes([target])
                else:
                    guard.observe(action="cordon", target=target, target_kind="node")
                cluster.cordon(target)
                times[mode].append(time.monotonic() - started)
            for part, spent in took.items():
                parts[mode][part].append(sum(spent))
            cluster.uncordon(target)
            requests[mode] = len(sent)
            for i, (path, seconds) in enumerate(sent):
                per_request[mode].setdefault(f"{i + 1}. {path}", []).append(seconds)
    return {
        mode: {
            "median_seconds": round(statistics.median(times[mode]), 4),
            "min_seconds": round(min(times[mode]), 4),
            "requests": requests[mode],
            "cache_seconds": {
                part: round(statistics.median(v), 5) for part, v in parts[mode].items() if v
            },
            "request_seconds": {
                k: round(statistics.median(v), 4) for k, v in per_request[mode].items()
            },
        }
        for mode in modes
    }


@contextmanager
def timed_cache(cluster: KubernetesCluster) -> Iterator[dict[str, list[float]]]:
    """Seconds of each node-cache read's two parts: the wait for the watch to catch up
    (`_current`) and the selection (`_matching`)."""
    took: dict[str, list[float]] = {}
    cache = cluster.node_cache
    if cache is None:
        yield took
        return
    for part, method in (("wait", "_current"), ("select", "_matching")):
        took[part] = []
        setattr(cache, method, _timing(getattr(cache, method), took[part]))
    try:
        yield took
    finally:
        del cache._current, cache._matching


def _timing(call: Callable[..., Any], into: list[float]) -> Callable[..., Any]:
    def timed(*args: Any, **kw: Any) -> Any:
        started = time.monotonic()
        try:
            return call(*args, **kw)
        finally:
            into.append(time.monotonic() - started)

    return timed


def wait_synced(cache: NodeCache, size: int) -> float:
    """Seconds until the cache holds `size` nodes and its watch is open (bounded: 600 s)."""
    started = time.monotonic()
    while len(cache) < size or cache.select({}, wanted=0) is None:
        if time.monotonic() - started > 600:
            raise SystemExit(f"the node cache did not sync {size} nodes in 600 s")
        time.sleep(0.05)
    return time.monotonic() - started


def _tolerant(call: Callable[[], Any]) -> None:
    with contextlib.suppress(ClusterError):  # no kubelet: it fails, as the gather step records
        call()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--repeat", type=int, default=9, help="removals timed per mode")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp, start_control_plane() as plane:
        real = RealKube(plane)
        kubeconfig = real.bot_kubeconfig(Path(tmp) / "bot.kubeconfig")
        endpoint = KubernetesEndpoint(kubeconfig=str(kubeconfig), in_cluster=False)
        created = 0
        for run, size in enumerate(sorted(args.sizes)):
            seconds = create_fleet_from(real, created, size)
            created = size
            clients = {mode: connect(endpoint) for mode in ("fleet list", "label lists", *CACHES)}
            try:
                synced = {
                    mode: wait_synced(start_cache(clients[mode], make), size)
                    for mode, make in CACHES.items()
                }
                now = clients["cache: index, write-through"]
                row: dict[str, Any] = {
                    "nodes": size,
                    "fleet_created_seconds": round(seconds, 1),
                    "cache_synced_seconds": round(max(synced.values()), 2),
                    "journey_label_lists": journey(
                        clients["label lists"], target=node_name(3 + 20 * run)
                    ),
                    "journey_node_cache": journey(now, target=node_name(13 + 20 * run)),
                    "removal": removals(
                        {
                            mode: (cluster, node_name(60 + 10 * run + k))
                            for k, (mode, cluster) in enumerate(clients.items())
                        },
                        repeat=args.repeat,
                    ),
                }
            finally:
                for cluster in clients.values():
                    cluster.close()
            results.append(row)
            print(json.dumps(row), flush=True)
        real.close()
    report = {"machine": machine(), "etcd": etcd_version(), "results": results}
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


def connect(endpoint: KubernetesEndpoint) -> KubernetesCluster:
    return KubernetesCluster.from_endpoint(endpoint, qps=1000.0, burst=1000)


def start_cache(cluster: KubernetesCluster, make: Callable[[Any], NodeCache]) -> NodeCache:
    """The client's node cache in one of the CACHES modes (as `watch_nodes` starts it)."""
    cache = cluster.node_cache = make(cluster.transport)
    cache.start()
    return cache


def etcd_version() -> str:
    found = subprocess.run(["etcd", "--version"], capture_output=True, text=True, check=False)
    return " ".join(found.stdout.split()[:3])


def create_fleet_from(real: RealKube, start: int, size: int) -> float:
    """Grow the fleet from `start` to `size` nodes (the sizes share one server)."""
    started = time.monotonic()
    real.ensure_namespace("ml")

    def add(i: int) -> None:
        labels = {POOL: f"H100-pool-{i // POOL_SIZE}", RACK: f"rack-{i // RACK_SIZE}"}
        real.add_node(node_name(i), labels=labels, gpu_capacity=8)
        if i % 10 == 3:
            for p in range(PODS_PER_BUSY_NODE):
                real.add_pod(f"train-{i:05d}-{p}", "ml", node=node_name(i),
                             owner=("Job", f"train-{i:05d}"))  # fmt: skip

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(add, range(start, size)))
    return time.monotonic() - started


if __name__ == "__main__":
    raise SystemExit(main())
