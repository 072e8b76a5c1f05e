"""Gang-aware impact and the safety limits on real Slurm, pool = partition
(`policy.pool_label: slurm.schedmd.com/partition`), domains from the `rack-*` features.

Covers: the approval of an ecc-storm drain shows the Slurm job on the node (the gang is the job:
its GPUs lost from `gres_detail`, its ranks from the job metrics), idle nodes of the partition
as spares; with three train nodes already drained by NHC (3 of 12 = maxUnhealthy 25%), the
bot's removal of a fourth is blocked at its claim and nothing is written to Slurm.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.cli import journeys
from bot.cli.terminal import Terminal
from bot.config import PolicySettings, Settings, SlurmSettings, StorageSettings
from bot.engine.running import RunOutcome
from bot.wiring.runtime import Runtime, open_runtime
from integrations.slurm.records import PARTITION
from simulator import SCENARIO_DIR
from tests.servers.slurm import SlurmServers

SCENARIO = SCENARIO_DIR / "ecc-dbe-storm.yaml"
NODE = "gpu-node-03"


@pytest.fixture
def runtime(tmp_path: Path, slurm: SlurmServers) -> Iterator[Runtime]:
    settings = Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        cluster="slurm",
        telemetry="sim",
        policy=PolicySettings(pool_label=PARTITION),
        slurm=SlurmSettings(
            url=slurm.rest_url, token=SecretStr(slurm.token()), conf=slurm.conf, retries=0
        ),
    )
    with open_runtime(settings, scenario_path=SCENARIO, fresh=True) as rt:
        yield rt


def start(rt: Runtime) -> RunOutcome:
    started = journeys.command_journey(
        rt, Terminal(io.StringIO()), loaded=rt.catalog.get("ecc-storm"), inputs={"node": NODE},
        yes=False, user="cli:alice", interactive=False,
    )  # fmt: skip
    assert started.status == "awaiting_approval"
    return started


def test_the_approval_shows_the_slurm_job_lost_and_spares_in_the_partition(
    runtime: Runtime, slurm: SlurmServers
) -> None:
    slurm.submit(node=NODE, name="llm-pretrain", gpus=8)
    slurm.submit(node="gpu-node-04", name="other", gpus=8)
    started = start(runtime)
    assert started.approval is not None
    drain = next(p for p in started.approval["proposals"] if p["action"] == "drain")
    impact = drain["impact"]
    assert impact["pool"] == "train" and impact["ready"] is True
    (job,) = impact["jobs"]
    assert (job["job"], job["ranks_lost"], job["gpus_lost"]) == ("llm-pretrain", 1, 8)
    assert job["ranks_total"] == 8  # the sim's job metrics report llm-pretrain on 8 nodes
    spares = {s["node"] for s in impact["spares"]}
    assert spares and spares.isdisjoint({NODE, "gpu-node-04"})
    assert spares <= {f"gpu-node-{i:02d}" for i in range(12)}  # same partition only


def test_max_unhealthy_per_partition_blocks_at_the_claim(
    runtime: Runtime, slurm: SlurmServers
) -> None:
    for node in ("gpu-node-00", "gpu-node-01", "gpu-node-02"):
        slurm.drain(node, "NHC: check_hw_ib: ib0 down")
    started = start(runtime)
    outcome = runtime.engine.resume(started.run_id, decision="approve", actor="cli:bob")
    results = {r["action"]: r for r in outcome.steps["execute"]["results"]}
    assert results["cordon"]["outcome"] == "blocked"
    assert results["cordon"]["blocked_by"] == "maxUnhealthy"
    assert "3 of 12 nodes of pool train already out" in results["cordon"]["detail"]
    assert "drain" not in slurm.node_state(NODE)
    assert slurm.run("sinfo", "-h", "-R", "-n", NODE, "-o", "%E").strip() == ""
