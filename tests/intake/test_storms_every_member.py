"""Every member of an alert storm is triaged, also those that arrive after its run started
(issue 21): members that join the parent incident later go into the storm's next run, which
covers every member so far (bot/engine/storm_runs.py).

Covers: 1,024 `GPUEccStorm` alerts, one per node of a 1,024-node fleet, arrive in 32 shuffled
webhooks of 32 through the running server, the faulty node in the last one; they form one parent
incident whose verdict names the faulty node (gpu_hardware), the storm's last run has every
member as its `nodes` input, and the timeline says how many members each run triages.
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import yaml
from servers.oncall import Bot, alert, running_bot, webhook

from bot.config import Settings
from simulator.topology import NODE_PREFIX, node_name_width
from storage import incidents as incident_store
from storage import runs as run_store
from storage import work as work_store
from storage.db import session_scope

NODES, PER_WEBHOOK = 1024, 32


def names(nodes: int) -> list[str]:
    width = node_name_width(nodes)
    return [f"{NODE_PREFIX}{i:0{width}d}" for i in range(nodes)]


def storm_scenario(path: Path, *, faulty: str) -> Path:
    scenario = {
        "apiVersion": "gpu-oncall/v1",
        "kind": "Scenario",
        "metadata": {"name": "storm-1024", "description": f"DBE storm on {faulty}"},
        "fleet": {"nodes": NODES, "gpus_per_node": 8},
        "faults": [{"kind": "ecc_dbe_storm", "node": faulty, "gpu": 5, "start": "-10m"}],
        "trigger": {"alert": {"alertname": "GPUEccStorm", "labels": {"Hostname": faulty}}},
    }
    path.write_text(yaml.safe_dump(scenario))
    return path


def settle_storm(bot: Bot, incident_id: int) -> None:
    """Wait (bounded) until the storm has no triage left: the next run becomes due only when
    the run in flight finishes, so one wait for the pool is not enough."""
    for _ in range(NODES // PER_WEBHOOK + 1):
        bot.settle(120.0)
        with session_scope(bot.rt.db) as session:
            if not work_store.open_triage(session, incident_id=incident_id):
                return
    raise AssertionError("the storm's triage never finished")


def test_a_storm_whose_faulty_node_arrives_last_names_it(
    bot_settings: Settings, tmp_path: Path
) -> None:
    shuffled = names(NODES)
    random.Random(21).shuffle(shuffled)
    batches = [shuffled[i : i + PER_WEBHOOK] for i in range(0, NODES, PER_WEBHOOK)]
    faulty = batches[-1][PER_WEBHOOK // 2]
    scenario = storm_scenario(tmp_path / "storm.yaml", faulty=faulty)
    with running_bot(bot_settings, scenario=scenario) as bot:
        starts = bot.rt.clock.now() - timedelta(minutes=2)
        for batch in batches:
            alerts = [alert("GPUEccStorm", {"Hostname": n}, starts_at=starts) for n in batch]
            answer = bot.post_alerts(webhook(alerts))
            assert answer.status_code == 200, answer.text
            assert answer.json()["incidents"] == ["INC-1"]
        settle_storm(bot, 1)
        with session_scope(bot.rt.db) as session:
            (incident,) = incident_store.list_incidents(session)
            runs = run_store.list_runs_for_incident(session, 1)
            events = incident_store.list_events(session, 1)
    assert (incident.target, incident.target_kind) == ("GPUEccStorm@fleet", "storm")
    assert incident.layer == "gpu_hardware"
    assert faulty in incident.culprits
    triaged = {n for run in runs for n in str(run.inputs["nodes"]).split(",")}
    assert triaged == set(shuffled)  # no member left untriaged
    assert str(runs[-1].inputs["nodes"]).split(",") == sorted(shuffled)
    started = [e.summary for e in events if e.kind == "run_started"]
    assert len(started) == len(runs) and f"started on {NODES} nodes" in started[-1]
    assert any("joined the storm after its last run started" in e.summary for e in events)
