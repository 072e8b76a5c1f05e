"""slurmrestd answers -> the port's records (pure), for the shapes of both REST generations.

Covers: 22.05's `state` string + `state_flags` and 24.11's `state` list read alike; times as
epoch numbers or `{set, infinite, number}`; DRAIN decides `unschedulable` even when 24.11 kept
the old reason after a RESUME; NOT_RESPONDING is Ready=Unknown, DOWN Ready=False; the bot's
drain (reason prefix) is its own, another prefix is a foreign owner; GRES counts and types;
a job's GPUs on each of its nodes from `gres_detail`.
"""

from __future__ import annotations

from datetime import UTC, datetime

from integrations.slurm.records import (
    DRAINED_BY,
    Labelling,
    epoch,
    gpu_count,
    job_info,
    node_flags,
    node_info,
)

LABELLING = Labelling(domain_features={"rack-": "gpu-oncall.io/rack"})
AT = 1795701021


def test_both_state_shapes_read_alike() -> None:
    old = {"name": "n1", "state": "mixed", "state_flags": ["DRAIN"]}
    new = {"name": "n1", "state": ["MIXED", "DRAIN"]}
    assert node_flags(old) == node_flags(new) == ("MIXED", "DRAIN")


def test_times_as_numbers_or_24_11_objects() -> None:
    expected = datetime.fromtimestamp(AT, tz=UTC)
    assert epoch(AT) == epoch({"set": True, "infinite": False, "number": AT}) == expected
    assert epoch({"set": False, "number": 0}) is None and epoch(0) is None


def test_a_resumed_node_with_24_11s_kept_reason_is_schedulable() -> None:
    raw = {"name": "n1", "state": ["IDLE"], "reason": "gpu-oncall: INC-1: XID 48",
           "comment": '{"gpu-oncall.io/cordoned-by":"gpu-oncall","gpu-oncall.io/incident":"INC-1"}'}
    info = node_info(raw, LABELLING)
    assert not info.unschedulable and info.taints == ()
    assert info.annotations["gpu-oncall.io/incident"] == "INC-1"  # human_override can see it


def test_readiness_from_the_state_flags() -> None:
    silent = node_info({"name": "n1", "state": "idle", "state_flags": ["NOT_RESPONDING"]},
                       LABELLING)  # fmt: skip
    down = node_info({"name": "n1", "state": ["DOWN", "DRAIN"], "reason": "NHC: x"}, LABELLING)
    assert (silent.ready, silent.conditions["Ready"]) == (False, "Unknown")
    assert (down.ready, down.conditions["Ready"], down.unschedulable) == (False, "False", True)
    assert down.conditions["Drain"] == "True"


def test_drain_ownership_comes_from_the_reason_prefix() -> None:
    ours = node_info({"name": "n1", "state": ["IDLE", "DRAIN"], "reason": "gpu-oncall: INC-3"},
                     LABELLING)  # fmt: skip
    theirs = node_info(
        {"name": "n1", "state": ["IDLE", "DRAIN"], "reason": "NHC: ib0 down",
         "reason_set_by_user": "root", "reason_changed_at": AT,
         "comment": '{"gpu-oncall.io/cordoned-by":"gpu-oncall"}'},
        LABELLING,
    )  # fmt: skip
    assert ours.annotations["gpu-oncall.io/cordoned-by"] == "gpu-oncall"
    assert "gpu-oncall.io/cordoned-by" not in theirs.annotations
    assert theirs.annotations[DRAINED_BY].startswith("NHC: ib0 down (by root at 2026-")


def test_gres_and_labels() -> None:
    assert gpu_count("gpu:h100:8,shard:4") == 8 and gpu_count("gpu:4(S:0-1)") == 4
    info = node_info({"name": "n1", "state": "idle", "gres": "gpu:h100:8",
                      "gres_drained": "gpu:h100:2", "partitions": ["train", "debug"],
                      "features": "h100,rack-07"}, LABELLING)  # fmt: skip
    assert (info.gpu_capacity, info.gpu_allocatable) == (8, 6)
    assert info.labels["slurm.schedmd.com/partition"] == "train"
    assert info.labels["gpu-oncall.io/rack"] == "rack-07"
    assert info.labels["nvidia.com/gpu.product"] == "h100"


def test_a_jobs_gpus_on_each_of_its_nodes() -> None:
    raw = {"job_id": 7, "name": "llm", "partition": "train", "job_state": "RUNNING",
           "nodes": "gpu-node-[02-03]", "gres_detail": ["gpu:h100:4(IDX:0-3)",
                                                        "gpu:h100:2(IDX:6-7)"],
           "requeue": True, "user_name": "alice", "start_time": AT}  # fmt: skip
    second = job_info(raw, "gpu-node-03")
    assert (second.name, second.gpus, second.workload, second.phase) == ("7", 2, "llm", "Running")
    assert second.labels["slurm.schedmd.com/gpu-indices"] == "6-7"
    assert job_info(raw | {"job_state": ["PENDING"]}, "gpu-node-02").phase == "Pending"
