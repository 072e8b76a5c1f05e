"""Latency of each KubernetesCluster call against the fake API server over loopback, and the
HTTP requests each call makes.

The fake (tests/servers/fake_kube.py) mirrors the benchmark ECC fleet (`--nodes` nodes, a
training job on 8 of them); the adapter reaches it with a kubeconfig, as the bot would. Each
call runs `--runs` times; writes alternate with their undo so every run changes the node
(cordon/uncordon, taint/untaint, annotate add/remove) and `*-again` rows time the idempotent
repeat (a read only). The QPS limit is lifted so the figure is the call, not the pacing.
The fake is Python, so the figures bound the adapter's own overhead from above; a real
kube-apiserver answers in about the same order on loopback.

    python bench/cluster_calls.py --nodes 64 --runs 200
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common import ROOT, ecc_fleet, machine, node, print_calls, time_calls

sys.path.insert(0, str(ROOT))  # tests.servers.fake_kube

from integrations.k8s import PATCH_NODES, KubernetesCluster, KubernetesEndpoint  # noqa: E402
from simulator.fleet import Fleet  # noqa: E402
from tests.servers.fake_kube import FakeKube, start_fake_kube  # noqa: E402

Call = Callable[[KubernetesCluster, int], Any]


def calls(fake: FakeKube, fleet: Fleet, nodes: int) -> dict[str, Call]:
    """Named adapter calls; `i` is the run number (writes alternate on it)."""
    target, busy = node(3, nodes), node(0, nodes)
    key = "gpu-oncall.io/quarantine"
    marker = "gpu-oncall.io/incident"
    since = fleet.t0 - timedelta(hours=1)
    return {
        "nodes(all)": lambda c, i: c.nodes(),
        "nodes([one])": lambda c, i: c.nodes([target]),
        "pods_on": lambda c, i: c.pods_on(busy),
        "pod_logs": lambda c, i: c.pod_logs("llm-pretrain-worker-0", "ml", tail_lines=200),
        "node_logs": lambda c, i: c.node_logs(target, tail_lines=200),
        "cordon/uncordon": lambda c, i: c.cordon(target) if i % 2 == 0 else c.uncordon(target),
        "taint/untaint": lambda c, i: (
            c.taint(target, key=key, value="ecc") if i % 2 == 0 else c.untaint(target, key=key)
        ),
        "annotate add/remove": lambda c, i: c.annotate(target, {marker: None if i % 2 else "7"}),
        "cordon-again": lambda c, i: c.cordon(node(5, nodes)),
        "events": lambda c, i: c.events(busy, since=since),
        "drain (1 pod evicted)": _drain_once(fake, nodes),
        "check_permissions(1)": lambda c, i: c.check_permissions([PATCH_NODES]),
    }


def measure(fake: FakeKube, cluster: KubernetesCluster, call: Call, runs: int) -> dict[str, float]:
    return time_calls(
        lambda i: call(cluster, i), runs, {"requests_per_call": lambda: len(fake.requests)}
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    fleet = Fleet.from_scenario(ecc_fleet(args.nodes), now=lambda: datetime.now(UTC))
    rows: dict[str, dict[str, float]] = {}
    with start_fake_kube() as fake, tempfile.TemporaryDirectory() as tmp:
        fake.seed_from_fleet(fleet)
        endpoint = KubernetesEndpoint(
            kubeconfig=str(fake.write_kubeconfig(Path(tmp) / "kubeconfig")),
            in_cluster=False,
            qps=1e6,
            burst=1_000_000,
        )
        cluster = KubernetesCluster.from_endpoint(endpoint)
        for name, call in calls(fake, fleet, args.nodes).items():
            rows[name] = measure(fake, cluster, call, args.runs)
    print_calls(rows, {"requests_per_call": "HTTP requests"})
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "calls": rows}, indent=2))


def _drain_once(fake: FakeKube, nodes: int) -> Call:
    """Each run drains a node holding one workload pod, then puts the pod back and uncordons
    the node directly in the fake's store (in-process, no HTTP: a few microseconds of the
    timed call)."""
    target = node(1, nodes)

    def call(cluster: KubernetesCluster, i: int) -> Any:
        report = cluster.drain(target, grace=timedelta(seconds=30))
        fake.nodes[target]["spec"].pop("unschedulable", None)
        fake.add_pod(
            "llm-pretrain-worker-1",
            "ml",
            node=target,
            labels={"app.kubernetes.io/name": "llm-pretrain"},
            owner=("Job", "llm-pretrain"),
        )
        return report

    return call


if __name__ == "__main__":
    main()
