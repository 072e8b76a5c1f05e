"""KubernetesCluster's requests for reads and drains, asserted on what the fake API received.

Covers: events of a node and of its pods cost 2 + one list per pod namespace (paginated with
`continue`), keep only the node's pods' events and those since `since`, and read core/v1
events; pod logs pass container, tailLines and sinceSeconds, and a multi-container pod without
a container is the API's 400 as a ClusterError; a PDB with maxUnavailable lets exactly its
budget go (disruptionsAllowed as the disruption controller computes it) and blocks the rest
until the grace deadline; finished pods and pods still terminating from an earlier drain are
left alone; a pod that vanished mid-drain (404) is fine; a 0 s grace tries each eviction once.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from integrations.errors import ClusterError
from integrations.k8s import KubernetesCluster
from tests.servers.fake_kube import FakeKube, start_fake_kube
from tests.servers.kube_world import FakeTimer, make_kubernetes

NODE = "gpu-node-01"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
APP = {"app": "trainer"}


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with start_fake_kube(now=lambda: NOW) as fake:
        fake.add_node(NODE)
        fake.add_node("gpu-node-02")
        for rank in range(3):
            fake.add_pod(f"trainer-{rank}", "ml", node=NODE, labels=APP, owner=("Job", "trainer"))
        fake.add_pod("trainer-9", "ml", node="gpu-node-02", labels=APP, owner=("Job", "trainer"))
        fake.add_pod("exporter-x", "gpu-operator", node=NODE, owner=("DaemonSet", "exporter"))
        yield fake


@pytest.fixture
def timer() -> FakeTimer:
    return FakeTimer()


@pytest.fixture
def cluster(fake: FakeKube, tmp_path: Path, timer: FakeTimer) -> KubernetesCluster:
    return make_kubernetes(fake, tmp_path, timer=timer, page_size=2)


def test_events_of_a_node_and_its_pods_cost_one_list_per_namespace(
    fake: FakeKube, cluster: KubernetesCluster
) -> None:
    old, recent = NOW - timedelta(hours=2), NOW - timedelta(minutes=5)
    fake.add_event(kind="Node", name=NODE, reason="NodeNotReady", message="down", at=recent)
    fake.add_event(kind="Node", name="gpu-node-02", reason="Other", message="-", at=recent)
    for rank in range(3):
        fake.add_event(kind="Pod", name=f"trainer-{rank}", namespace="ml", reason="BackOff",
                       message="restarting", at=recent + timedelta(seconds=rank), type="Warning")
    fake.add_event(kind="Pod", name="trainer-9", namespace="ml", reason="BackOff", message="-",
                   at=recent)
    fake.add_event(kind="Pod", name="exporter-x", namespace="gpu-operator", reason="Pulled",
                   message="old", at=old)
    events = cluster.events(NODE, since=NOW - timedelta(hours=1))
    assert [(e.kind, e.name, e.reason) for e in events] == [
        ("Node", NODE, "NodeNotReady"),
        ("Pod", "trainer-0", "BackOff"),
        ("Pod", "trainer-1", "BackOff"),
        ("Pod", "trainer-2", "BackOff"),
    ]
    assert events[1].namespace == "ml" and events[1].type == "Warning"
    lists = [(r.path, r.query.get("fieldSelector"), bool(r.query.get("continue")))
             for r in fake.sent("GET")]
    assert lists == [
        ("/api/v1/events", f"involvedObject.kind=Node,involvedObject.name={NODE}", False),
        ("/api/v1/pods", f"spec.nodeName={NODE}", False),
        ("/api/v1/pods", f"spec.nodeName={NODE}", True),
        ("/api/v1/namespaces/gpu-operator/events", "involvedObject.kind=Pod", False),
        ("/api/v1/namespaces/ml/events", "involvedObject.kind=Pod", False),
        ("/api/v1/namespaces/ml/events", "involvedObject.kind=Pod", True),
    ]


def test_pod_logs_pass_container_tail_and_since(fake: FakeKube, cluster: KubernetesCluster) -> None:
    fake.add_pod("vllm-0", "serve", node=NODE, logs={"vllm": ["a", "b"], "sidecar": ["s"]})
    fake.add_pod_log("vllm-0", "serve", "vllm", "late", at=NOW - timedelta(seconds=30))
    assert cluster.pod_logs("vllm-0", "serve", container="vllm", tail_lines=2) == "b\nlate"
    recent = cluster.pod_logs("vllm-0", "serve", container="vllm", since=timedelta(minutes=1))
    assert recent == "a\nb\nlate"  # lines without a runtime timestamp are always kept
    assert fake.sent("GET", path="/log")[-1].query == {
        "container": "vllm", "tailLines": "500", "sinceSeconds": "60"
    }
    with pytest.raises(ClusterError, match="a container name must be specified for pod vllm-0"):
        cluster.pod_logs("vllm-0", "serve")


def test_a_max_unavailable_budget_lets_exactly_its_budget_go(
    fake: FakeKube, cluster: KubernetesCluster, timer: FakeTimer
) -> None:
    fake.add_pdb("trainer", "ml", match_labels=APP, max_unavailable="50%")  # 4 pods: 2 may go
    report = cluster.drain(NODE, grace=timedelta(seconds=20))
    assert report.evicted == ("trainer-0", "trainer-1")
    assert report.blocked == ("trainer-2",) and report.skipped == ("exporter-x",)
    assert report.reasons["ml/trainer-2"] == (
        "Cannot evict pod as it would violate the pod's disruption budget. "
        "The disruption budget trainer needs 2 healthy pods and has 2 currently"
    )
    attempts = [r for r in fake.sent("POST", path="/eviction") if "trainer-2" in r.path]
    assert len(attempts) > 2 and 20.0 <= sum(timer.slept) <= 20.0 + 1e-6
    assert fake.sent("DELETE") == []


def test_a_zero_grace_tries_each_eviction_once(fake: FakeKube, cluster: KubernetesCluster) -> None:
    fake.add_pdb("trainer", "ml", match_labels=APP, min_available=4)
    report = cluster.drain(NODE, grace=timedelta(0))
    assert report.blocked == ("trainer-0", "trainer-1", "trainer-2")
    assert len(fake.sent("POST", path="/eviction")) == 3


def test_a_pod_still_terminating_from_an_earlier_drain_is_left_to_finish(
    fake: FakeKube, cluster: KubernetesCluster
) -> None:
    cluster.cordon(NODE)
    for rank in range(3):  # evicted before; no kubelet has finished them yet
        pod = fake.pods[("ml", f"trainer-{rank}")]
        pod["metadata"]["deletionTimestamp"] = "2026-03-01T11:59:00Z"
    report = cluster.drain(NODE, grace=timedelta(seconds=30))
    assert report.outcome.value == "already_done" and report.evicted == ()
    assert report.reasons["ml/trainer-0"] == "already terminating"
    assert fake.sent("POST", path="/eviction") == []


def test_finished_and_vanished_pods_are_fine(fake: FakeKube, cluster: KubernetesCluster) -> None:
    fake.add_pod("done-0", "ml", node=NODE, phase="Succeeded", owner=("Job", "done"))
    fake.fail_next(404, path_contains="trainer-1/eviction")  # gone between list and evict
    report = cluster.drain(NODE, grace=timedelta(seconds=5))
    assert report.evicted == ("trainer-0", "trainer-2")
    assert report.reasons["ml/done-0"] == "finished (Succeeded)"
    assert report.reasons["ml/trainer-1"] == "already gone (404)"
    assert "done-0" in report.skipped and report.blocked == ()
