"""The Cluster port's contract on real Slurm 22.05 daemons (every case with a Slurm meaning).

Covers: every node with partition/feature/GRES labels, ready and the Slurm state; named nodes
and an unknown name; the API version detected from slurmrestd's OpenAPI (22.05: no node update,
so drain/resume go through scontrol); jobs on a node from expanded host lists, with the GPU
indices each holds there, user, requeue flag and start time; cordon = DRAIN with the bot's
reason (twice is one change), uncordon = RESUME; drain requeues the jobs that allow it and
reports a --no-requeue job as blocked, a second drain is already done; cancel mode; a job
already gone is already done; markers in the node comment survive and are removed; the
reason as an event with who set it; taints refused naming the Slurm equivalent; hostile names
refused before any request.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta

import pytest

from bot.engine.steps.cluster_gaps import unavailable_read
from integrations.cluster import Outcome, count_of
from integrations.errors import ClusterForbidden, InvalidName, NodeNotFound, ReadUnsupported
from integrations.slurm import Scontrol, SlurmCluster
from integrations.slurm.cluster import TaintUnsupported
from integrations.slurm.records import DRAINED_BY, JOB_GPUS, JOB_REQUEUE, JOB_USER, PARTITION
from tests.servers.prometheus import poll
from tests.servers.slurm import NODES, SlurmServers, make_slurm_cluster

NODE = "gpu-node-01"
GRACE = timedelta(seconds=30)
CLAIM = {"gpu-oncall.io/cordoned-by": "gpu-oncall", "gpu-oncall.io/incident": "INC-42",
         "gpu-oncall.io/cordon-reason": "INC-42: XID 79 on GPU 5"}


def test_nodes_list_every_node_with_partition_features_and_gpus(cluster: SlurmCluster) -> None:
    nodes = cluster.nodes()
    assert [n.name for n in nodes] == list(NODES)
    node = nodes[1]
    assert node.ready and not node.unschedulable and node.gpu_capacity == 8
    assert node.labels[PARTITION] == "train" and nodes[13].labels[PARTITION] == "infer"
    assert node.labels["gpu-oncall.io/rack"] == "rack-00"
    assert nodes[9].labels["gpu-oncall.io/rack"] == "rack-01"
    assert node.labels["nvidia.com/gpu.product"] == "h100"
    assert node.conditions["Ready"] == "True"


def test_named_nodes_and_an_unknown_name(cluster: SlurmCluster) -> None:
    assert [n.name for n in cluster.nodes(["gpu-node-04", NODE])] == ["gpu-node-04", NODE]
    for names in (["gpu-node-77"], [NODE, "gpu-node-77"]):
        with pytest.raises(NodeNotFound, match="gpu-node-77"):
            cluster.nodes(names)


def test_a_bounded_read_is_the_partitions_first_nodes_by_name_with_its_count(
    cluster: SlurmCluster,
) -> None:
    train = [n.name for n in cluster.nodes(labels={PARTITION: "train"})]
    sample = cluster.first_nodes({PARTITION: "train"}, limit=3)
    assert [n.name for n in sample.nodes] == sorted(train)[:3]
    assert sample.total == len(train) and sample.describe() == f"3 of {len(train)} nodes read"


def test_a_partition_counted_is_the_count_of_its_listing(cluster: SlurmCluster) -> None:
    train = cluster.nodes(labels={PARTITION: "train"})
    count = cluster.count_nodes({PARTITION: "train"})
    assert count == count_of(train) and count.nodes == len(train) > 0
    assert count.gpus == sum(n.gpu_capacity for n in train) > 0


def test_the_served_api_version_is_detected(cluster: SlurmCluster) -> None:
    api = cluster.rest.api
    assert api.version == "v0.0.38" and "v0.0.37" in api.served
    assert not api.node_update  # 22.05: POST node/{name} is 405, so scontrol drains


def test_jobs_on_a_node_come_from_expanded_host_lists(
    slurm: SlurmServers, cluster: SlurmCluster
) -> None:
    single = slurm.submit(node=NODE, name="llm-pretrain", gpus=8)
    multi = slurm.submit(node="gpu-node-[02-03]", name="multi", gpus=4, nodes=2, requeue=False)
    (job,) = cluster.pods_on(NODE)
    assert (job.name, job.workload, job.namespace, job.phase) == (
        single, "llm-pretrain", "train", "Running"
    )
    assert job.gpus == 8 and job.labels[JOB_GPUS] == "0-1-2-3-4-5-6-7"
    assert job.labels[JOB_USER] == "nobody" and job.labels[JOB_REQUEUE] == "true"
    (other,) = cluster.pods_on("gpu-node-03")
    assert (other.name, other.gpus, other.labels[JOB_REQUEUE]) == (multi, 4, "false")
    assert cluster.pods_on("gpu-node-05") == []
    with pytest.raises(NodeNotFound):
        cluster.pods_on("gpu-node-77")


def test_cordon_is_a_drain_with_the_bots_reason_and_uncordon_resumes(
    slurm: SlurmServers, cluster: SlurmCluster
) -> None:
    assert cluster.annotate(NODE, CLAIM) is Outcome.CHANGED
    assert cluster.cordon(NODE) is Outcome.CHANGED
    assert cluster.cordon(NODE) is Outcome.ALREADY_DONE
    node = cluster.nodes([NODE])[0]
    assert node.unschedulable and node.annotations.items() >= CLAIM.items()
    reason = slurm.run("sinfo", "-h", "-R", "-n", NODE, "-o", "%E").strip()
    assert reason == "gpu-oncall: INC-42: XID 79 on GPU 5"
    assert slurm.node_state(NODE) == "drained"
    assert cluster.uncordon(NODE) is Outcome.CHANGED
    assert cluster.uncordon(NODE) is Outcome.ALREADY_DONE
    assert slurm.node_state(NODE) in {"idle", "idle*"}  # 22.05 pings a resumed node (the *)


def test_a_foreign_drain_is_not_the_bots_even_with_its_markers(
    slurm: SlurmServers, cluster: SlurmCluster
) -> None:
    cluster.annotate(NODE, CLAIM)
    slurm.drain(NODE, "NHC: GPU 3 has uncorrectable ECC errors")
    node = cluster.nodes([NODE])[0]
    assert node.unschedulable
    assert "gpu-oncall.io/cordoned-by" not in node.annotations
    drained_by = node.annotations[DRAINED_BY]
    assert drained_by.startswith("NHC: GPU 3 has uncorrectable ECC errors (by root")


def test_drain_requeues_jobs_that_allow_it_and_blocks_the_others(
    slurm: SlurmServers, cluster: SlurmCluster
) -> None:
    requeued = slurm.submit(node=NODE, name="llm-pretrain", gpus=4)
    pinned = slurm.submit(node=NODE, name="no-requeue", gpus=4, requeue=False)
    elsewhere = slurm.submit(node="gpu-node-05", name="bystander", gpus=8)
    report = cluster.drain(NODE, grace=GRACE)
    assert report.outcome is Outcome.CHANGED
    assert report.evicted == (requeued,) and report.blocked == (pinned,)
    assert "--no-requeue" in report.reasons[f"train/{pinned}"]
    requeued_states = {"PENDING", "REQUEUED", "REQUEUE_HOLD"}
    poll(lambda: slurm.job_state(requeued) in requeued_states, what=f"job {requeued} requeued")
    assert slurm.job_state(pinned) == "RUNNING" and slurm.job_state(elsewhere) == "RUNNING"
    assert slurm.node_state(NODE) in {"draining", "mixed+drain"}
    again = cluster.drain(NODE, grace=GRACE)
    assert again.outcome is Outcome.ALREADY_DONE and again.blocked == (pinned,)


def test_drain_in_cancel_mode_cancels_and_a_gone_job_is_already_done(
    slurm: SlurmServers,
) -> None:
    cluster = make_slurm_cluster(slurm, drain_mode="cancel")
    try:
        job = slurm.submit(node=NODE, name="llm-pretrain", gpus=8, requeue=False)
        report = cluster.drain(NODE, grace=GRACE)
        assert report.evicted == (job,) and report.reasons[f"train/{job}"] == "cancelled"
        assert cluster.delete_pod(job, "train", grace=GRACE) is Outcome.ALREADY_DONE
        assert cluster.delete_pod("999999", "train", grace=GRACE) is Outcome.ALREADY_DONE
        assert slurm.job_state(job) in {"GONE", "CANCELLED", "COMPLETING"}
    finally:
        cluster.close()


def test_markers_live_in_the_comment_and_are_removed(
    slurm: SlurmServers, cluster: SlurmCluster
) -> None:
    assert cluster.annotate(NODE, CLAIM) is Outcome.CHANGED
    assert cluster.annotate(NODE, CLAIM) is Outcome.ALREADY_DONE
    assert cluster.label(NODE, {"gpu-oncall.io/quarantined": "true"}) is Outcome.CHANGED
    node = cluster.nodes([NODE])[0]
    assert node.labels["gpu-oncall.io/quarantined"] == "true"
    assert '"gpu-oncall.io/incident":"INC-42"' in slurm.run("scontrol", "show", "node", NODE)
    assert cluster.annotate(NODE, dict.fromkeys(CLAIM)) is Outcome.CHANGED
    assert cluster.label(NODE, {"gpu-oncall.io/quarantined": None}) is Outcome.CHANGED
    node = cluster.nodes([NODE])[0]
    assert not any(k.startswith("gpu-oncall.io/") for k in node.annotations)
    assert "gpu-oncall.io/quarantined" not in node.labels


def test_the_reason_is_an_event_naming_who_set_it(
    slurm: SlurmServers, cluster: SlurmCluster
) -> None:
    since = datetime.now(UTC) - timedelta(hours=1)
    slurm.drain(NODE, "admin: reseat PSU")
    reasons = [e for e in cluster.events(NODE, since=since) if e.reason == "SlurmReason"]
    assert len(reasons) == 1 and reasons[0].message.startswith("admin: reseat PSU (set by root")
    assert reasons[0].type == "Warning"
    assert cluster.events(NODE, since=datetime.now(UTC) + timedelta(hours=1)) == []


def test_taints_are_refused_naming_the_slurm_equivalent(cluster: SlurmCluster) -> None:
    with pytest.raises(TaintUnsupported, match="use the `cordon` action"):
        cluster.taint(NODE, key="gpu-oncall.io/unhealthy")


def test_slurm_jwt_in_the_environment_never_reaches_scontrol(slurm: SlurmServers) -> None:
    leaked = slurm.env | {"SLURM_JWT": slurm.token("nobody")}  # a non-operator's token
    direct = subprocess.run(
        ["scontrol", "update", f"nodename={NODE}", "state=drain", "reason=leak"],
        env=leaked, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert direct.returncode != 0 and "invalid user id" in direct.stderr.lower()  # as nobody
    Scontrol(environ=leaked, conf=str(slurm.conf)).update_node(
        NODE, state="drain", reason="gpu-oncall: scrubbed"
    )
    assert slurm.node_state(NODE) == "drained"


def test_scontrol_refusals_and_unknown_nodes_are_translated(slurm: SlurmServers) -> None:
    as_nobody = Scontrol(environ=slurm.env, conf=str(slurm.conf))
    with pytest.raises(NodeNotFound, match="gpu-node-77"):
        as_nobody.update_node("gpu-node-77", state="resume")
    with pytest.raises(ClusterForbidden, match="not a Slurm operator"):
        translate_and_raise(slurm)


def translate_and_raise(slurm: SlurmServers) -> None:
    """scontrol run with a non-operator's token (what the scrub prevents), translated."""
    from integrations.slurm.scontrol import translate

    leaked = slurm.env | {"SLURM_JWT": slurm.token("nobody")}
    done = subprocess.run(
        ["scontrol", "update", f"nodename={NODE}", "state=drain", "reason=x"],
        env=leaked, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    raise translate("scontrol update", done.stderr, node=NODE, job="")


def test_the_kernel_log_is_an_unsupported_read_that_a_run_records_as_unavailable(
    cluster: SlurmCluster,
) -> None:
    with pytest.raises(ReadUnsupported) as exc:
        cluster.node_logs(NODE)
    assert "Slurm serves no kernel log" in str(exc.value)
    gap = unavailable_read("node_logs", exc.value)
    assert gap["unavailable"] == "cluster" and gap["missing"] is True
    assert "kernel log unavailable: Slurm serves no kernel log" in gap["error"]
    assert "kubelet" not in gap["error"] and "XID gauge" in gap["error"]
    with pytest.raises(NodeNotFound):
        cluster.node_logs("gpu-node-99")


HOSTILE = ["gpu-node-01/../x", 'a"b', "x" * 300, "gpu-node-01 state=resume", "", "Gpu-Node-01"]


@pytest.mark.parametrize("name", HOSTILE, ids=["traversal", "quote", "300", "arg", "empty", "up"])
def test_hostile_names_are_refused_before_any_request(cluster: SlurmCluster, name: str) -> None:
    before = cluster.rest.calls
    for call in (cluster.cordon, cluster.uncordon, cluster.pods_on, cluster.node_logs):
        with pytest.raises(InvalidName):
            call(name)
    with pytest.raises(InvalidName):
        cluster.drain(name, grace=GRACE)
    with pytest.raises(InvalidName):
        cluster.delete_pod(name, "train", grace=GRACE)
    assert cluster.rest.calls == before
