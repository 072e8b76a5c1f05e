"""Silences against a real Alertmanager (Debian's prometheus-alertmanager on 127.0.0.1).

Covers the adapter: a created silence is active in Alertmanager with our matchers, author,
comment and end time; creating the same silence again returns the same id as ALREADY_DONE;
expiring ends it (state expired), expiring again is ALREADY_DONE; an unknown id is
SilenceNotFound; an Alertmanager that is down raises AlertmanagerError naming its URL, never an
httpx error. And the `silence` action end to end: a runbook proposes it, the policy
auto-approves low risk, the act step silences the node's alerts (one silence per node label) and
records it on the timeline; when the node's alert resolves, the bot expires its silences.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr
from servers.alertmanager import AlertmanagerServer
from servers.oncall import TOKEN, alert, running_bot, webhook
from servers.prometheus import poll

from bot.config import (
    AlertmanagerSettings,
    PolicySettings,
    ServerSettings,
    Settings,
    StorageSettings,
)
from integrations.alertmanager import (
    AlertmanagerError,
    AlertmanagerSilences,
    Matcher,
    SilenceNotFound,
)
from integrations.cluster import Outcome
from storage import incidents as incident_store
from storage.db import session_scope

QUIET_RUNBOOK = """\
apiVersion: gpu-oncall/v1
kind: Runbook
metadata: {name: quiet-node, title: Silence a noisy node}
triggers:
  alerts: [{alertname: NodeNoisy, target_label: Hostname}]
inputs:
  node: {type: node, required: true}
  window: {type: duration, default: 15m}
steps:
  - {id: temp, title: GPU temperature, signal: gpu.temperature}
  - id: noisy
    check: "temp.max > 0.0"
    layer: node_software
    finding: "{{ node }} is noisy"
  - {id: where, localize: {}}
  - id: fix
    propose:
      - {action: silence, params: {duration: 30m}, reason: Quiet the node while it is worked on}
  - {id: approval, approve: {}}
  - {id: execute, act: {}}
"""


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[AlertmanagerServer]:
    # Nothing listens on the webhook URL: these tests never send notifications.
    server = AlertmanagerServer(tmp_path, webhook_url="http://127.0.0.1:9/alerts").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def silences(alertmanager: AlertmanagerServer) -> Iterator[AlertmanagerSilences]:
    with httpx.Client(timeout=5.0) as client:
        yield AlertmanagerSilences(
            alertmanager.url,
            client=client,
            now=lambda: datetime.now(UTC),
            node_labels=("Hostname", "instance", "node"),
        )


def node_matchers(node: str) -> list[Matcher]:
    return [Matcher("Hostname", node), Matcher("alertname", "GPUEccStorm")]


def test_created_silence_is_active_in_alertmanager(
    silences: AlertmanagerSilences, alertmanager: AlertmanagerServer
) -> None:
    silence_id, outcome = silences.create(
        matchers=node_matchers("gpu-node-03"),
        duration=timedelta(hours=2),
        created_by="gpu-oncall",
        comment="INC-7: gpu-node-03 is being remediated",
    )
    assert outcome is Outcome.CHANGED
    (stored,) = alertmanager.silences()
    assert stored["id"] == silence_id
    assert stored["status"]["state"] == "active"
    assert stored["createdBy"] == "gpu-oncall"
    assert stored["comment"] == "INC-7: gpu-node-03 is being remediated"
    assert sorted((m["name"], m["value"], m["isRegex"]) for m in stored["matchers"]) == [
        ("Hostname", "gpu-node-03", False),
        ("alertname", "GPUEccStorm", False),
    ]
    ends = datetime.fromisoformat(stored["endsAt"].replace("Z", "+00:00"))
    assert timedelta(minutes=119) < ends - datetime.now(UTC) <= timedelta(hours=2)


def test_same_silence_twice_is_already_done_with_the_same_id(
    silences: AlertmanagerSilences, alertmanager: AlertmanagerServer
) -> None:
    kwargs = {"duration": timedelta(hours=1), "created_by": "gpu-oncall", "comment": "x"}
    first, _ = silences.create(matchers=node_matchers("gpu-node-03"), **kwargs)  # type: ignore[arg-type]
    again, outcome = silences.create(matchers=node_matchers("gpu-node-03"), **kwargs)  # type: ignore[arg-type]
    assert (again, outcome) == (first, Outcome.ALREADY_DONE)
    assert len(alertmanager.silences()) == 1


def test_expire_ends_the_silence_and_is_idempotent(
    silences: AlertmanagerSilences, alertmanager: AlertmanagerServer
) -> None:
    silence_id, _ = silences.create(
        matchers=node_matchers("gpu-node-04"),
        duration=timedelta(hours=1),
        created_by="gpu-oncall",
        comment="x",
    )
    assert silences.expire(silence_id) is Outcome.CHANGED
    assert [s["status"]["state"] for s in alertmanager.silences()] == ["expired"]
    assert silences.expire(silence_id) is Outcome.ALREADY_DONE


def test_unknown_silence_is_not_found(silences: AlertmanagerSilences) -> None:
    with pytest.raises(SilenceNotFound):
        silences.expire(str(uuid.uuid4()))


def test_alertmanager_down_raises_alertmanager_error(
    silences: AlertmanagerSilences, alertmanager: AlertmanagerServer
) -> None:
    alertmanager.stop()
    with pytest.raises(AlertmanagerError) as raised:
        silences.create(
            matchers=node_matchers("gpu-node-03"),
            duration=timedelta(hours=1),
            created_by="gpu-oncall",
            comment="x",
        )
    assert alertmanager.url in str(raised.value)
    assert isinstance(raised.value.__cause__, httpx.HTTPError)


def test_silence_action_silences_the_node_and_resolution_expires_it(
    tmp_path: Path, alertmanager: AlertmanagerServer, scenario_dir: Path
) -> None:
    books = tmp_path / "runbooks"
    books.mkdir()
    (books / "quiet-node.yaml").write_text(QUIET_RUNBOOK)
    settings = Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        server=ServerSettings(token=SecretStr(TOKEN)),
        alertmanager=AlertmanagerSettings(url=alertmanager.url),
        policy=PolicySettings(auto_approve_risks=["low"]),
        runbook_dirs=[books],
    )
    with running_bot(settings, scenario=scenario_dir / "ecc-dbe-storm.yaml") as bot:
        starts = bot.rt.fleet.t0 - timedelta(minutes=1)
        noisy = alert("NodeNoisy", {"Hostname": "gpu-node-03"}, starts_at=starts)
        assert bot.post_alerts(webhook([noisy])).status_code == 200
        bot.settle()
        active = alertmanager.silences()
        assert sorted(m["name"] for s in active for m in s["matchers"]) == [
            "Hostname",
            "instance",
            "node",
        ]
        assert {m["value"] for s in active for m in s["matchers"]} == {"gpu-node-03"}
        assert {s["status"]["state"] for s in active} == {"active"}
        with session_scope(bot.rt.db) as session:
            events = incident_store.list_events(session, 1)
            incident = incident_store.get_incident(session, 1)
        (acted,) = [e for e in events if e.kind == "action_succeeded"]
        assert acted.summary == "gpu-node-03: alerts silenced for 30m"
        assert sorted(acted.payload["data"]["silence_ids"]) == sorted(s["id"] for s in active)
        assert incident is not None and incident.state == "monitoring"

        resolved = dict(noisy, status="resolved", endsAt=bot.rt.clock.now().isoformat())
        assert bot.post_alerts(webhook([resolved])).status_code == 200
        poll(
            lambda: {s["status"]["state"] for s in alertmanager.silences()} == {"expired"},
            what="the bot to expire its silences",
        )
        bot.settle()
        with session_scope(bot.rt.db) as session:
            notes = [e.summary for e in incident_store.list_events(session, 1) if e.kind == "note"]
        assert sum("expired (changed)" in n for n in notes) == 3
