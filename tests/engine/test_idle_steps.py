"""Steps whose records and checkpoint wait for the run's end (bot/engine/idle_steps.py): a
verdict of no fault with its reads and checks, and remediation steps that did nothing. Their
records are written with the run's finish in one transaction, with its work row done, and their
checkpoints wait in the saver for the run's last one.

Covers: which outputs did nothing, by step kind, and the saver's rule over a task's writes; a
run on a healthy node records every step once, in the order they completed, with the same
outcomes, its verdict and its finish, in one commit after the one that started it, and only
its last checkpoint reaches disk, and its outcome comes from the stream (no checkpoint read
after it); a run that finds a fault records its verdict when it is
reached and checkpoints its proposal with the approval; a busy database that rolls that last
transaction back leaves the work row to the retry, done once (these on SQLite and on a real
PostgreSQL); and a process SIGKILLed when every step has run but nothing of them is on disk,
or while it records them (its last checkpoint on disk), is taken over by another worker, which
records each step once and finishes the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.clock import FakeClock, SystemClock
from bot.config import Settings
from bot.engine.idle_steps import did_nothing, may_wait, quiet_task
from bot.engine.leases import LeaseKeeper, LeaseTerms
from bot.engine.running import RunEngine
from bot.engine.schema import StepKind
from bot.wiring.runtime import Runtime, open_runtime
from storage import incidents as incident_store
from storage import runs as run_store
from storage import work as work_store
from storage.checkpointer_savers import BufferedWrites
from storage.db import session_scope
from storage.errors import DatabaseBusyError
from storage.tables import TimelineEvent
from storage.transient import RetryPolicy
from tests.engine.conftest import ON_BOTH
from tests.engine.test_running_recording import counting_commits

ROOT = Path(__file__).resolve().parents[2]
HEALTHY = "gpu-node-05"  # ecc-dbe-storm's faulty node is gpu-node-03
REMEDIATION = ("fix", "approval", "execute", "confirm", "confirm_xid")
RECORDED = ("fix", "execute", "confirm", "confirm_xid")  # an approval not needed has no event
TERMS = LeaseTerms(lease=timedelta(seconds=60), heartbeat=timedelta(seconds=600), max_attempts=3)


@pytest.mark.parametrize(
    ("kind", "output", "idle"),
    [
        (StepKind.PROPOSE, {"proposals": [], "withheld": [{"action": "cordon"}]}, True),
        (StepKind.PROPOSE, {"proposals": [{"action": "cordon"}]}, False),
        (StepKind.APPROVE, {"decision": "not_needed", "proposals": []}, True),
        (StepKind.APPROVE, {"decision": "approved", "actor": "policy:auto"}, False),
        (StepKind.APPROVE, {"decision": "rejected", "actor": "cli:alice"}, False),
        (StepKind.ACT, {"skipped": True, "reason": "not_needed by bot", "results": []}, True),
        (StepKind.ACT, {"skipped": False, "results": [{"outcome": "changed"}]}, False),
        (StepKind.VERIFY, {"status": "skipped", "reason": "no action was carried out"}, True),
        (StepKind.VERIFY, {"status": "verified"}, False),
        (StepKind.CHECK, {"status": "ok"}, False),
        (StepKind.SIGNAL, {"max": 0.0}, False),
        (None, {"status": "skipped"}, False),
    ],
)
def test_what_did_nothing_by_step_kind(
    kind: StepKind | None, output: dict[str, Any], idle: bool
) -> None:
    assert did_nothing(kind, output) is idle


def test_a_task_is_quiet_when_it_wrote_idle_outputs_and_edges_only(rt: Runtime) -> None:
    quiet = quiet_task(rt.catalog.get("ecc-storm"))
    idle = {"approval": {"kind": "approve", "decision": "not_needed"}}
    assert quiet("approval", [("steps", idle), ("branch:to:execute", None)])
    assert quiet("stage-x", [("steps", idle), ("join:a+b:c", None)])
    asked = [("steps", {"approval": {"decision": "approved"}}), ("branch:to:execute", None)]
    assert not quiet("approval", asked)
    assert not quiet("approval", [("__interrupt__", ("ask",))])  # waits for a person
    assert not quiet("approval", [("steps", idle), ("__error__", "boom")])
    assert not quiet(None, [("steps", idle)])  # no node of the graph
    assert not quiet("approval", [("branch:to:execute", None)])  # wrote no step
    fault = {"where": {"kind": "localize", "layer": "gpu_hardware"}}
    assert not quiet("stage-1-3", [("steps", {"dbe": {"max": 3.0}, **fault})])
    no_fault = {"dbe": {"max": 0.0}, "dbe_storm": {"status": "ok"}, "where": {"layer": "none"}}
    assert quiet("stage-1-3", [("steps", no_fault), ("branch:to:fix", None)])
    assert not quiet("stage-1", [("steps", {"dbe": {"max": 0.0}})])  # reads, no verdict yet


def test_what_may_wait_for_the_run_end(rt: Runtime) -> None:
    loaded = rt.catalog.get("ecc-storm")
    no_fault = ("where", {"layer": "none"})
    proposed = ("fix", {"proposals": [{"action": "cordon"}]})
    assert may_wait(loaded, [no_fault, ("dbe", {"max": 0.0}), ("fix", {"proposals": []})])
    assert may_wait(loaded, [("approval", {"decision": "not_needed"})])
    assert not may_wait(loaded, [no_fault, proposed])
    assert not may_wait(loaded, [("where", {"layer": "gpu_hardware"})])
    assert not may_wait(loaded, [("dbe", {"max": 0.0})])  # reads wait only beside a verdict
    assert not may_wait(loaded, [])


def step_events(rt: Runtime, incident_id: int) -> list[TimelineEvent]:
    with session_scope(rt.db) as session:
        events = incident_store.list_events(session, incident_id)
    return [e for e in events if e.step_id and e.kind != "note"]


def saved_steps(rt: Runtime, run_id: str) -> list[set[str]]:
    """The steps of each checkpoint of the run on disk, newest first."""
    config: Any = {"configurable": {"thread_id": run_id, "checkpoint_ns": ""}}
    return [
        set(saved.checkpoint["channel_values"].get("steps", {}))
        for saved in rt.engine.checkpointer.list(config)
    ]


@ON_BOTH
def test_a_run_that_finds_nothing_records_its_steps_and_finish_in_one_commit(
    rt: Runtime,
) -> None:
    loaded = rt.catalog.get("ecc-storm")
    incident_id, _ = rt.engine.open_incident(loaded, {"node": HEALTHY}, actor="alertmanager")
    with counting_commits(rt.db) as commits:
        outcome = rt.engine.start(
            loaded, inputs={"node": HEALTHY}, incident_id=incident_id, requester="alertmanager"
        )
    assert outcome.status == "completed" and outcome.verdict["layer"] == "none"
    # the run and its claimed work row; then its reads, checks and verdict, its remediation
    # steps, its finish and its work row done (before: one commit per super-step, then the
    # finish, then the work row: six)
    assert commits[0] == 2
    with session_scope(rt.db) as session:
        (row,) = work_store.list_work(session, incident_id=incident_id)
    assert (row.state, row.run_id, row.lease_expires_at) == ("done", outcome.run_id, None)
    assert outcome.steps["approval"]["decision"] == "not_needed"
    assert outcome.steps["execute"]["skipped"] is True
    assert outcome.steps["confirm"]["status"] == "skipped"
    recorded = [e.step_id for e in step_events(rt, incident_id)]
    assert len(recorded) == len(set(recorded))  # every step once, remediation too
    assert set(recorded) == set(outcome.steps) - {"approval"}
    assert recorded[-len(RECORDED) :] == list(RECORDED)  # in the order they completed
    assert recorded.index("where") < recorded.index("fix")
    with session_scope(rt.db) as session:
        run = run_store.get_run(session, outcome.run_id)
        incident = incident_store.get_incident(session, incident_id)
    assert run is not None and run.status == "completed" and run.finished_at is not None
    assert incident is not None and (incident.state, incident.kind) == ("resolved", "check")
    assert incident.layer == "none" and incident.diagnosed_at is not None
    (on_disk,) = saved_steps(rt, outcome.run_id)  # the held checkpoints never reached disk
    assert on_disk == set(outcome.steps)


@ON_BOTH
def test_a_run_that_ends_reports_from_its_stream_without_reading_its_checkpoint(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The outcome's steps are the stream's last state, and a new run has no checkpoint to
    read: the graph asks once, when it starts, and the saver answers without a query (it
    queried then, and the engine once more after the end); a run continued later reads it."""
    loaded = rt.catalog.get("ecc-storm")
    incident_id, _ = rt.engine.open_incident(loaded, {"node": HEALTHY}, actor="alertmanager")
    saver = rt.engine.checkpointer
    asked: list[str] = []
    queried: list[str] = []
    get_tuple = saver.get_tuple
    base = type(saver).__mro__[type(saver).__mro__.index(BufferedWrites) + 1]
    query = base.get_tuple

    def counted(config: Any) -> Any:
        asked.append(str(config["configurable"].get("thread_id")))
        return get_tuple(config)

    def counted_query(self: Any, config: Any) -> Any:
        queried.append(str(config["configurable"].get("thread_id")))
        return query(self, config)

    monkeypatch.setattr(saver, "get_tuple", counted)
    monkeypatch.setattr(base, "get_tuple", counted_query)
    outcome = rt.engine.start(
        loaded, inputs={"node": HEALTHY}, incident_id=incident_id, requester="alertmanager"
    )
    assert outcome.status == "completed" and outcome.verdict["layer"] == "none"
    assert asked == [outcome.run_id] and queried == []
    assert set(outcome.steps) == {s.id for s in loaded.runbook.steps}
    again = rt.engine.continue_run(outcome.run_id)  # not new: its checkpoint is read
    assert again.status == "completed" and queried and set(queried) == {outcome.run_id}


@ON_BOTH
def test_a_run_that_finds_a_fault_records_its_verdict_when_it_is_reached(rt: Runtime) -> None:
    loaded = rt.catalog.get("ecc-storm")
    node = "gpu-node-03"
    incident_id, _ = rt.engine.open_incident(loaded, {"node": node}, actor="alertmanager")
    seen: list[list[str]] = []

    def on_step(step_id: str, _output: Any) -> None:
        if step_id == "where":  # the verdict is on the timeline, the proposal not yet
            seen.append([e.step_id for e in step_events(rt, incident_id)])

    waiting = rt.engine.start(
        loaded,
        inputs={"node": node},
        incident_id=incident_id,
        requester="alertmanager",
        on_step=on_step,
    )
    assert waiting.status == "awaiting_approval" and waiting.steps["fix"]["proposals"]
    assert "where" in seen[0] and "fix" not in seen[0]


@ON_BOTH
def test_a_run_that_proposes_checkpoints_its_proposal_with_the_approval(rt: Runtime) -> None:
    loaded = rt.catalog.get("ecc-storm")
    node = "gpu-node-03"
    incident_id, _ = rt.engine.open_incident(loaded, {"node": node}, actor="alertmanager")
    waiting = rt.engine.start(
        loaded, inputs={"node": node}, incident_id=incident_id, requester="alertmanager"
    )
    assert waiting.status == "awaiting_approval" and waiting.steps["fix"]["proposals"]
    on_disk = saved_steps(rt, waiting.run_id)
    assert "fix" in on_disk[0] and "where" in on_disk[1] and "fix" not in on_disk[1]
    done = rt.engine.resume(waiting.run_id, decision="approve", actor="cli:alice")
    assert done.status == "completed" and done.steps["execute"]["succeeded"] is True
    recorded = [(e.step_id, e.kind, e.summary) for e in step_events(rt, incident_id)]
    assert len(recorded) == len(set(recorded))  # nothing recorded twice
    assert {step_id.split(".")[0] for step_id, _, _ in recorded} == set(done.steps)


KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from bot.config import Settings, StorageSettings
    from bot.engine import running
    from bot.engine.recording import Recorder
    from bot.wiring.runtime import open_runtime

    url, scenario, node, incident_id, at = sys.argv[1:6]
    settings = Settings(storage=StorageSettings(url=url))

    def die(*_args):
        os.kill(os.getpid(), signal.SIGKILL)

    if at == "flush":  # every step ran, their checkpoints held: die before writing them
        running.flush_writes = die
    if at == "finish":  # the run's last checkpoint is written: die recording its steps
        Recorder.run_finished = die

    with open_runtime(settings, scenario_path=scenario) as rt:
        rt.engine.start(
            rt.catalog.get("ecc-storm"), inputs={"node": node}, incident_id=int(incident_id),
            requester="alertmanager",
        )
    """
)


@pytest.mark.parametrize("at", ["flush", "finish"])
def test_a_worker_killed_in_the_held_steps_is_taken_over_and_the_run_finishes(
    settings: Settings, scenario_dir: Path, at: str
) -> None:
    """SIGKILL when every step has run but their held checkpoints are not written (nothing of
    the run on disk but its row and its work row) and in the run's last transaction (its last
    checkpoint on disk, no record of any step)."""
    scenario = scenario_dir / "ecc-dbe-storm.yaml"
    with open_runtime(settings, scenario_path=scenario, fresh=True) as rt:
        loaded = rt.catalog.get("ecc-storm")
        incident_id, _ = rt.engine.open_incident(loaded, {"node": HEALTHY}, actor="alertmanager")
    child = subprocess.run(
        [sys.executable, "-c", KILLED, settings.storage.url, str(scenario), HEALTHY,
         str(incident_id), at],
        cwd=ROOT, env=os.environ | {"PYTHONPATH": str(ROOT)}, capture_output=True, timeout=300,
    )  # fmt: skip
    assert child.returncode == -9, child.stderr.decode()[-2000:]
    with open_runtime(settings, scenario_path=scenario) as rt:
        with session_scope(rt.db) as session:
            (run,) = run_store.list_runs_for_incident(session, incident_id)
        assert run.status == "running"
        assert step_events(rt, incident_id) == []
        on_disk = saved_steps(rt, run.id)
        assert (on_disk[0] >= {"where", *REMEDIATION}) if at == "finish" else on_disk == []
        later = FakeClock(SystemClock().now() + TERMS.lease)
        taker = RunEngine(
            deps=rt.deps,
            db=rt.db,
            checkpointer=rt.engine.checkpointer,
            catalog=rt.catalog,
            leases=LeaseKeeper(rt.db, owner="worker-b", terms=TERMS, clock=later),
        )
        (work_id,) = taker.work.due_work()
        outcome = taker.work.perform(work_id)
        assert outcome is not None and outcome.status == "completed"
        assert outcome.steps["approval"]["decision"] == "not_needed"
        recorded = [e.step_id for e in step_events(rt, incident_id)]
        assert len(recorded) == len(set(recorded))  # each step once
        assert set(recorded) == set(outcome.steps) - {"approval"}
        with session_scope(rt.db) as session:
            incident = incident_store.get_incident(session, incident_id)
            finished = run_store.get_run(session, run.id)
        assert finished is not None and finished.status == "completed"
        assert incident is not None and (incident.state, incident.kind) == ("resolved", "check")


@ON_BOTH
def test_a_finish_the_database_rolls_back_is_recorded_again_with_its_work_row(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's last transaction (its steps, verdict, finish and work row) fails once on a
    busy database: it is rolled back whole, the run retries from its checkpoint, and the work
    row ends done once, in the transaction that finally records the finish."""
    finish_work, calls = work_store.finish_work, []

    def busy_once(session: Any, **kwargs: Any) -> bool:
        calls.append(kwargs["work_id"])
        if len(calls) == 1:
            raise DatabaseBusyError("database is busy (the test's)")
        return finish_work(session, **kwargs)

    monkeypatch.setattr(work_store, "finish_work", busy_once)
    rt.engine.storage_retry = RetryPolicy((0.0,), sleep=lambda _seconds: None)
    loaded = rt.catalog.get("ecc-storm")
    incident_id, _ = rt.engine.open_incident(loaded, {"node": HEALTHY}, actor="alertmanager")
    outcome = rt.engine.start(
        loaded, inputs={"node": HEALTHY}, incident_id=incident_id, requester="alertmanager"
    )
    assert outcome.status == "completed"
    assert len(calls) == 2 and len(set(calls)) == 1  # in the finish's transaction, twice
    with session_scope(rt.db) as session:
        (row,) = work_store.list_work(session, incident_id=incident_id)
        run = run_store.get_run(session, outcome.run_id)
        incident = incident_store.get_incident(session, incident_id)
    assert row.state == "done" and run is not None and run.status == "completed"
    assert incident is not None and incident.state == "resolved"
    recorded = [e.step_id for e in step_events(rt, incident_id)]
    assert len(recorded) == len(set(recorded))  # each step once
    assert set(recorded) == set(outcome.steps) - {"approval"}
