"""`gpu-oncall serve` killed with SIGKILL in the middle of a triage's gather, with telemetry from
Debian's Prometheus scraping the ecc-dbe-storm fleet (tests/servers/world.py) behind a recording
proxy that holds every query: the kill lands while the run's first super-step waits on
Prometheus, its run `running` with only its input checkpoint. A new `serve` takes the run over
once the dead process's lease expires and continues it from that checkpoint.

Covers: the incident reaches the approval with the verdict of an uninterrupted triage (layer,
culprit node); one run, no step recorded twice; the takeover is on the timeline. The same for a
person's `gpu-oncall diagnose` killed mid-gather: its run is work the CLI claimed, so `serve`
finishes it (the CLI is a client of the run, not its owner).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from journeys.test_crash_serve import WAIT, Bot, incident_state, post_alert, wait_until
from servers.proxy import ProxyScript, RecordingProxy, running
from servers.world import start_world
from sqlmodel import select

from integrations.signals import load_signal_catalog
from simulator import SCENARIO_DIR, Fleet, load_scenario
from runbooks import SIGNALS_FILE
from storage.db import make_engine, session_scope
from storage.tables import Incident, RunbookRun, TimelineEvent

NODE = "gpu-node-03"


@dataclass
class Telemetry:
    proxy: RecordingProxy
    hold: threading.Event


@pytest.fixture
def telemetry(tmp_path: Path) -> Iterator[Telemetry]:
    catalog = load_signal_catalog(SIGNALS_FILE)
    scenario = load_scenario(SCENARIO_DIR / "ecc-dbe-storm.yaml")
    fleet = Fleet.from_scenario(scenario, now=lambda: datetime.now(UTC))
    (tmp_path / "prom").mkdir()
    world = start_world(tmp_path / "prom", {"ecc": fleet}, catalog=catalog)
    hold = threading.Event()
    proxy = RecordingProxy(world.prometheus.url, script=ProxyScript(hold=hold))
    try:
        with running(proxy):
            yield Telemetry(proxy, hold)
    finally:
        world.close()


def test_serve_killed_mid_gather_continues_the_run_from_its_checkpoint(
    tmp_path: Path, telemetry: Telemetry
) -> None:
    bot = Bot(tmp_path)
    bot.extra_env.update(
        {
            "GPU_ONCALL_TELEMETRY": "prometheus",
            "GPU_ONCALL_PROMETHEUS__URL": telemetry.proxy.url,
            "GPU_ONCALL_PROMETHEUS__MATCH": '{"fleet": "ecc"}',
            "GPU_ONCALL_PROMETHEUS__RETRIES": "0",
        }
    )
    try:
        url = bot.serve()
        post_alert(url)
        deadline = time.monotonic() + WAIT
        while not telemetry.proxy.queries() and time.monotonic() < deadline:
            time.sleep(0.05)  # the gather's queries reach the proxy, which holds them
        assert telemetry.proxy.queries(), "the triage never queried Prometheus"
        wait_until(bot, "the run has started", lambda s: bool(list(s.exec(select(RunbookRun)))))
        bot.kill_all()
        engine = make_engine(bot.db_url)
        with session_scope(engine) as session:
            (run,) = session.exec(select(RunbookRun))
            assert run.status == "running"  # killed mid-run: nobody will finish it but a takeover
        telemetry.hold.set()
        telemetry.proxy.script.hold = None
        bot.serve()
        wait_until(bot, "the run waits at its approval", incident_state("awaiting_approval"))
        with session_scope(engine) as session:
            (incident,) = session.exec(select(Incident))
            runs = list(session.exec(select(RunbookRun)))
            events = list(session.exec(select(TimelineEvent)))
        engine.dispose()
        assert (incident.layer, incident.culprits) == ("gpu_hardware", [NODE])
        assert [r.status for r in runs] == ["awaiting_approval"]
        steps = [(e.step_id, e.kind) for e in events if e.step_id and e.kind != "note"]
        assert len(steps) == len(set(steps))
        assert any("taken over" in e.summary for e in events)
    finally:
        bot.kill_all()


def test_a_diagnose_killed_mid_gather_is_finished_by_serve(
    tmp_path: Path, telemetry: Telemetry
) -> None:
    bot = Bot(tmp_path)
    bot.extra_env.update(
        {
            "GPU_ONCALL_TELEMETRY": "prometheus",
            "GPU_ONCALL_PROMETHEUS__URL": telemetry.proxy.url,
            "GPU_ONCALL_PROMETHEUS__MATCH": '{"fleet": "ecc"}',
            "GPU_ONCALL_PROMETHEUS__RETRIES": "0",
        }
    )
    try:
        bot.popen("diagnose", NODE)  # a person's run: the CLI drives it, as a claimed work row
        deadline = time.monotonic() + WAIT
        while not telemetry.proxy.queries() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert telemetry.proxy.queries(), "the diagnosis never queried Prometheus"
        bot.kill_all()
        telemetry.hold.set()
        telemetry.proxy.script.hold = None
        bot.serve()
        wait_until(bot, "the run waits at its approval", incident_state("awaiting_approval"))
        engine = make_engine(bot.db_url)
        with session_scope(engine) as session:
            (incident,) = session.exec(select(Incident))
            runs = list(session.exec(select(RunbookRun)))
            events = list(session.exec(select(TimelineEvent)))
        engine.dispose()
        assert incident.runbook == "node-diagnose" and NODE in incident.culprits
        assert [r.status for r in runs] == ["awaiting_approval"]
        assert any("taken over" in e.summary for e in events)
    finally:
        bot.kill_all()
