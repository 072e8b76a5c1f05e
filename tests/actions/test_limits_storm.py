"""A storm of 12 faulty nodes in a 16-node pool with every risk auto-approved: at most the limit
is taken out, and every other node is reported with the reason.

Covers: one storm run (`node-storm`, the runbook intake starts for an alert storm) proposing 12
cordons and 12 drains: at most `maxUnhealthy` (25% = 4) nodes end cordoned in the fleet, every
other cordon and drain is `blocked` with the limit that stopped it and its numbers, the ticket
still goes out, the run completes and the incident goes back to people saying why; 12 separate
ECC runs racing on a thread pool (one per alerting node, as 12 alerts would start them) also
leave at most 4 nodes cordoned; and a later cordon in the same pool, once a node was returned
to service, still waits out `stormCooldownDuration`.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from servers.fleet_storm import node_name, storm_scenario

from bot.config import PolicySettings, Settings, StorageSettings
from bot.wiring.runtime import Runtime, open_runtime
from storage import incidents as incident_store
from storage.db import session_scope

FAULTY = [0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14]
NODES = [node_name(i, 16) for i in FAULTY]
POOL = "NVIDIA-H100-80GB-HBM3"


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    scenario = storm_scenario(tmp_path / "storm.yaml", nodes=16, per_rack=4, faulty=FAULTY)
    settings = Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        policy=PolicySettings(auto_approve_risks=["low", "medium", "high"]),
    )
    with open_runtime(settings, scenario_path=scenario, fresh=True) as runtime:
        yield runtime


def start(rt: Runtime, runbook: str, inputs: dict[str, str]) -> Any:
    loaded = rt.catalog.get(runbook)
    incident_id, _ = rt.engine.open_incident(loaded, inputs, actor="alertmanager")
    return rt.engine.start(loaded, inputs=inputs, incident_id=incident_id, requester="alertmanager")


def cordoned(rt: Runtime) -> list[str]:
    return sorted(n.name for n in rt.deps.cluster.nodes() if n.unschedulable)


def test_one_storm_run_cordons_at_most_the_limit_and_reports_the_rest(rt: Runtime) -> None:
    members = ",".join(NODES)
    outcome = start(rt, "node-storm", {"nodes": members})
    assert outcome.status == "completed"
    results = outcome.steps["execute"]["results"]
    out = cordoned(rt)
    assert 0 < len(out) <= 4
    removals = [r for r in results if r["action"] in ("cordon", "drain")]
    assert len(removals) == 24
    for result in removals:
        if result["target"] in out:
            assert result["outcome"] in ("changed", "already_done"), result
            continue
        assert result["outcome"] == "blocked", result
        assert result["blocked_by"] in ("maxUnhealthy", "maxGPUsRemoved")
        would = f"would {result['action']} {result['target']}; blocked: "
        assert result["detail"].startswith(would)
    unhealthy = [r for r in removals if r.get("blocked_by") == "maxUnhealthy"]
    assert unhealthy and unhealthy[0]["detail"].split(" · ")[0].endswith(
        f"4 of 16 nodes of pool {POOL} already out (limit 25% = 4 nodes)"
    )
    assert [r["outcome"] for r in results if r["action"] == "open_ticket"] == ["changed"]
    with session_scope(rt.db) as session:
        incident = incident_store.get_incident(session, 1)
        events = incident_store.list_events(session, 1)
    assert incident is not None and incident.state == "triaging"
    moved = [e.summary for e in events if e.kind == "state_changed"]
    assert any("blocked by a safety limit" in s for s in moved), moved
    blocked = [e for e in events if e.kind == "action_blocked"]
    assert len(blocked) == 24 - 2 * len(out)


def test_twelve_racing_runs_cordon_at_most_the_limit(rt: Runtime) -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = list(pool.map(lambda n: start(rt, "ecc-storm", {"node": n}), NODES))
    assert all(o.status == "completed" for o in outcomes)
    out = cordoned(rt)
    assert 0 < len(out) <= 4
    for outcome in outcomes:
        (cordon,) = [r for r in outcome.steps["execute"]["results"] if r["action"] == "cordon"]
        assert (cordon["outcome"] == "blocked") is (cordon["target"] not in out), cordon


def test_the_pool_waits_out_its_storm_cooldown(rt: Runtime) -> None:
    start(rt, "node-storm", {"nodes": ",".join(NODES)})
    back = cordoned(rt)[0]
    rt.deps.cluster.uncordon(back)  # a node repaired and returned: the pool is within its limit
    rt.clock.sleep(timedelta(minutes=5).total_seconds())
    again = start(rt, "ecc-storm", {"node": NODES[-1]})
    (cordon,) = [r for r in again.steps["execute"]["results"] if r["action"] == "cordon"]
    assert cordon["blocked_by"] == "stormCooldownDuration", cordon
    assert "(stormCooldownDuration 10m)" in cordon["detail"]
