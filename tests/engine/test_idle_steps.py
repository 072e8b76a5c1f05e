"""Remediation steps that did nothing wait for the run's end (bot/engine/idle_steps.py): their
records are written with the run's finish in one transaction, and their checkpoints wait in the
saver for the run's last one.

Covers: which outputs did nothing, by step kind, and the saver's rule over a task's writes; a
run on a healthy node records every remediation step once, with the same outcomes, and its
finish, in one commit after the verdict with its work row done, and only the verdict's and the
last checkpoint reach disk; a run that proposes still checkpoints and records what it does when
it does it; and a process SIGKILLed right after the verdict (nothing of the held steps on disk)
or while it records the run's finish (their checkpoint on disk, none of their records) is taken
over by another worker, which records each step once and finishes the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.clock import FakeClock, SystemClock
from bot.config import Settings
from bot.engine.idle_steps import did_nothing, quiet_task
from bot.engine.leases import LeaseKeeper, LeaseTerms
from bot.engine.running import RunEngine
from bot.engine.schema import StepKind
from bot.wiring.runtime import Runtime, open_runtime
from storage import incidents as incident_store
from storage import runs as run_store
from storage import work as work_store
from storage.db import session_scope
from storage.tables import TimelineEvent
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
    assert not quiet("where", [("steps", {"where": {"kind": "localize", "layer": "none"}})])


@pytest.fixture
def rt(settings: Settings, scenario_dir: Path) -> Iterator[Runtime]:
    with open_runtime(
        settings, scenario_path=scenario_dir / "ecc-dbe-storm.yaml", fresh=True
    ) as runtime:
        yield runtime


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


def test_a_run_that_finds_nothing_records_its_remediation_and_finish_in_one_commit(
    rt: Runtime,
) -> None:
    loaded = rt.catalog.get("ecc-storm")
    incident_id, _ = rt.engine.open_incident(loaded, {"node": HEALTHY}, actor="alertmanager")
    after_verdict: list[int] = []
    with counting_commits(rt.db) as commits:

        def on_step(step_id: str, _output: Any) -> None:
            if step_id == "where":
                after_verdict.append(commits[0])

        outcome = rt.engine.start(
            loaded,
            inputs={"node": HEALTHY},
            incident_id=incident_id,
            requester="alertmanager",
            on_step=on_step,
        )
        total = commits[0]
    assert outcome.status == "completed" and outcome.verdict["layer"] == "none"
    # after the verdict: the remediation steps with the run's finish and its work row done
    # (one commit per remediation super-step, the finish and the work row before: five)
    assert total - after_verdict[0] == 1
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
    with session_scope(rt.db) as session:
        run = run_store.get_run(session, outcome.run_id)
        incident = incident_store.get_incident(session, incident_id)
    assert run is not None and run.status == "completed" and run.finished_at is not None
    assert incident is not None and (incident.state, incident.kind) == ("resolved", "check")
    on_disk = saved_steps(rt, outcome.run_id)
    assert on_disk[0] >= set(REMEDIATION)  # the last checkpoint has every step
    assert not any("fix" in steps for steps in on_disk[1:])  # the held ones never reached disk
    assert "where" in on_disk[1]  # the one before it is the verdict's


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
    from bot.engine.recording import Recorder
    from bot.wiring.runtime import open_runtime

    url, scenario, node, incident_id, at = sys.argv[1:6]
    settings = Settings(storage=StorageSettings(url=url))

    def die(*_args):
        os.kill(os.getpid(), signal.SIGKILL)

    def on_step(step_id, output):
        if at == "verdict" and step_id == "where":  # committed: die before anything after it
            die()

    if at == "finish":  # the held steps ran and their checkpoint is written: die recording
        Recorder.run_finished = die

    with open_runtime(settings, scenario_path=scenario) as rt:
        rt.engine.start(
            rt.catalog.get("ecc-storm"), inputs={"node": node}, incident_id=int(incident_id),
            requester="alertmanager", on_step=on_step,
        )
    """
)


@pytest.mark.parametrize("at", ["verdict", "finish"])
def test_a_worker_killed_in_the_held_steps_is_taken_over_and_the_run_finishes(
    settings: Settings, scenario_dir: Path, at: str
) -> None:
    """SIGKILL right after the verdict's commit (the held steps not run, nothing of them on
    disk) and in the run's last transaction (their checkpoint on disk, no record of them)."""
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
        recorded = [e.step_id for e in step_events(rt, incident_id)]
        assert "where" in recorded and not set(RECORDED) & set(recorded)
        newest = saved_steps(rt, run.id)[0]
        assert set(REMEDIATION) <= newest if at == "finish" else "fix" not in newest
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
