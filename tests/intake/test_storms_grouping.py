"""Alert storms through the running server: many alerts of one name for different nodes of one
domain become one parent incident, triaged once over all its members.

Covers: 6 nodes of rack r1 in one webhook (threshold 5) open one parent incident (target
`GPUPowerBrake@rack=r1`, kind `storm`) holding all 6 alerts, with no per-node incidents, a
pinned note listing the members, and one run whose `nodes` input names all 6; a later alert for
another node of the rack joins the parent and a second run triages all 7 members; alerts below
the threshold in another rack open one incident each; alerts that arrive one webhook at a time
tip over the threshold within the window, and the incidents opened before the storm was
recognised are told their parent; resolving every member resolves the parent with its MTTR
timestamps; alerts that no runbook lists under `triggers.storms` keep one incident and one run
per node, so no member goes untriaged. Bad members: an alert with an invalid or missing
`Hostname` never counts toward a storm (neither in the same webhook nor from an earlier one),
and a storm with such a member still triages every valid member in one completed run.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from servers.oncall import Bot, alert, row_counts, running_bot, webhook

from bot.config import IntakeSettings, Settings
from storage import alerts as alert_store
from storage import incidents as incident_store
from storage import runs as run_store
from storage.db import session_scope

#: The per-node runbook of GPUPowerBrake, and the storm runbook that triages many at once.
NODE_RUNBOOK = """\
apiVersion: gpu-oncall/v1
kind: Runbook
metadata: {name: power-node, title: Power brake on one node}
triggers:
  alerts:
    - {alertname: GPUPowerBrake, target_label: Hostname}
    - {alertname: GPUHot, target_label: Hostname}
inputs:
  node: {type: node, required: true}
  window: {type: duration, default: 15m}
steps:
  - {id: power, title: Power draw, signal: gpu.power_usage}
  - id: low_power
    check: "power.max < 100.0"
    layer: facility
    finding: "power draw at most {{ power.max }} W"
  - {id: where, localize: {}}
"""
STORM_RUNBOOK = """\
apiVersion: gpu-oncall/v1
kind: Runbook
metadata: {name: power-storm, title: Power brake across nodes}
triggers:
  storms: [GPUPowerBrake]
inputs:
  nodes: {type: nodes, required: true, help: The nodes that alerted}
  window: {type: duration, default: 15m}
steps:
  - {id: power, title: Power draw, signal: gpu.power_usage}
  - id: low_power
    check: "power.max < 100.0"
    layer: facility
    finding: "power draw at most {{ power.max }} W"
  - {id: where, localize: {}}
"""


@pytest.fixture
def bot(bot_settings: Settings, scenario_dir: Path, tmp_path: Path) -> Bot:  # type: ignore[misc]
    books = tmp_path / "runbooks"
    books.mkdir()
    (books / "power-node.yaml").write_text(NODE_RUNBOOK)
    (books / "power-storm.yaml").write_text(STORM_RUNBOOK)
    settings = bot_settings.model_copy(
        update={
            "runbook_dirs": [books],
            "intake": IntakeSettings(storm_threshold=5, storm_window_minutes=5.0),
        }
    )
    with running_bot(settings, scenario=scenario_dir / "ecc-dbe-storm.yaml") as running:
        yield running


def brake(bot: Bot, node: int, *, rack: str = "r1", status: str = "firing") -> dict[str, object]:
    starts = bot.rt.fleet.t0 - timedelta(minutes=2)
    ends = bot.rt.clock.now() if status == "resolved" else None
    labels = {"Hostname": f"gpu-node-{node:02d}", "rack": rack}
    return alert("GPUPowerBrake", labels, starts_at=starts, status=status, ends_at=ends)


def test_storm_in_one_webhook_opens_one_parent_incident_triaged_once(bot: Bot) -> None:
    response = bot.post_alerts(webhook([brake(bot, n) for n in range(6)]))
    assert response.status_code == 200
    assert response.json()["incidents"] == ["INC-1"]
    assert response.json()["triage_queued"] == ["INC-1"]
    bot.settle()
    with session_scope(bot.rt.db) as session:
        (parent,) = incident_store.list_incidents(session)
        notes = [e for e in incident_store.list_events(session, 1) if e.kind == "note"]
        (run,) = run_store.list_runs_for_incident(session, 1)
        attached = alert_store.list_alerts_for_incident(session, 1)
    assert (parent.target, parent.target_kind) == ("GPUPowerBrake@rack=r1", "storm")
    assert parent.title == "GPUPowerBrake storm: 6 targets in rack=r1"
    assert len(attached) == 6
    assert notes[0].pinned
    assert notes[0].payload["members"] == [f"gpu-node-{n:02d}" for n in range(6)]
    assert run.runbook == "power-storm"
    assert run.inputs["nodes"] == ",".join(f"gpu-node-{n:02d}" for n in range(6))
    assert run.status == "completed"

    later = bot.post_alerts(webhook([brake(bot, 7)]))
    assert later.json()["incidents"] == ["INC-1"]
    assert later.json()["triage_queued"] == ["INC-1"]  # the new member is triaged too
    bot.settle()
    counts = row_counts(bot.rt.db)
    assert (counts["incidents"], counts["runs"], counts["alerts"]) == (1, 2, 7)
    with session_scope(bot.rt.db) as session:
        first, second = run_store.list_runs_for_incident(session, 1)
        notes = [e.summary for e in incident_store.list_events(session, 1) if e.kind == "note"]
    members = [f"gpu-node-{n:02d}" for n in (0, 1, 2, 3, 4, 5, 7)]
    assert second.inputs["nodes"] == ",".join(members)  # every member, for one correlation
    assert second.status == "completed"
    assert any("triages all 7 members" in n for n in notes)


def test_alerts_below_the_threshold_open_one_incident_each(bot: Bot) -> None:
    response = bot.post_alerts(webhook([brake(bot, n, rack="r2") for n in (8, 9)]))
    assert response.json()["incidents"] == ["INC-1", "INC-2"]
    with session_scope(bot.rt.db) as session:
        targets = sorted(i.target for i in incident_store.list_incidents(session))
    assert targets == ["gpu-node-08", "gpu-node-09"]


def test_storm_builds_up_over_separate_webhooks_within_the_window(bot: Bot) -> None:
    for node in range(4):
        assert bot.post_alerts(webhook([brake(bot, node)])).status_code == 200
    fifth = bot.post_alerts(webhook([brake(bot, 4)]))
    assert fifth.json()["incidents"] == ["INC-5"]
    bot.settle()
    with session_scope(bot.rt.db) as session:
        parent = incident_store.get_incident(session, 5)
        linked = [
            e
            for i in range(1, 5)
            for e in incident_store.list_events(session, i)
            if e.payload.get("storm_incident") == 5
        ]
        (run,) = run_store.list_runs_for_incident(session, 5)
    assert parent is not None and parent.target_kind == "storm"
    assert len(linked) == 4
    assert run.inputs["nodes"].split(",") == [f"gpu-node-{n:02d}" for n in range(5)]


def test_parent_resolves_when_every_member_has_resolved(bot: Bot) -> None:
    assert bot.post_alerts(webhook([brake(bot, n) for n in range(5)])).status_code == 200
    bot.settle()
    resolved = webhook([brake(bot, n, status="resolved") for n in range(4)])
    assert bot.post_alerts(resolved).status_code == 200
    with session_scope(bot.rt.db) as session:
        parent = incident_store.get_incident(session, 1)
        assert parent is not None and parent.state != "resolved"
    assert bot.post_alerts(webhook([brake(bot, 4, status="resolved")])).status_code == 200
    with session_scope(bot.rt.db) as session:
        parent = incident_store.get_incident(session, 1)
    assert parent is not None
    assert parent.state == "resolved"
    assert parent.fired_at == bot.rt.fleet.t0 - timedelta(minutes=2)
    assert parent.resolved_at is not None and parent.diagnosed_at is not None


def test_alerts_that_no_storm_runbook_lists_never_form_a_storm(bot: Bot) -> None:
    starts = bot.rt.fleet.t0 - timedelta(minutes=2)
    hot = [
        alert("GPUHot", {"Hostname": f"gpu-node-{n:02d}", "rack": "r1"}, starts_at=starts)
        for n in range(6)
    ]
    response = bot.post_alerts(webhook(hot))
    assert response.json()["incidents"] == [f"INC-{i}" for i in range(1, 7)]
    assert len(response.json()["triage_queued"]) == 6
    bot.settle()
    with session_scope(bot.rt.db) as session:
        incidents = incident_store.list_incidents(session)
    assert {(i.runbook, i.target_kind) for i in incidents} == {("power-node", "node")}
    assert row_counts(bot.rt.db)["runs"] == 6


def bad_brake(bot: Bot, hostname: str | None, *, gpu: int = 0) -> dict[str, object]:
    labels = {"rack": "r1", "gpu": str(gpu)}
    labels |= {"Hostname": hostname} if hostname is not None else {}
    return alert("GPUPowerBrake", labels, starts_at=bot.rt.fleet.t0 - timedelta(minutes=2))


@pytest.mark.parametrize("hostname", ["GPU_NODE_99", None])
def test_an_unroutable_alert_never_tips_a_storm(bot: Bot, hostname: str | None) -> None:
    earlier = bot.post_alerts(webhook([bad_brake(bot, hostname)]))
    assert earlier.json()["incidents"] == []
    valid = [brake(bot, n) for n in range(4)]
    response = bot.post_alerts(webhook([*valid, bad_brake(bot, hostname, gpu=1)]))
    assert response.status_code == 200
    assert len(response.json()["unroutable"]) == 1
    assert response.json()["incidents"] == [f"INC-{i}" for i in range(1, 5)]
    bot.settle()
    with session_scope(bot.rt.db) as session:
        incidents = incident_store.list_incidents(session)
        runs = [r for i in incidents for r in run_store.list_runs_for_incident(session, i.id or 0)]
    assert sorted(i.target for i in incidents) == [f"gpu-node-{n:02d}" for n in range(4)]
    assert {i.target_kind for i in incidents} == {"node"}
    assert sorted((r.inputs["node"], r.status) for r in runs) == [
        (f"gpu-node-{n:02d}", "completed") for n in range(4)
    ]


def test_a_storm_with_an_invalid_member_still_triages_every_valid_member(bot: Bot) -> None:
    assert bot.post_alerts(webhook([bad_brake(bot, "Not_A_Node")])).status_code == 200
    members = [brake(bot, n) for n in range(5)]
    response = bot.post_alerts(webhook([*members, bad_brake(bot, "also..bad", gpu=1)]))
    assert response.status_code == 200
    assert response.json()["incidents"] == ["INC-1"]
    assert response.json()["triage_queued"] == ["INC-1"]
    bot.settle()
    with session_scope(bot.rt.db) as session:
        (parent,) = incident_store.list_incidents(session)
        (run,) = run_store.list_runs_for_incident(session, 1)
        attached = alert_store.list_alerts_for_incident(session, 1)
        unattached = alert_store.list_alerts(session, unattached_only=True)
    assert parent.target_kind == "storm"
    assert parent.title == "GPUPowerBrake storm: 5 targets in rack=r1"
    assert run.inputs["nodes"] == ",".join(f"gpu-node-{n:02d}" for n in range(5))
    assert run.status == "completed"
    assert len(attached) == 5
    assert sorted(a.labels["Hostname"] for a in unattached) == ["Not_A_Node", "also..bad"]
