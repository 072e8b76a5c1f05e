"""The Cluster port contract, run against SimCluster and against KubernetesCluster over HTTP
to the fake API server (langgraph's checkpoint-conformance pattern).

Covers: listing every node (paginated with limit/continue on the API) with labels, capacity and
conditions, and named nodes; a bounded read (the first N of a label selection by name); a
label selection counted (nodes, GPUs, the cordoned members named; again after a cordon); pods on
a node with their owners (field selector spec.nodeName); node events since a time; pod and
kernel logs (the node log query); cordon twice is one change (one PATCH), uncordon;
taint/untaint idempotent; a concurrent foreign taint survives our taint (a 409 on the API,
retried); annotate/label add and remove; delete_pod twice; drain evicts workload pods through
the Eviction API and skips DaemonSet and mirror pods; a PDB-blocked eviction is reported per pod
with its reason and no DELETE is sent; an unknown node raises NodeNotFound; a refused permission
raises ClusterForbidden naming verb and resource; hostile names are refused before any request;
check_permissions; medik8s NodeHealthCheck pauses: none without the CRD (a 404 on the API), a
paused NHC whose selector (matchLabels + matchExpressions) selects the node is reported with its
pause requests (one paginated list), unpaused or non-selecting NHCs are not, one with a
malformed selector is skipped (it selects nothing for NHC either), and a refused list names the
permission; node-agent Jobs: create twice is one Job (a 409 on the API, then a read), read until
Complete, the pod log's tail, JobNotFound, a refused create names the permission, hostile Job
names.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from integrations.cluster import Outcome, Permission, RemediationPause, count_of
from integrations.errors import ClusterForbidden, InvalidName, JobNotFound, NodeNotFound
from tests.contracts.conftest import World
from tests.servers.fake_kube_jobs import JobPlan
from tests.servers.kube_world import T0

NODE = "gpu-node-01"
IDLE = "gpu-node-04"
GRACE = timedelta(seconds=30)
TAINT = "gpu-oncall.io/quarantine"


def test_nodes_lists_every_node_with_labels_capacity_and_conditions(world: World) -> None:
    nodes = world.cluster.nodes()
    assert [n.name for n in nodes] == [f"gpu-node-0{i}" for i in range(5)]
    node = nodes[1]
    assert node.ready and not node.unschedulable
    assert node.conditions["Ready"] == "True"
    assert node.labels["nvidia.com/gpu.count"] == "8"
    assert node.labels["gpu-oncall.io/rack"] == "rack-00"
    assert node.gpu_capacity == 8
    lists = world.sent("GET", path="/api/v1/nodes")
    if world.fake is not None:  # 5 nodes, pages of 2: three requests, the later two continue
        assert [r.query.get("limit") for r in lists] == ["2", "2", "2"]
        assert [bool(r.query.get("continue")) for r in lists] == [False, True, True]


def test_a_bounded_read_is_the_first_of_the_selection_by_name(world: World) -> None:
    rack = {"gpu-oncall.io/rack": "rack-00"}
    selected = [n.name for n in world.cluster.nodes(labels=rack)]
    sample = world.cluster.first_nodes(rack, limit=2)
    assert len(selected) > 2 and [n.name for n in sample.nodes] == sorted(selected)[:2]
    assert sample.partial and sample.total in (None, len(selected))
    whole = world.cluster.first_nodes(rack, limit=len(selected))
    assert [n.name for n in whole.nodes] == sorted(selected) and not whole.partial
    if world.fake is not None:  # one list each, the limit asked of the server
        lists = world.sent("GET", path="/api/v1/nodes")[-2:]
        assert [r.query.get("limit") for r in lists] == ["2", str(len(selected))]


def test_a_selection_counted_is_the_count_of_its_listing_and_follows_a_cordon(
    world: World,
) -> None:
    rack = {"gpu-oncall.io/rack": "rack-00"}
    selected = world.cluster.nodes(labels=rack)
    assert world.cluster.count_nodes(rack) == count_of(selected)
    assert len(selected) > 1 and not any(n.unschedulable for n in selected)
    world.cluster.cordon(NODE)
    count = world.cluster.count_nodes(rack)
    assert (count.nodes, count.gpus) == (len(selected), sum(n.gpu_capacity for n in selected))
    assert [n.name for n in count.down] == [NODE]
    assert count.down[0].unschedulable
    if world.fake is not None:  # the label list is served from the watch cache, yet holds
        # the bot's own write: not older than the node the PATCH answered (read-your-writes)
        written = int(world.fake.nodes[NODE]["metadata"]["resourceVersion"])
        listed = world.sent("GET", path="/api/v1/nodes")[-1]
        assert listed.query["resourceVersionMatch"] == "NotOlderThan"
        assert int(listed.query["resourceVersion"]) == written


def test_nodes_by_name_and_an_unknown_name(world: World) -> None:
    assert [n.name for n in world.cluster.nodes([IDLE, NODE])] == [IDLE, NODE]
    with pytest.raises(NodeNotFound, match="gpu-node-77"):
        world.cluster.nodes(["gpu-node-77"])


def test_pods_on_a_node_with_their_owners(world: World) -> None:
    pods = {p.name: p for p in world.cluster.pods_on(NODE)}
    worker = pods["llm-pretrain-worker-1"]
    assert (worker.namespace, worker.node, worker.phase) == ("ml", NODE, "Running")
    assert (worker.owner_kind, worker.workload, worker.gpus) == ("Job", "llm-pretrain", 8)
    exporter = next(p for p in pods.values() if p.name.startswith("nvidia-dcgm-exporter-"))
    assert exporter.owner_kind == "DaemonSet" and not exporter.mirror
    assert len(pods) == 2
    inference = world.cluster.pods_on("gpu-node-02")
    assert {(p.owner_kind, p.workload) for p in inference if p.owner_kind != "DaemonSet"} == {
        ("ReplicaSet", "vllm-chat")
    }
    if world.fake is not None:
        first = world.sent("GET", path="/api/v1/pods")[0]
        assert first.query["fieldSelector"] == f"spec.nodeName={NODE}"


def test_events_since_a_time_oldest_first(world: World) -> None:
    events = world.cluster.events("gpu-node-00", since=T0 - timedelta(hours=1))
    assert [(e.kind, e.name, e.reason) for e in events] == [("Node", "gpu-node-00", "OOMKilling")]
    assert world.cluster.events("gpu-node-00", since=T0) == []


@pytest.mark.fake_api_only  # no kubelet serves the node log query
def test_node_logs_are_the_kernel_log_tail(world: World) -> None:
    text = world.cluster.node_logs(NODE, tail_lines=2)
    lines = text.splitlines()
    assert len(lines) == 2 and all("NVRM: Xid" in line and ": 48," in line for line in lines)
    if world.fake is not None:
        (call,) = world.sent("GET", path="/proxy/logs")
        assert call.path == f"/api/v1/nodes/{NODE}/proxy/logs/"
        assert call.query == {"query": "/kern.log"}


@pytest.mark.fake_api_only  # no kubelet serves pod logs
def test_pod_logs_tail(world: World) -> None:
    everything = world.cluster.pod_logs("llm-pretrain-worker-1", "ml", tail_lines=1000)
    tail = world.cluster.pod_logs("llm-pretrain-worker-1", "ml", tail_lines=3)
    assert tail.splitlines() == everything.splitlines()[-3:] and len(tail.splitlines()) == 3
    if world.fake is not None:
        call = world.sent("GET", path="/log")[-1]
        assert call.path == "/api/v1/namespaces/ml/pods/llm-pretrain-worker-1/log"
        assert call.query["tailLines"] == "3"


def test_cordon_twice_changes_once_and_uncordon_undoes_it(world: World) -> None:
    assert world.cluster.cordon(NODE) is Outcome.CHANGED
    assert world.cluster.cordon(NODE) is Outcome.ALREADY_DONE
    node = world.cluster.nodes([NODE])[0]
    assert node.unschedulable
    if world.real is None:  # the node lifecycle controller's taint (not run on the real one)
        assert "node.kubernetes.io/unschedulable:NoSchedule" in node.taints
    if world.fake is not None:
        (patch,) = world.sent("PATCH")
        assert patch.content_type == "application/strategic-merge-patch+json"
        assert patch.body == {"spec": {"unschedulable": True}}
    assert world.cluster.uncordon(NODE) is Outcome.CHANGED
    assert world.cluster.uncordon(NODE) is Outcome.ALREADY_DONE
    assert not world.cluster.nodes([NODE])[0].unschedulable
    assert len(world.sent("PATCH")) == (2 if world.fake else 0)


def test_taint_and_untaint_are_idempotent(world: World) -> None:
    changed = world.cluster.taint(NODE, key=TAINT, value="ecc", effect="NoSchedule")
    assert changed is Outcome.CHANGED
    assert world.cluster.taint(NODE, key=TAINT, value="ecc") is Outcome.ALREADY_DONE
    assert f"{TAINT}=ecc:NoSchedule" in world.cluster.nodes([NODE])[0].taints
    assert world.cluster.untaint(NODE, key=TAINT) is Outcome.CHANGED
    assert world.cluster.untaint(NODE, key=TAINT) is Outcome.ALREADY_DONE
    assert not any(t.startswith(TAINT) for t in world.cluster.nodes([NODE])[0].taints)
    if world.fake is not None:
        patches = world.sent("PATCH")
        assert [p.content_type for p in patches] == ["application/merge-patch+json"] * 2
        assert patches[0].body["spec"]["taints"] == [
            {"key": TAINT, "value": "ecc", "effect": "NoSchedule"}
        ]
        assert patches[0].body["metadata"]["resourceVersion"]


@pytest.mark.fake_api_only  # only the fake can write between the adapter's read and its write
def test_a_concurrent_foreign_taint_survives_ours(world: World) -> None:
    world.interfere(NODE, taint="other.io/maintenance=yes:NoExecute")
    assert world.cluster.taint(NODE, key=TAINT, value="ecc") is Outcome.CHANGED
    taints = world.cluster.nodes([NODE])[0].taints
    assert {"other.io/maintenance=yes:NoExecute", f"{TAINT}=ecc:NoSchedule"} <= set(taints)
    if world.fake is not None:  # the first PATCH met a 409 and was retried after a re-read
        assert [p.status for p in world.sent("PATCH")] == [409, 200]


def test_annotate_and_label_add_then_remove(world: World) -> None:
    marks = {"gpu-oncall.io/cordoned-by": "gpu-oncall", "gpu-oncall.io/incident": "42"}
    assert world.cluster.annotate(NODE, marks) is Outcome.CHANGED
    assert world.cluster.annotate(NODE, marks) is Outcome.ALREADY_DONE
    assert world.cluster.label(NODE, {"gpu-oncall.io/quarantined": "true"}) is Outcome.CHANGED
    node = world.cluster.nodes([NODE])[0]
    assert node.annotations.items() >= marks.items()
    assert node.labels["gpu-oncall.io/quarantined"] == "true"
    assert world.cluster.annotate(NODE, {"gpu-oncall.io/incident": None}) is Outcome.CHANGED
    assert world.cluster.label(NODE, {"gpu-oncall.io/quarantined": None}) is Outcome.CHANGED
    assert world.cluster.label(NODE, {"gpu-oncall.io/quarantined": None}) is Outcome.ALREADY_DONE
    node = world.cluster.nodes([NODE])[0]
    assert "gpu-oncall.io/incident" not in node.annotations
    assert "gpu-oncall.io/quarantined" not in node.labels
    if world.fake is not None:
        patches = world.sent("PATCH")
        assert {p.content_type for p in patches} == {"application/merge-patch+json"}
        assert patches[-1].body == {"metadata": {"labels": {"gpu-oncall.io/quarantined": None}}}


def test_delete_pod_twice_deletes_once(world: World) -> None:
    assert world.cluster.delete_pod("llm-pretrain-worker-1", "ml", grace=GRACE) is Outcome.CHANGED
    again = world.cluster.delete_pod("llm-pretrain-worker-1", "ml", grace=GRACE)
    assert again is Outcome.ALREADY_DONE
    if world.real is not None:  # Terminating until its kubelet confirms: there is none here
        pod = world.real.core.read_namespaced_pod("llm-pretrain-worker-1", "ml")
        assert pod.metadata.deletion_timestamp is not None
        return
    assert "llm-pretrain-worker-1" not in {p.name for p in world.cluster.pods_on(NODE)}
    if world.fake is not None:
        (delete,) = world.sent("DELETE")
        assert delete.path == "/api/v1/namespaces/ml/pods/llm-pretrain-worker-1"
        assert delete.query.get("gracePeriodSeconds") == "30"


def test_drain_evicts_workload_pods_and_skips_daemonset_and_mirror_pods(world: World) -> None:
    world.add_mirror_pod("kube-proxy-gpu-node-01", "kube-system", node=NODE)
    report = world.cluster.drain(NODE, grace=GRACE)
    assert report.outcome is Outcome.CHANGED
    assert report.evicted == ("llm-pretrain-worker-1",)
    assert sorted(report.skipped)[0] == "kube-proxy-gpu-node-01"
    assert len(report.skipped) == 2 and report.blocked == ()
    assert report.reasons["kube-system/kube-proxy-gpu-node-01"].startswith("mirror pod")
    assert world.cluster.nodes([NODE])[0].unschedulable
    again = world.cluster.drain(NODE, grace=GRACE)
    assert again.outcome is Outcome.ALREADY_DONE and again.evicted == ()
    if world.fake is not None:
        (eviction,) = world.sent("POST", path="/eviction")
        assert eviction.path == "/api/v1/namespaces/ml/pods/llm-pretrain-worker-1/eviction"
        assert eviction.body["apiVersion"] == "policy/v1" and eviction.body["kind"] == "Eviction"
        assert eviction.body["metadata"] == {"name": "llm-pretrain-worker-1", "namespace": "ml"}
        assert world.sent("DELETE") == []


def test_a_pdb_blocked_eviction_is_reported_per_pod_with_its_reason(world: World) -> None:
    selector = {"app.kubernetes.io/name": "llm-pretrain"}
    world.add_budget("llm-pretrain", "ml", selector, min_available=2)
    report = world.cluster.drain(NODE, grace=GRACE)
    assert report.evicted == () and report.blocked == ("llm-pretrain-worker-1",)
    reason = report.reasons["ml/llm-pretrain-worker-1"]
    assert "disruption budget" in reason and "llm-pretrain needs 2 healthy pods" in reason
    assert world.cluster.nodes([NODE])[0].unschedulable
    assert "llm-pretrain-worker-1" in {p.name for p in world.cluster.pods_on(NODE)}
    if world.fake is not None:  # retried with backoff until the grace deadline, never deleted
        evictions = world.sent("POST", path="/eviction")
        assert len(evictions) > 1 and {e.status for e in evictions} == {429}
        assert world.sent("DELETE") == []
        assert sum(world.timer.slept) >= GRACE.total_seconds() - 1e-6


def test_an_unknown_node_raises_node_not_found(world: World) -> None:
    calls: list[Callable[[], object]] = [
        lambda: world.cluster.cordon("gpu-node-77"),
        lambda: world.cluster.taint("gpu-node-77", key=TAINT),
        lambda: world.cluster.node_logs("gpu-node-77"),
        lambda: world.cluster.drain("gpu-node-77", grace=GRACE),
        lambda: world.cluster.pods_on("gpu-node-77"),
        lambda: world.cluster.events("gpu-node-77", since=T0),
    ]
    for call in calls:
        with pytest.raises(NodeNotFound, match="gpu-node-77"):
            call()


def test_a_refused_patch_names_the_verb_and_resource(world: World) -> None:
    world.deny("patch", "nodes")
    with pytest.raises(ClusterForbidden, match=r"may not patch nodes; grant it in the ClusterRo"):
        world.cluster.cordon(NODE)
    if world.fake is not None:
        refused = [r.permission for r in world.sent() if r.status == 403]
        assert refused == [("patch", "", "nodes", "")]


def test_a_refused_eviction_stops_the_drain_naming_the_permission(world: World) -> None:
    world.deny("create", "pods", "eviction")
    with pytest.raises(ClusterForbidden, match=r"may not create pods/eviction"):
        world.cluster.drain(NODE, grace=GRACE)
    if world.fake is not None:  # refused once, not retried, and no DELETE instead
        assert [r.status for r in world.sent("POST", path="/eviction")] == [403]
        assert world.sent("DELETE") == []


HOSTILE = ["gpu-node-01/../x", 'a"b', "x" * 300, "gpu-node-01?watch=true", "", "Gpu-Node-01"]


@pytest.mark.parametrize(
    "name", HOSTILE, ids=["traversal", "quote", "300-chars", "query", "empty", "upper"]
)
def test_hostile_names_are_refused_before_any_request(world: World, name: str) -> None:
    calls: list[Callable[[], object]] = [
        lambda: world.cluster.cordon(name),
        lambda: world.cluster.nodes([name]),
        lambda: world.cluster.taint(name, key=TAINT),
        lambda: world.cluster.drain(name, grace=GRACE),
        lambda: world.cluster.node_logs(name),
        lambda: world.cluster.delete_pod(name, "ml", grace=GRACE),
        lambda: world.cluster.delete_pod("llm-pretrain-worker-1", name, grace=GRACE),
        lambda: world.cluster.pod_logs(name, "ml"),
    ]
    for call in calls:
        with pytest.raises(InvalidName):
            call()
    assert world.sent() == []


def test_hostile_marker_values_are_refused_before_any_request(world: World) -> None:
    with pytest.raises(InvalidName, match="label value"):
        world.cluster.label(NODE, {"gpu-oncall.io/x": "a b"})
    with pytest.raises(InvalidName, match="taint effect"):
        world.cluster.taint(NODE, key=TAINT, effect="NoWay")
    with pytest.raises(InvalidName, match="taint key"):
        world.cluster.untaint(NODE, key="bad key")
    with pytest.raises(InvalidName, match="annotation key"):
        world.cluster.annotate(NODE, {"gpu-oncall.io/../x": "1"})
    assert world.sent() == []


def test_check_permissions_says_which_are_granted(world: World) -> None:
    world.deny("create", "pods", "eviction")
    needed = [Permission("patch", "nodes"), Permission("create", "pods", subresource="eviction")]
    answers = world.cluster.check_permissions(needed)
    assert [(p.describe(), p.allowed) for p in answers] == [
        ("patch nodes", True),
        ("create pods/eviction", False),
    ]
    if world.fake is not None:
        reviews = world.sent("POST", path="selfsubjectaccessreviews")
        assert [r.body["spec"]["resourceAttributes"] for r in reviews] == [
            {"verb": "patch", "group": "", "resource": "nodes"},
            {"verb": "create", "group": "", "resource": "pods", "subresource": "eviction"},
        ]


NHC_PATH = "/apis/remediation.medik8s.io/v1alpha1/nodehealthchecks"


def test_no_health_checks_means_no_pauses(world: World) -> None:
    node = world.cluster.nodes([NODE])[0]
    assert world.cluster.remediation_pauses(node) == []
    if world.fake is not None:  # the CRD is not installed: a 404, read as "nothing paused"
        (listed,) = world.sent("GET", path=NHC_PATH)
        assert (listed.path, listed.status) == (NHC_PATH, 404)


def test_a_paused_health_check_selecting_the_node_is_reported(world: World) -> None:
    rack = {
        "matchLabels": {"gpu-oncall.io/rack": "rack-00"},
        "matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["gpu-node-00"]}
        ],
    }
    world.add_health_check("nhc-rack-00", rack, ["upgrade-window", "ticket-4711"])
    world.add_health_check("nhc-all-workers", {}, None)  # selects every node, not paused
    elsewhere = {"matchExpressions": [{"key": "gpu-oncall.io/rack", "operator": "DoesNotExist"}]}
    world.add_health_check("nhc-unracked", elsewhere, ["freeze"])
    node, excluded = world.cluster.nodes([NODE, "gpu-node-00"])
    assert world.cluster.remediation_pauses(node) == [
        RemediationPause("NodeHealthCheck", "nhc-rack-00", ("upgrade-window", "ticket-4711"))
    ]
    assert world.cluster.remediation_pauses(excluded) == []
    if world.fake is not None:  # three objects in pages of two, per call
        lists = world.sent("GET", path=NHC_PATH)
        assert [r.query.get("limit") for r in lists] == ["2"] * 4
        assert [bool(r.query.get("continue")) for r in lists] == [False, True] * 2
        assert {r.status for r in lists} == {200}


def test_a_refused_health_check_list_names_the_permission(world: World) -> None:
    world.add_health_check("nhc-all", {}, ["freeze"])
    world.deny("list", "nodehealthchecks", group="remediation.medik8s.io")
    node = world.cluster.nodes([NODE])[0]
    with pytest.raises(ClusterForbidden, match=r"may not list nodehealthchecks"):
        world.cluster.remediation_pauses(node)
    if world.fake is not None:
        refused = [r.permission for r in world.sent() if r.status == 403]
        assert refused == [("list", "remediation.medik8s.io", "nodehealthchecks", "")]


def test_a_health_check_with_a_malformed_selector_pauses_nothing(world: World) -> None:
    bad = {"matchExpressions": [{"key": "gpu-oncall.io/rack", "operator": "Equals"}]}
    world.add_health_check("nhc-typo", bad, ["upgrade-window"])
    world.add_health_check("nhc-all", {}, ["freeze"])
    node = world.cluster.nodes([NODE])[0]
    assert [p.name for p in world.cluster.remediation_pauses(node)] == ["nhc-all"]


AGENT_NS = "gpu-oncall-agent"


def agent_job(name: str = "gpu-oncall-gpu-reset-0a1b2c3d4e5f") -> dict[str, Any]:
    """A node-agent Job as `JobTemplate.render` makes one (trimmed to what the API checks)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": AGENT_NS, "labels": {"gpu-oncall.io/node": NODE}},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": 120,
            "template": {
                "spec": {
                    "nodeName": NODE,
                    "restartPolicy": "Never",
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [
                        {
                            "name": "agent",
                            "image": "debian:bookworm-slim",
                            "args": ["nvidia-smi", "-r", "-i", "5"],
                        }
                    ],
                }
            },
        },
    }


@pytest.mark.fake_api_only  # no Job controller or kubelet finishes the Job
def test_create_job_twice_is_one_job_read_until_complete(world: World) -> None:
    if world.fake is not None:
        world.fake.plan_jobs(JobPlan("Complete", after_reads=3, log=("GPU 5 was reset.",)))
    first = world.cluster.create_job(agent_job())
    again = world.cluster.create_job(agent_job())
    assert (first.name, first.namespace) == ("gpu-oncall-gpu-reset-0a1b2c3d4e5f", AGENT_NS)
    assert first.outcome is Outcome.CHANGED
    assert again.outcome is Outcome.ALREADY_DONE and again.name == first.name
    states = [world.cluster.read_job(first.name, AGENT_NS).state for _ in range(2)]
    assert states[-1] == "complete"
    assert world.cluster.job_logs(first.name, AGENT_NS, tail_lines=5) != ""
    if world.fake is not None:
        assert [r.status for r in world.sent("POST", path="/jobs")] == [201, 409]
        (post, _) = world.sent("POST", path="/jobs")
        assert post.path == f"/apis/batch/v1/namespaces/{AGENT_NS}/jobs"
        assert post.body["spec"]["template"]["spec"]["nodeName"] == NODE
        assert states == ["running", "complete"]  # the 409 read the Job once more
        assert world.cluster.job_logs(first.name, AGENT_NS) == "GPU 5 was reset."
        (listing, *_) = world.sent("GET", path=f"/namespaces/{AGENT_NS}/pods")
        assert listing.query["labelSelector"] == f"job-name={first.name}"


def test_an_unknown_job_raises_job_not_found(world: World) -> None:
    with pytest.raises(JobNotFound, match=f"job '{AGENT_NS}/gpu-oncall-reboot-none' not found"):
        world.cluster.read_job("gpu-oncall-reboot-none", AGENT_NS)


def test_a_refused_job_create_names_the_permission(world: World) -> None:
    world.deny("create", "jobs", group="batch")
    with pytest.raises(ClusterForbidden, match=r"may not create jobs"):
        world.cluster.create_job(agent_job())
    if world.fake is not None:
        assert [r.status for r in world.sent("POST", path="/jobs")] == [403]


@pytest.mark.parametrize(
    "name", ["x" * 64, "a/../b", "Upper", ""], ids=["64-chars", "slash", "upper", "empty"]
)
def test_hostile_job_names_are_refused_before_any_request(world: World, name: str) -> None:
    with pytest.raises(InvalidName):
        world.cluster.create_job(agent_job(name))
    with pytest.raises(InvalidName):
        world.cluster.read_job(name, AGENT_NS)
    assert world.sent() == []
