"""The simulated fleet's medik8s NodeHealthChecks: journaled like every other sim write.

Covers: a fresh fleet has none (no pauses anywhere); pausing, then resuming by setting the
same NHC again, is what SimCluster reports; the NHCs survive `export_state` ->
`restore_state` in a new fleet (JSON round trip), the latest setting winning; a denied list
raises ClusterForbidden naming the permission.
"""

from __future__ import annotations

import json

import pytest

from integrations.cluster import RemediationPause
from integrations.errors import ClusterForbidden
from simulator import SimCluster
from simulator.marking import SimHealthCheck
from tests.servers.kube_world import contract_fleet

NODE = "gpu-node-01"
WORKERS = {"matchExpressions": [{"key": "nvidia.com/gpu.count", "operator": "Exists"}]}


def test_a_fresh_fleet_has_no_pauses() -> None:
    cluster = SimCluster(contract_fleet())
    assert all(cluster.remediation_pauses(n) == [] for n in cluster.nodes())


def test_pause_and_resume_replay_in_a_new_fleet() -> None:
    fleet = contract_fleet()
    fleet.set_health_check(SimHealthCheck("nhc-workers", WORKERS, ("upgrade",)))
    fleet.set_health_check(SimHealthCheck("nhc-rack", {"matchLabels": {"a": "b"}}, ("x",)))
    cluster = SimCluster(fleet)
    node = cluster.nodes([NODE])[0]
    paused = [RemediationPause("NodeHealthCheck", "nhc-workers", ("upgrade",))]
    assert cluster.remediation_pauses(node) == paused

    restored = contract_fleet()
    restored.restore_state(json.loads(json.dumps(fleet.export_state())))
    assert SimCluster(restored).remediation_pauses(node) == paused

    fleet.set_health_check(SimHealthCheck("nhc-workers", WORKERS))  # resumed
    assert cluster.remediation_pauses(node) == []
    again = contract_fleet()
    again.restore_state(json.loads(json.dumps(fleet.export_state())))
    assert SimCluster(again).remediation_pauses(node) == []


def test_a_denied_list_names_the_permission() -> None:
    cluster = SimCluster(contract_fleet())
    cluster.deny("list", "nodehealthchecks")
    with pytest.raises(ClusterForbidden, match="may not list nodehealthchecks"):
        cluster.remediation_pauses(cluster.nodes([NODE])[0])
