"""After one incident's verdict, nothing reads the whole pool (issue 21 item 3): the evidence
snapshot's peers and the approval impact's spares come from `Cluster.first_nodes` with a small
limit, and every other node read names its nodes. Counted calls and rows, never time.

The fleet is one pool of 100 nodes (every node the same GPU product, as a real one-pool
cluster) and a gang job fills its first 40, so the first 33 nodes the impact reads hold no
free GPU: the impact must say it read 33 of 100 nodes rather than claim the pool has none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.actions.impact import POOL_READ, approval_notes
from bot.config import Settings
from bot.engine.snapshotting import PEERS
from bot.wiring.runtime import Runtime, open_runtime
from integrations.cluster import NodeSample
from storage import snapshots as snapshot_store
from storage.db import session_scope

NODES = 100
CULPRIT = "gpu-node-03"
SCENARIO = {
    "apiVersion": "gpu-oncall/v1",
    "kind": "Scenario",
    "metadata": {"name": "one-pool-100", "description": "A gang job fills the first 40 nodes."},
    "fleet": {
        "nodes": NODES,
        "gpus_per_node": 8,
        "workloads": [{"kind": "training", "name": "llm-pretrain", "nodes": "gpu-node-[00-39]"}],
    },
    "faults": [{"kind": "ecc_dbe_storm", "node": CULPRIT, "gpu": 5, "start": "-10m"}],
    "trigger": {"alert": {"alertname": "GPUEccStorm", "labels": {"Hostname": CULPRIT}}},
}


@pytest.fixture
def one_pool(settings: Settings, tmp_path: Path) -> Iterator[Runtime]:
    path = tmp_path / "one-pool.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    with open_runtime(settings, scenario_path=path, fresh=True) as rt:
        yield rt


def _record(calls: list[tuple[Any, ...]], name: str, read: Callable[..., Any]) -> Any:
    def recorded(*args: Any, **kw: Any) -> Any:
        found = read(*args, **kw)
        calls.append((name, args, kw, found))
        return found

    return recorded


def test_the_snapshot_and_the_impact_read_a_bounded_part_of_the_pool(
    one_pool: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = one_pool.deps.cluster
    calls: list[tuple[Any, ...]] = []
    for name in ("nodes", "first_nodes"):
        monkeypatch.setattr(cluster, name, _record(calls, name, getattr(cluster, name)))
    loaded = one_pool.catalog.get("ecc-storm")
    incident_id, _ = one_pool.engine.open_incident(loaded, {"node": CULPRIT}, actor="cli:dave")
    outcome = one_pool.engine.start(
        loaded, inputs={"node": CULPRIT}, incident_id=incident_id, requester="cli:dave"
    )
    assert outcome.approval is not None

    # every `nodes` read names its nodes: no label selection, no fleet listing
    listed = [(args, kw) for name, args, kw, _ in calls if name == "nodes"]
    assert listed and all(args and args[0] is not None for args, _ in listed)
    assert all(not kw.get("labels") for _, kw in listed)
    bounded = [(kw["limit"], found) for name, _, kw, found in calls if name == "first_nodes"]
    limits = sorted(limit for limit, _ in bounded)
    assert limits == [PEERS + 1, POOL_READ]  # the snapshot's peers, the impact's candidates
    for limit, found in bounded:
        assert isinstance(found, NodeSample)
        assert len(found.nodes) == limit and found.total == NODES

    with session_scope(one_pool.db) as session:
        (snapshot,) = snapshot_store.list_snapshots(session, incident_id=incident_id)
    peers = {s["node"] for s in snapshot.series if s["role"] == "peer"} - {CULPRIT}
    assert peers == {"gpu-node-00", "gpu-node-01", "gpu-node-02"}  # the pool's first names
    label = one_pool.deps.pool_label
    (culprit,) = cluster.nodes([CULPRIT])
    pool = culprit.labels[label]
    assert {n.labels.get(label) for n in cluster.nodes(sorted(peers))} == {pool}  # real peers

    notes = approval_notes(outcome.approval)
    read = f"{POOL_READ} of {NODES} nodes read"
    assert f"Spares in pool {pool}: none with free GPUs ({read})" in notes
    (advice,) = [n for n in notes if n.startswith("Recommendation:")]
    assert f"(0 free GPUs on {read}, llm-pretrain needs 8)" in advice
