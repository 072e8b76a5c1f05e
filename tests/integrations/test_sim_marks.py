"""SimCluster's markers and PodDisruptionBudgets survive a restart of the simulated fleet.

Covers: taints, annotations, label writes (including removing a built-in label), a deleted pod
and a PodDisruptionBudget are journaled, so a fleet rebuilt in another process from
`export_state` shows the same nodes and pods and its drains are refused by the same budget;
a taint shows in `kube`-style `key=value:Effect` form after the controller's own taints.
"""

from __future__ import annotations

import json
from datetime import timedelta

from integrations.cluster import Outcome
from simulator import Fleet, SimCluster
from simulator.marking import SimBudget
from tests.servers.kube_world import contract_fleet

NODE = "gpu-node-01"


def _marked(fleet: Fleet) -> SimCluster:
    cluster = SimCluster(fleet)
    cluster.cordon(NODE)
    cluster.taint(NODE, key="gpu-oncall.io/quarantine", value="ecc", effect="NoExecute")
    cluster.annotate(NODE, {"gpu-oncall.io/incident": "7"})
    cluster.label(NODE, {"gpu-oncall.io/rack": None, "gpu-oncall.io/protected": "true"})
    cluster.delete_pod("llm-pretrain-worker-0", "ml", grace=timedelta(seconds=5))
    fleet.add_budget(SimBudget("train", "ml", {"app.kubernetes.io/name": "llm-pretrain"}, 1))
    return cluster


def test_markers_and_budgets_replay_in_a_new_process() -> None:
    before = _marked(contract_fleet())
    state = json.loads(json.dumps(before.fleet.export_state()))
    restored = contract_fleet()
    restored.restore_state(state)
    after = SimCluster(restored)
    assert after.nodes() == before.nodes()
    assert after.pods_on("gpu-node-00") == before.pods_on("gpu-node-00")
    node = after.nodes([NODE])[0]
    assert node.taints == (
        "node.kubernetes.io/unschedulable:NoSchedule",
        "gpu-oncall.io/quarantine=ecc:NoExecute",
    )
    assert node.annotations == {"gpu-oncall.io/incident": "7"}
    assert "gpu-oncall.io/rack" not in node.labels and node.labels["gpu-oncall.io/protected"]
    report = after.drain(NODE, grace=timedelta(seconds=30))
    assert report.blocked == ("llm-pretrain-worker-1",)
    assert "The disruption budget train needs 1 healthy pods and has 1 currently" in (
        report.reasons["ml/llm-pretrain-worker-1"]
    )
    assert after.delete_pod("llm-pretrain-worker-0", "ml", grace=timedelta(0)) is (
        Outcome.ALREADY_DONE
    )
