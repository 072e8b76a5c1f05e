"""The drain action's `on_no_requeue` runbook param on real Slurm (bot/actions/job_requeue.py),
and its check in the runbook schema.

Covers: `cancel` requeues the job that allows it and cancels the `--no-requeue` one; `block`
requeues the one and leaves the other running, reported blocked, even when the setting
(`slurm.drain_mode=cancel`) would cancel both, so the runbook's param wins over the setting;
without the param the setting decides (`cancel`: both cancelled); a value outside block|cancel
is a RunbookError naming the file, the step and the field; the shipped drain params load.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.actions.registry import default_registry
from bot.engine.loading import parse_runbook
from bot.errors import RunbookError
from integrations.signals import load_signal_catalog
from integrations.slurm import SlurmCluster
from runbooks import SIGNALS_FILE
from tests.actions.action_helpers import action_context
from tests.servers.prometheus import poll
from tests.servers.slurm import SlurmServers, make_slurm_cluster

NODE = "gpu-node-04"
VERDICT = {"summary": "XID 79 on GPU 2", "layer": "gpu_hardware"}


def drain(cluster: SlurmCluster, **params: Any) -> dict[str, Any]:
    ctx = action_context(cluster=cluster, verdict=VERDICT)
    return default_registry().get("drain").run(ctx, NODE, params).to_dict()


def two_jobs(slurm: SlurmServers) -> tuple[str, str]:
    """A checkpointing job (requeue allowed) and one submitted --no-requeue, both on NODE."""
    return (
        slurm.submit(node=NODE, name="ckpt-train", gpus=4),
        slurm.submit(node=NODE, name="no-requeue-eval", gpus=4, requeue=False),
    )


def gone(slurm: SlurmServers, job: str) -> bool:
    return slurm.job_state(job) in {"GONE", "CANCELLED", "COMPLETING"}


def test_cancel_requeues_what_allows_it_and_cancels_the_rest(
    slurm: SlurmServers, cluster: SlurmCluster
) -> None:
    requeueable, pinned = two_jobs(slurm)
    result = drain(cluster, on_no_requeue="cancel")
    assert result["outcome"] == "changed" and sorted(result["data"]["evicted"]) == sorted(
        [requeueable, pinned]
    )
    assert result["data"]["reasons"] == {
        f"train/{requeueable}": "requeued",
        f"train/{pinned}": "cancelled",
    }
    assert result["detail"] == f"{NODE} drained: 2 job(s) cancelled or requeued"
    poll(lambda: slurm.job_state(requeueable) == "PENDING", what=f"{requeueable} requeued")
    poll(lambda: gone(slurm, pinned), what=f"{pinned} cancelled")


def test_block_wins_over_the_cancel_setting(slurm: SlurmServers) -> None:
    cluster = make_slurm_cluster(slurm, drain_mode="cancel")
    try:
        requeueable, pinned = two_jobs(slurm)
        result = drain(cluster, on_no_requeue="block")
        assert result["data"]["evicted"] == [requeueable] and result["data"]["blocked"] == [pinned]
        assert result["detail"] == (  # Slurm's words, never a PodDisruptionBudget
            f"{NODE} drained: 1 job(s) requeued, 1 left running (submitted with --no-requeue)"
        )
        poll(lambda: slurm.job_state(requeueable) == "PENDING", what=f"{requeueable} requeued")
        assert slurm.job_state(pinned) == "RUNNING"
    finally:
        cluster.close()


def test_without_the_param_the_setting_decides(slurm: SlurmServers) -> None:
    cluster = make_slurm_cluster(slurm, drain_mode="cancel")
    try:
        requeueable, pinned = two_jobs(slurm)
        result = drain(cluster)
        assert set(result["data"]["reasons"].values()) == {"cancelled"}
        poll(lambda: gone(slurm, requeueable) and gone(slurm, pinned), what="both cancelled")
    finally:
        cluster.close()


def runbook(params: dict[str, Any]) -> dict[str, Any]:
    check = {"id": "hw", "check": "dbe.max > 0.0", "layer": "gpu_hardware", "finding": "x"}
    return {
        "apiVersion": "gpu-oncall/v1",
        "kind": "Runbook",
        "metadata": {"name": "t"},
        "inputs": {"node": {"type": "node", "required": True}},
        "steps": [
            {"id": "dbe", "signal": "gpu.ecc.dbe_rate"},
            check,
            {"id": "fix", "propose": [{"action": "drain", "params": params}]},
        ],
    }


def load(params: dict[str, Any]) -> None:
    signals = load_signal_catalog(SIGNALS_FILE).names()
    parse_runbook(runbook(params), file="runbooks/t.yaml", signals=signals, actions=["drain"])


@pytest.mark.parametrize("value", ["block", "cancel"])
def test_the_schema_accepts_block_and_cancel(value: str) -> None:
    load({"on_no_requeue": value, "grace_seconds": 30})


@pytest.mark.parametrize("value", ["requeue", "Cancel", 1, True])
def test_the_schema_refuses_anything_else_naming_file_step_and_field(value: Any) -> None:
    with pytest.raises(RunbookError) as err:
        load({"on_no_requeue": value})
    message = str(err.value)
    assert message.startswith("runbooks/t.yaml: step 'fix': field 'propose.0': ")
    assert f"params.on_no_requeue must be block or cancel (found {value!r})" in message
