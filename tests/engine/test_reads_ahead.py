"""Reads started ahead of their run's graph (bot/engine/reads_ahead.py).

Covers: a stage whose first reads were started ahead waits for those and never sends them
again, runs its decisions itself, and takes them once (a retry reads again); reads started from
other inputs are not used; at most `KEPT` runs' reads wait. Through `serve`'s triage workers
with telemetry that answers in parallel: every read of a triage is sent once, the stage took
the reads started ahead, and none are left, on the simulated fleet and through Debian's
Prometheus (where the wiring turns reads ahead on); a triage this worker cannot claim (another holds
its row) has its reads dropped; with in-process telemetry nothing starts ahead.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from engine.test_stages import member, runtime, saved_checkpoint
from engine.test_work_dispatching import receive, received, triage_workers
from servers.world import runbook_signals, start_world

from bot.config import PrometheusSettings, Settings
from bot.engine import reads_ahead
from bot.engine.reads_ahead import ReadsAhead
from bot.engine.schema import StepKind
from bot.engine.stages import make_stage_node
from bot.engine.working import RecordedTriage
from bot.wiring.runtime import Runtime, open_runtime
from integrations.prometheus import PrometheusTelemetry
from integrations.signals import load_signal_catalog
from runbooks import SIGNALS_FILE
from simulator import Fleet, load_scenario
from storage import runs as run_store
from storage import work as work_store
from storage.db import session_scope

STATE = {"run_id": "r1", "inputs": {"node": "gpu-node-03"}, "target": "gpu-node-03", "steps": {}}


def done(output: dict[str, Any]) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(output)
    return future


def test_a_stage_waits_for_its_reads_started_ahead_and_decides_itself() -> None:
    sent: list[str] = []

    def read(step_id: str) -> Any:
        def fn(_state: Any, _runtime: Any) -> dict[str, Any]:
            sent.append(step_id)
            return {"steps": {step_id: {"sent": "by the stage"}}}

        return fn

    def check(state: Any, _runtime: Any) -> dict[str, Any]:
        return {"steps": {"b": {"saw": state["steps"]["a"]["sent"]}}}

    node = make_stage_node("stage-1-2", [[member(StepKind.SIGNAL, "a", read("a")),
                             member(StepKind.CLUSTER, "c", read("c"))],
                            [member(StepKind.CHECK, "b", check)]])  # fmt: skip
    ahead = ReadsAhead()
    futures = {0: done({"steps": {"a": {"sent": "ahead"}}}),
               1: done({"steps": {"c": {"sent": "ahead"}}})}  # fmt: skip
    ahead.put("r1", "stage-1-2", STATE, futures)
    out = node(STATE, runtime(ahead=ahead))["steps"]
    assert out == {"a": {"sent": "ahead"}, "c": {"sent": "ahead"}, "b": {"saw": "ahead"}}
    assert sent == [] and len(ahead) == 0  # nothing sent again; taken once
    again = node(STATE, runtime(ahead=ahead))["steps"]  # a retry of the stage reads itself
    assert again["b"] == {"saw": "by the stage"} and sorted(sent) == ["a", "c"]


def test_reads_started_from_other_inputs_or_for_another_node_are_not_used() -> None:
    ahead = ReadsAhead()
    ahead.put("r1", "stage-1-3", STATE, {0: done({})})
    assert ahead.take("r1", "stage-2-4", STATE) is None  # another node: kept
    other = {**STATE, "inputs": {"node": "gpu-node-04"}}
    assert ahead.take("r1", "stage-1-3", other) is None  # taken, and not used
    assert len(ahead) == 0
    ahead.put("r2", "stage-1-3", STATE, {0: done({})})
    ahead.drop("r2")
    assert ahead.take("r2", "stage-1-3", STATE) is None


def test_at_most_kept_runs_reads_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reads_ahead, "KEPT", 3)
    ahead = ReadsAhead()
    for index in range(5):
        ahead.put(f"r{index}", "stage-1-3", STATE, {})
    assert len(ahead) == 3
    assert ahead.take("r0", "stage-1-3", STATE) is None  # the oldest went first
    assert ahead.take("r4", "stage-1-3", STATE) == {}


@pytest.fixture
def rt(settings: Settings, scenario_dir: Path) -> Iterator[Runtime]:
    """The simulated fleet's runtime, its reads scheduled as a backend across the network's
    would be (`parallel_reads`): what starts reads ahead is the scheduling, not the backend."""
    scenario = scenario_dir / "ecc-dbe-storm.yaml"
    with open_runtime(settings, scenario_path=scenario, fresh=True) as runtime:
        runtime.deps = runtime.engine.deps = replace(runtime.deps, parallel_reads=True)
        yield runtime


class Counted:
    """The telemetry's reads, counted by signal, and the stage's takes of reads ahead."""

    def __init__(self, rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: dict[str, int] = {}
        self.taken: list[bool] = []
        lock, telemetry = threading.Lock(), rt.deps.telemetry
        read, take = telemetry.read, rt.deps.reads_ahead.take

        def counted(query: Any) -> Any:
            with lock:
                self.sent[query.signal] = self.sent.get(query.signal, 0) + 1
            return read(query)

        def took(*args: Any) -> Any:
            futures = take(*args)
            self.taken.append(futures is not None)
            return futures

        monkeypatch.setattr(telemetry, "read", counted)
        monkeypatch.setattr(rt.deps.reads_ahead, "take", took)


def test_a_triage_sends_each_read_once_and_its_stage_takes_the_reads_started_ahead(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Counted(rt, monkeypatch)
    workers = triage_workers(rt, workers=1)
    try:
        assert workers.submit_run(received(rt, workers))  # as `POST /alerts` does
        assert workers.wait_idle(60)
    finally:
        workers.shutdown()
    loaded = rt.catalog.get("ecc-storm")
    first = {s.signal for s in loaded.runbook.steps if s.signal and not loaded.deps[s.id]}
    assert first and first <= set(counted.sent)
    assert all(counted.sent[signal] == 1 for signal in first), counted.sent
    assert counted.taken.count(True) == 1  # the fused stage's one take
    assert len(rt.deps.reads_ahead) == 0


def test_through_a_real_prometheus_the_stage_takes_the_reads_started_ahead(
    settings: Settings, scenario_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wiring starts reads ahead for Prometheus (`parallel_reads`); the triage reads each
    first-level signal once from Debian's Prometheus scraping the fleet, and still finds the
    fault."""
    scenario = scenario_dir / "ecc-dbe-storm.yaml"
    fleet = Fleet.from_scenario(load_scenario(scenario), now=lambda: datetime.now(UTC))
    catalog = load_signal_catalog(SIGNALS_FILE)
    (tmp_path / "prom").mkdir()
    world = start_world(
        tmp_path / "prom", {"ecc": fleet}, catalog=catalog, signals=runbook_signals(["ecc-storm"])
    )
    try:
        real = settings.model_copy(update={
            "telemetry": "prometheus",
            "prometheus": PrometheusSettings(
                url=world.prometheus.url, match={"fleet": "ecc"}, retries=0
            ),
        })  # fmt: skip
        with open_runtime(real, scenario_path=scenario, fresh=True) as rt:
            assert isinstance(rt.deps.telemetry, PrometheusTelemetry) and rt.deps.parallel_reads
            counted = Counted(rt, monkeypatch)
            workers = triage_workers(rt, workers=1)
            try:
                got = received(rt, workers)
                assert workers.submit_run(got)  # as `POST /alerts` does
                assert workers.wait_idle(60)
            finally:
                workers.shutdown()
            assert got.incident_id is not None
            with session_scope(rt.db) as session:
                run = run_store.latest_run_for_incident(session, got.incident_id)
            assert run is not None and run.status == "awaiting_approval", run
            steps = saved_checkpoint(rt, run.id)["channel_values"]["steps"]
            assert steps["where"]["layer"] == "gpu_hardware", steps["where"]
            assert len(rt.deps.reads_ahead) == 0
    finally:
        world.close()
    loaded = rt.catalog.get("ecc-storm")
    first = {s.signal for s in loaded.runbook.steps if s.signal and not loaded.deps[s.id]}
    assert all(counted.sent.get(signal) == 1 for signal in first), counted.sent
    assert counted.taken.count(True) == 1


def test_a_triage_another_worker_holds_has_its_reads_dropped(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Counted(rt, monkeypatch)
    workers = triage_workers(rt, workers=1)
    try:
        incident_id = receive(rt, workers)  # recorded; this test performs it itself
    finally:
        workers.shutdown()
    with session_scope(rt.db) as session:
        (row,) = work_store.list_work(session, incident_id=incident_id)
        held = work_store.claim_work(
            session, work_id=row.id, owner="another-replica", at=rt.engine.work.leases.now(),
            lease=rt.engine.work.leases.terms.lease,
        )  # fmt: skip
        assert held is not None and row.id is not None
    started: list[str] = []
    put = rt.deps.reads_ahead.put
    monkeypatch.setattr(
        rt.deps.reads_ahead,
        "put",
        lambda run_id, *rest: (started.append(run_id), put(run_id, *rest)),
    )
    expected = RecordedTriage(row.payload, row.run_id, incident_id)
    assert rt.engine.work.perform(row.id, expected=expected) is None
    assert started == [row.run_id]  # the reads were started ...
    assert len(rt.deps.reads_ahead) == 0  # ... and dropped: nobody will take them
    assert counted.taken == []  # no stage ran


def test_in_process_telemetry_starts_nothing_ahead(settings: Settings, scenario_dir: Path) -> None:
    with open_runtime(settings, scenario_path=scenario_dir / "ecc-dbe-storm.yaml") as rt:
        assert rt.deps.parallel_reads is False
        loaded = rt.catalog.get("ecc-storm")
        assert not rt.engine.read_ahead(loaded, {"node": "gpu-node-03"}, 1, "alertmanager", "r")
        assert len(rt.deps.reads_ahead) == 0
