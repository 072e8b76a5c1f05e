"""The node actions (bot/actions/registry.py, unchanged) on real Slurm: ownership by reason.

Covers: cordon drains with the bot's reason naming the incident and the verdict, a second
cordon is already done; drain requeues the node's jobs and leaves a job elsewhere alone; a
node drained by LBNL NHC (`NHC:` reason) or an admin is refused with that reason and left as
it was; a person's RESUME of a node the bot drained cancels the incident's later actions on it
(decided from the DRAIN flag and the bot's markers, not the reason text); uncordon resumes only
the bot's own drains.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.actions.registry import ActionContext, ActionSpec, default_registry
from integrations.slurm import SlurmCluster
from tests.actions.action_helpers import action_context
from tests.servers.prometheus import poll
from tests.servers.slurm import SlurmServers

NODE = "gpu-node-02"
VERDICT = {"summary": "XID 79 on GPU 5", "layer": "gpu_hardware"}


@pytest.fixture
def ctx(cluster: SlurmCluster) -> ActionContext:
    return action_context(cluster=cluster, verdict=VERDICT)


def act(name: str, ctx: ActionContext, target: str = NODE) -> dict[str, Any]:
    spec: ActionSpec = default_registry().get(name)
    return spec.run(ctx, target, {}).to_dict()


def reason(slurm: SlurmServers, node: str = NODE) -> str:
    return slurm.run("sinfo", "-h", "-R", "-n", node, "-o", "%E").strip()


def test_cordon_drains_with_the_bots_reason_once(slurm: SlurmServers, ctx: ActionContext) -> None:
    first = act("cordon", ctx)
    assert first["outcome"] == "changed" and first["data"]["gpus"] == 8
    assert reason(slurm) == "gpu-oncall: INC-7: XID 79 on GPU 5"
    assert act("cordon", ctx)["outcome"] == "already_done"
    assert slurm.node_state(NODE) == "drained"


def test_drain_requeues_the_nodes_jobs_and_leaves_others_alone(
    slurm: SlurmServers, ctx: ActionContext
) -> None:
    victim = slurm.submit(node=NODE, name="llm-pretrain", gpus=8)
    bystander = slurm.submit(node="gpu-node-06", name="bystander", gpus=8)
    result = act("drain", ctx)
    assert result["outcome"] == "changed" and result["data"]["evicted"] == [victim]
    poll(lambda: slurm.job_state(victim) == "PENDING", what=f"job {victim} requeued")
    assert slurm.job_state(bystander) == "RUNNING"
    assert reason(slurm).startswith("gpu-oncall: INC-7")


@pytest.mark.parametrize(
    "foreign", ["NHC: check_hw_gpu: GPU 3 missing", "admin: reseat PSU"], ids=["nhc", "admin"]
)
def test_a_foreign_drain_is_refused_with_its_reason(
    slurm: SlurmServers, ctx: ActionContext, foreign: str
) -> None:
    job = slurm.submit(node=NODE, name="llm-pretrain", gpus=8)
    slurm.drain(NODE, foreign)
    for action in ("cordon", "drain", "uncordon"):
        result = act(action, ctx)
        assert result["outcome"] == "refused", result
        assert foreign in result["detail"]
    assert reason(slurm) == foreign and slurm.job_state(job) == "RUNNING"


def test_a_human_resume_cancels_the_incidents_later_actions(
    slurm: SlurmServers, ctx: ActionContext
) -> None:
    assert act("cordon", ctx)["outcome"] == "changed"
    slurm.resume(NODE)
    job = slurm.submit(node=NODE, name="llm-pretrain", gpus=8)
    for action in ("drain", "cordon"):
        result = act(action, ctx)
        assert result["outcome"] == "cancelled", result
        assert "uncordoned by someone else after INC-7" in result["detail"]
    assert "drain" not in slurm.node_state(NODE) and slurm.job_state(job) == "RUNNING"


def test_uncordon_resumes_the_bots_own_drain_and_clears_its_markers(
    slurm: SlurmServers, ctx: ActionContext, cluster: SlurmCluster
) -> None:
    act("cordon", ctx)
    assert act("uncordon", ctx)["outcome"] == "changed"
    assert "drain" not in slurm.node_state(NODE)
    assert not any(k.startswith("gpu-oncall.io/") for k in cluster.nodes([NODE])[0].annotations)
