"""An alert storm through the real servers: a leaf switch goes bad -> deploy/'s IBLinkDegraded
rule fires for every node behind it in a real Prometheus -> a real Alertmanager posts them to
the running bot in one webhook -> one parent incident, one node-storm run, the switch blamed.

Same stack as test_alerting_end_to_end.py (Debian's Prometheus and Alertmanager on 127.0.0.1,
windows cut to seconds, bounded polling), on a 32-node fleet with 16-node racks and 8-node leaf
switches, and the bot's default storm policy (8 targets of one alert name within 5 minutes).

Covers: symbol errors on every port behind leaf-01 make IBLinkDegraded fire for exactly its 8
nodes; the bot opens one incident (kind `storm`, no per-node incidents) holding every alert,
runs node-storm once with the 8 members as `nodes`, localizes to the fabric with `leaf-01` as
the one culprit (not eight nodes, and not rack-00, which the leaf only half fills), and proposes
a fabric ticket and nothing that touches a node.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr
from servers.alertmanager import AlertingPrometheus, alerting_stack
from servers.oncall import TOKEN, Bot, running_bot
from servers.prometheus import free_port, poll

from bot.config import AlertmanagerSettings, ServerSettings, Settings, StorageSettings
from storage import alerts as alert_store
from storage import approvals as approval_store
from storage import incidents as incident_store
from storage import runs as run_store
from storage.db import session_scope

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "gpu-oncall-rules.yaml"
DEADLINE = 40.0
MEMBERS = [f"gpu-node-{n:02d}" for n in range(8, 16)]

SCENARIO = """\
apiVersion: gpu-oncall/v1
kind: Scenario
metadata:
  name: e2e-leaf-storm
  description: Every port behind leaf-01 (gpu-node-08..15, half of rack-00) takes symbol errors.
fleet: {nodes: 32, nodes_per_rack: 16, nodes_per_leaf: 8}
faults:
  - {kind: ib_symbol_errors, leaf: leaf-01, start: "-2m"}
trigger:
  storm: {alertname: IBLinkDegraded, target_label: instance, nodes: "gpu-node-[08-15]"}
"""


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[Bot, AlertingPrometheus]]:
    am_port = free_port()
    settings = Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        server=ServerSettings(token=SecretStr(TOKEN), workers=2),
        alertmanager=AlertmanagerSettings(url=f"http://127.0.0.1:{am_port}"),
    )
    scenario = tmp_path / "e2e-leaf-storm.yaml"
    scenario.write_text(SCENARIO)
    with (
        running_bot(settings, scenario=scenario) as bot,
        alerting_stack(bot.url, tmp_path, rules=RULES, token=TOKEN, am_port=am_port) as prometheus,
    ):
        yield bot, prometheus


def awaiting_approval(bot: Bot) -> bool:
    with session_scope(bot.rt.db) as session:
        return bool(approval_store.list_pending(session))


def test_a_leaf_switch_storm_becomes_one_incident_blaming_the_switch(
    stack: tuple[Bot, AlertingPrometheus],
) -> None:
    bot, prometheus = stack
    poll(
        lambda: awaiting_approval(bot),
        what="the IBLinkDegraded storm to reach the bot and wait for approval",
        seconds=DEADLINE,
    )
    firing = {a["metric"]["instance"] for a in prometheus.firing("IBLinkDegraded")}
    assert firing == set(MEMBERS)

    with session_scope(bot.rt.db) as session:
        incidents = incident_store.list_incidents(session)
        (parent,) = incidents
        assert parent.id is not None
        (run,) = run_store.list_runs_for_incident(session, parent.id)
        attached = alert_store.list_alerts_for_incident(session, parent.id)
        pending = approval_store.pending_approval_for(session, incident_id=parent.id)
    assert (parent.runbook, parent.target_kind) == ("node-storm", "storm")
    assert parent.title == "IBLinkDegraded storm: 8 targets across the fleet"
    assert {a.labels["instance"] for a in attached} == set(MEMBERS)
    assert run.inputs["nodes"].split(",") == MEMBERS
    assert parent.layer == "fabric"
    assert parent.culprits == ["leaf-01"]
    assert pending is not None
    proposed = {p["action"] for p in pending.payload["proposals"]}
    assert proposed == {"open_ticket"}
    assert all(bot.rt.fleet.cordon_calls[node] == 0 for node in MEMBERS)
