"""What one ECC-storm incident costs on the REAL kube-apiserver as the fleet grows: API requests
per step and wall time per removal, at 100, 1,000 and 5,000 nodes (and 10 pods each on 10% of
them).

Starts etcd + the pinned kube-apiserver (tests/servers/kube_apiserver.py; build it first with
tools/setup/kube-apiserver.sh), creates the fleet as admin (nodes in pools of 100 by
`nvidia.com/gpu.product`, racks of 16 by `gpu-oncall.io/rack`), then, as the bot's own
ServiceAccount bound to exactly the deployed ClusterRole, runs the Cluster calls the ECC
journey makes, through the bot's own code (the gather steps' reads, the approval's impact
read, the safety guard's observation before the cordon and before the drain, the cordon, the
drain) on a node with pods. Requests are counted at the client (every HTTP request the adapter
sends). `before` is the same removal with the safety guard reading the whole fleet, as it did
(one paginated list of every node per action). A removal's time is observe + cordon.

    python bench/k8s_fleet_scale.py --sizes 100 1000 5000 --json out.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
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
from integrations.errors import ClusterError  # noqa: E402
from integrations.k8s import KubernetesCluster, KubernetesEndpoint  # noqa: E402
from integrations.telemetry import SignalResult  # noqa: E402
from tests.servers.kube_apiserver import start_control_plane  # noqa: E402
from tests.servers.kube_real_world import RealKube  # noqa: E402

POOL, RACK = "nvidia.com/gpu.product", "gpu-oncall.io/rack"
POOL_SIZE, RACK_SIZE, PODS_PER_BUSY_NODE = 100, 16, 10


class NoTelemetry:
    """The impact read's job signals: none (the bench measures the cluster's side)."""

    def read(self, query: Any) -> SignalResult:
        return SignalResult(signal=query.signal)


def node_name(i: int) -> str:
    return f"gpu-node-{i:05d}"


@contextmanager
def counted(cluster: KubernetesCluster) -> Iterator[list[str]]:
    """Every HTTP request the adapter sends while the block runs (method and path)."""
    sent: list[str] = []
    rest: Any = cluster.api.rest_client
    request = rest.request

    def counting(method: str, url: str, *args: Any, **kw: Any) -> Any:
        sent.append(f"{method} {url.split('://', 1)[-1].split('/', 1)[-1]}")
        return request(method, url, *args, **kw)

    rest.request = counting
    try:
        yield sent
    finally:
        rest.request = request


def measure(cluster: KubernetesCluster, size: int, *, target: str) -> dict[str, Any]:
    """`target` is a busy node (10 pods) no earlier size drained."""
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
            seconds[name] = time.monotonic() - started
        requests[name] = len(sent)
    cluster.uncordon(target)
    removal = seconds["guard: before cordon"] + seconds["cordon"]
    # before: the guard listed every node of the fleet before each removal
    with counted(cluster) as sent:
        started = time.monotonic()
        cluster.nodes()
        cluster.cordon(target)
        before = time.monotonic() - started
    cluster.uncordon(target)
    return {
        "nodes": size,
        "requests": requests,
        "requests_total": sum(requests.values()),
        "seconds": {k: round(v, 4) for k, v in seconds.items()},
        "removal_seconds": round(removal, 4),
        "removal_seconds_before": round(before, 4),
        "removal_requests_before": len(sent),
    }


def _tolerant(call: Callable[[], Any]) -> None:
    with contextlib.suppress(ClusterError):  # no kubelet: it fails, as the gather step records
        call()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp, start_control_plane() as plane:
        real = RealKube(plane)
        kubeconfig = real.bot_kubeconfig(Path(tmp) / "bot.kubeconfig")
        created = 0
        for run, size in enumerate(sorted(args.sizes)):
            seconds = create_fleet_from(real, created, size)
            created = size
            endpoint = KubernetesEndpoint(kubeconfig=str(kubeconfig), in_cluster=False)
            cluster = KubernetesCluster.from_endpoint(endpoint, qps=1000.0, burst=1000)
            try:
                row = measure(cluster, size, target=node_name(3 + 10 * run))
                row |= {"fleet_created_seconds": round(seconds, 1)}
            finally:
                cluster.close()
            results.append(row)
            print(json.dumps(row), flush=True)
        real.close()
    report = {"machine": machine(), "etcd": "Debian etcd 3.4", "results": results}
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


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
