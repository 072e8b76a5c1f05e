"""Journey 2 through the real servers: a fault in the simulated fleet -> deploy/'s rules fire in a
real Prometheus -> a real Alertmanager posts to the running bot -> the incident is diagnosed,
remediated after approval, and resolved with its MTTR once the alert resolves.

The bot serves the fleet's exporters at /sim/metrics; Prometheus (Debian's, 127.0.0.1) scrapes
them every second and evaluates a test copy of deploy/prometheus/gpu-oncall-rules.yaml with
windows cut from minutes to seconds; Alertmanager (Debian's) groups with 1 s waits and sends to
POST /alerts with the bearer token. Every wait is bounded polling.

Covers: GPUEccStorm fires for gpu-node-03 and reaches the bot as one incident for (ecc-storm,
gpu-node-03), localized to gpu_hardware with the node as culprit, waiting for approval with
cordon, drain and an RMA ticket proposed and nothing done yet; after approval the node is
cordoned and drained once and verification passes; the drained node stops reporting the fault,
Prometheus resolves the alert, Alertmanager sends the resolution and the incident resolves with
every MTTR timestamp; Prometheus received alerts for nothing but the faulty GPU's node.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr
from servers.alertmanager import AlertingPrometheus, alerting_stack
from servers.oncall import TOKEN, Bot, running_bot
from servers.prometheus import free_port, poll

from bot.config import (
    AlertmanagerSettings,
    PolicySettings,
    ServerSettings,
    Settings,
    StorageSettings,
)
from bot.incidents.views import incident_view
from storage import approvals as approval_store
from storage import incidents as incident_store
from storage.db import session_scope

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "gpu-oncall-rules.yaml"
DEADLINE = 40.0


@pytest.fixture
def stack(tmp_path: Path, scenario_dir: Path) -> Iterator[tuple[Bot, AlertingPrometheus]]:
    am_port = free_port()
    settings = Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        server=ServerSettings(token=SecretStr(TOKEN), workers=2),
        alertmanager=AlertmanagerSettings(url=f"http://127.0.0.1:{am_port}"),
        # the approved drain runs at once: the wait for a checkpoint has its own tests
        # (tests/actions/test_drain_after_checkpoint.py, tests/journeys/test_crash_drain_plan.py)
        policy=PolicySettings(drain_checkpoint_deadline_minutes=0),
    )
    with (
        running_bot(settings, scenario=scenario_dir / "ecc-dbe-storm.yaml") as bot,
        alerting_stack(bot.url, tmp_path, rules=RULES, token=TOKEN, am_port=am_port) as prometheus,
    ):
        yield bot, prometheus


def ecc_incident(bot: Bot) -> dict[str, object] | None:
    """The ecc-storm incident of gpu-node-03 with its pending approval's run, once both exist."""
    with session_scope(bot.rt.db) as session:
        incident = incident_store.find_open_incident(session, "ecc-storm:gpu-node-03")
        if incident is None or incident.id is None:
            return None
        pending = approval_store.pending_approval_for(session, incident_id=incident.id)
        if pending is None:
            return None
        return {"incident": incident_view(incident), "run_id": pending.run_id}


def test_fault_to_alert_to_diagnosis_to_remediation_to_resolution(
    stack: tuple[Bot, AlertingPrometheus],
) -> None:
    bot, prometheus = stack
    found: dict[str, object] = {}

    def triaged() -> bool:
        found.update(ecc_incident(bot) or {})
        return bool(found)

    poll(triaged, what="GPUEccStorm to reach the bot and wait for approval", seconds=DEADLINE)
    incident = found["incident"]
    assert incident.layer == "gpu_hardware"  # type: ignore[attr-defined]
    assert incident.culprits == ("gpu-node-03",)  # type: ignore[attr-defined]
    assert incident.fired_at is not None  # type: ignore[attr-defined]
    assert {a["metric"]["Hostname"] for a in prometheus.firing("GPUEccStorm")} == {"gpu-node-03"}
    assert bot.rt.fleet.cordon_calls["gpu-node-03"] == 0

    outcome = bot.rt.engine.resume(str(found["run_id"]), decision="approve", actor="cli:alice")
    assert outcome.status == "completed"
    results = {r["action"]: r["outcome"] for r in outcome.steps["execute"]["results"]}
    assert results == {"cordon": "changed", "drain": "changed", "open_ticket": "changed"}
    assert outcome.steps["confirm"]["status"] == "passed"
    assert bot.rt.fleet.drain_calls["gpu-node-03"] == 1

    incident_id = incident.id  # type: ignore[attr-defined]

    def resolved() -> bool:
        with session_scope(bot.rt.db) as session:
            row = incident_store.get_incident(session, incident_id)
            return row is not None and row.state == "resolved"

    poll(resolved, what="the alert to resolve and the incident with it", seconds=DEADLINE)
    with session_scope(bot.rt.db) as session:
        row = incident_store.get_incident(session, incident_id)
        assert row is not None
        final = incident_view(row)
        events = incident_store.list_events(session, incident_id)
    figures = final.figures()
    assert None not in (figures.mttd, figures.mtta, figures.time_to_diagnosis, figures.mttm)
    assert figures.mttr is not None and figures.mttr > figures.mttm  # type: ignore[operator]
    resolutions = [e for e in events if e.kind == "alert_resolved"]
    assert resolutions and all(e.actor == "alertmanager" for e in resolutions)
    assert events[-1].kind == "incident_resolved"
    assert bot.rt.fleet.drain_calls["gpu-node-03"] == 1
