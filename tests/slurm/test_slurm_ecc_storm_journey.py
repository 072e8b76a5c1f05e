"""The ECC-storm journey on real Slurm (GPU_ONCALL_CLUSTER=slurm): the session's throw-away
cluster (tests/servers/slurm.py) whose 16 node names equal the ecc-dbe-storm fleet's, with
telemetry from Debian's Prometheus scraping that fleet's exporters (tests/servers/world.py).

The journey: a training job on the faulty node and one elsewhere; the alert reaches the running
bot's `POST /alerts`; the diagnosis only reads (no drain, no comment); `gpu-oncall approve` in a
new process drains the node with the bot's reason (`gpu-oncall: INC-1: ...`, through scontrol:
22.05 has no REST node update) and requeues its job, the other job untouched; verification
passes once the load stops; the alert's resolution resolves the incident with its MTTR.

Then, with simulated telemetry and Slurm for the cluster: an NHC drain is refused with its
reason on the timeline; a person's RESUME cancels the incident's later actions; a killed slurmd
leaves the node DOWN (NOT_RESPONDING) and the diagnosis says the node is not ready.
"""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from servers.oncall import TOKEN, alert, running_bot, webhook
from servers.prometheus import poll
from servers.world import World, runbook_signals, start_world

from bot.cli import journeys
from bot.cli.terminal import Terminal
from bot.config import (
    PolicySettings,
    PrometheusSettings,
    ServerSettings,
    Settings,
    SlurmSettings,
    StorageSettings,
)
from bot.incidents.mttr import compute_figures
from bot.wiring.runtime import Runtime, open_runtime
from integrations.signals import load_signal_catalog
from runbooks import SIGNALS_FILE
from simulator import SCENARIO_DIR, Fleet, load_scenario
from storage import incidents as incident_store
from storage.db import session_scope
from tests.journeys.test_ecc_storm_on_kubernetes import (
    ALERT,
    _events,
    _pending,
    _state,
    seconds_runbook,
)
from tests.servers.slurm import SlurmServers

SCENARIO = SCENARIO_DIR / "ecc-dbe-storm.yaml"
NODE = "gpu-node-03"


def slurm_settings(slurm: SlurmServers) -> SlurmSettings:
    return SlurmSettings(
        url=slurm.rest_url, token=SecretStr(slurm.token()), conf=slurm.conf, retries=0
    )


def slurm_env(slurm: SlurmServers) -> dict[str, str]:
    """What a CLI process needs to reach this cluster (SLURM_JWT is not among them)."""
    return slurm.env | {
        "GPU_ONCALL_CLUSTER": "slurm",
        "GPU_ONCALL_SLURM__URL": slurm.rest_url,
        "GPU_ONCALL_SLURM__TOKEN": slurm.token(),
        "GPU_ONCALL_SLURM__CONF": str(slurm.conf),
        "GPU_ONCALL_SLURM__RETRIES": "0",
    }


def reason(slurm: SlurmServers, node: str = NODE) -> str:
    return slurm.run("sinfo", "-h", "-R", "-n", node, "-o", "%E").strip()


@dataclass
class Stack:
    fleet: Fleet
    world: World
    settings: Settings
    env: dict[str, str]


@pytest.fixture
def stack(tmp_path: Path, slurm: SlurmServers) -> Iterator[Stack]:
    catalog = load_signal_catalog(SIGNALS_FILE)
    fleet = Fleet.from_scenario(load_scenario(SCENARIO), now=lambda: datetime.now(UTC))
    (tmp_path / "prom").mkdir()
    world = start_world(
        tmp_path / "prom", {"ecc": fleet}, catalog=catalog, signals=runbook_signals(["ecc-storm"])
    )
    books = seconds_runbook(tmp_path / "operator-runbooks")
    try:
        settings = Settings(
            storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
            server=ServerSettings(token=SecretStr(TOKEN), workers=2),
            cluster="slurm",
            telemetry="prometheus",
            prometheus=PrometheusSettings(url=world.prometheus.url, match={"fleet": "ecc"},
                                          retries=0),
            slurm=slurm_settings(slurm),
            runbook_dirs=[books],
            # the approved drain runs at once: on wall-clock time the wait for the job's
            # checkpoint is a durable row (its own tests: tests/actions/test_drain_after_...)
            policy=PolicySettings(drain_checkpoint_deadline_minutes=0),
        )
        env = slurm_env(slurm) | {
            "GPU_ONCALL_STORAGE__URL": settings.storage.url,
            "GPU_ONCALL_IDENTITY__CLI_USER": "alice",
            "GPU_ONCALL_TELEMETRY": "prometheus",
            "GPU_ONCALL_PROMETHEUS__URL": world.prometheus.url,
            "GPU_ONCALL_PROMETHEUS__MATCH": '{"fleet": "ecc"}',
            "GPU_ONCALL_PROMETHEUS__RETRIES": "0",
            "GPU_ONCALL_RUNBOOK_DIRS": f'["{books}"]',
            "GPU_ONCALL_POLICY__DRAIN_CHECKPOINT_DEADLINE_MINUTES": "0",
        }
        yield Stack(fleet, world, settings, env)
    finally:
        world.close()


def test_ecc_storm_alert_to_drain_and_requeue_on_slurm(
    stack: Stack, slurm: SlurmServers, tmp_path: Path
) -> None:
    victim = slurm.submit(node=NODE, name="llm-pretrain", gpus=8)
    bystander = slurm.submit(node="gpu-node-05", name="llm-pretrain-b", gpus=8)
    with running_bot(stack.settings) as bot:
        assert bot.rt.fleet is None
        starts = datetime.now(UTC) - timedelta(minutes=5)
        firing = alert(ALERT, {"Hostname": NODE}, starts_at=starts)
        assert bot.post_alerts(webhook([firing])).status_code == 200
        bot.settle()
        found = _pending(bot.rt)
        assert found is not None, "the alert did not reach an approval"
        incident, _ = found
        assert incident.layer == "gpu_hardware" and incident.culprits == (NODE,)
        assert slurm.node_state(NODE) == "mixed" and reason(slurm) == ""  # reads only

        approve = subprocess.Popen(
            [sys.executable, "-m", "bot.cli.main", "approve", incident.ref, "--as", "cli:alice"],
            cwd=tmp_path, env=stack.env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            poll(
                lambda: approve.poll() is not None or slurm.job_state(victim) != "RUNNING",
                what="the drain to requeue the node's job", seconds=60,
            )  # fmt: skip
            stack.fleet.drain(NODE, grace=timedelta(seconds=30))  # the load stops on the node
            out, err = approve.communicate(timeout=120)
        finally:
            if approve.poll() is None:
                approve.kill()
                approve.communicate()
        assert approve.returncode == 0, err

        assert reason(slurm).startswith(f"gpu-oncall: {incident.ref}: ")
        assert "drain" in slurm.node_state(NODE)
        poll(lambda: slurm.job_state(victim) == "PENDING", what=f"job {victim} requeued")
        assert slurm.job_state(bystander) == "RUNNING"

        events = _events(bot.rt, incident.id)
        details = [e.summary for e in events if e.kind == "action_succeeded"]
        assert any(f"{NODE} cordoned" in d for d in details)
        assert any(f"{NODE} drained: 1 job(s) requeued" in d for d in details), details
        verified = [e.kind for e in events if e.kind.startswith("verification")]
        assert verified == ["verification_passed"]

        ended = alert(ALERT, {"Hostname": NODE}, starts_at=starts, status="resolved",
                      ends_at=datetime.now(UTC))  # fmt: skip
        assert bot.post_alerts(webhook([ended])).status_code == 200
        poll(lambda: _state(bot.rt, incident.id) == "resolved", what="the incident resolved")
        with session_scope(bot.rt.db) as session:
            row = incident_store.get_incident(session, incident.id)
            assert row is not None
            figures = compute_figures(
                fired_at=row.fired_at, detected_at=row.detected_at,
                acknowledged_at=row.acknowledged_at, diagnosed_at=row.diagnosed_at,
                mitigated_at=row.mitigated_at, resolved_at=row.resolved_at,
            )  # fmt: skip
        assert figures.mttr is not None and figures.mttm is not None
        assert figures.mttm <= figures.mttr


# --- coexistence and node health, with simulated telemetry and Slurm for the cluster -------


@pytest.fixture
def slurm_runtime(tmp_path: Path, slurm: SlurmServers) -> Iterator[Runtime]:
    settings = Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        cluster="slurm",
        telemetry="sim",
        slurm=slurm_settings(slurm),
    )
    with open_runtime(settings, scenario_path=SCENARIO, fresh=True) as rt:
        yield rt


def _remediate(rt: Runtime, node: str = NODE) -> dict[str, Any]:
    """alice runs ecc-storm on the node, bob approves: the execute step's results by action."""
    started = journeys.command_journey(
        rt, Terminal(io.StringIO()), loaded=rt.catalog.get("ecc-storm"), inputs={"node": node},
        yes=False, user="cli:alice", interactive=False,
    )  # fmt: skip
    assert started.status == "awaiting_approval"
    outcome = rt.engine.resume(started.run_id, decision="approve", actor="cli:bob")
    return {r["action"]: r for r in outcome.steps["execute"]["results"]}


def test_an_nhc_drain_is_refused_with_its_reason_on_the_timeline(
    slurm_runtime: Runtime, slurm: SlurmServers
) -> None:
    job = slurm.submit(node=NODE, name="llm-pretrain", gpus=8)
    nhc = "NHC: check_hw_gpu: GPU 5 uncorrectable ECC"
    slurm.drain(NODE, nhc)
    results = _remediate(slurm_runtime)
    assert results["cordon"]["outcome"] == results["drain"]["outcome"] == "refused"
    assert nhc in results["drain"]["detail"]
    assert reason(slurm) == nhc and slurm.job_state(job) == "RUNNING"
    timeline = [e.summary for e in _events(slurm_runtime, 1)]
    assert any("cordoned by someone else" in s and nhc in s for s in timeline), timeline


def test_a_human_resume_cancels_the_incidents_later_actions(
    slurm_runtime: Runtime, slurm: SlurmServers
) -> None:
    first = _remediate(slurm_runtime)
    assert first["cordon"]["outcome"] == "changed"
    slurm.resume(NODE)  # a person's `scontrol update nodename=... state=resume`
    job = slurm.submit(node=NODE, name="llm-pretrain", gpus=8)
    again = _remediate(slurm_runtime)
    assert again["cordon"]["outcome"] == again["drain"]["outcome"] == "cancelled"
    assert "uncordoned by someone else after INC-1" in again["drain"]["detail"]
    assert "drain" not in slurm.node_state(NODE) and slurm.job_state(job) == "RUNNING"


def test_a_killed_slurmd_shows_the_node_down_and_the_verdict_says_so(
    slurm_runtime: Runtime, slurm: SlurmServers
) -> None:
    node = "gpu-node-09"
    slurm.kill_slurmd(node)
    poll(lambda: slurm.node_state(node).startswith("down"), what=f"{node} DOWN", seconds=120)
    outcome = journeys.command_journey(
        slurm_runtime, Terminal(io.StringIO()), loaded=slurm_runtime.catalog.get("node-diagnose"),
        inputs={"node": node}, yes=False, user="cli:alice", interactive=False,
    )  # fmt: skip
    findings = [f["summary"] for f in outcome.verdict.get("findings", [])]
    assert any(f"{node} is NotReady (Ready=Unknown)" in f for f in findings), findings
