"""How a run's progress reaches the database: one transaction per super-step, the super-steps
of proposals, and of reads or checks followed by checks and verdicts alone, going with the
next one.

Covers: a run that stops at its approval commits once for its start, once for its gathers
with the check and the verdict that follow them, once for its evidence snapshot, once
for its proposals and the approval, and once for its work row, however many steps a
super-step holds; `on_step` is called once per step, in the order the timeline records them,
and only once the step's records are committed (its timeline event, and for the localize step
the verdict and `diagnosed_at`); the timeline keeps its order (steps, then the approval request
and the state change); the approval's checkpoint is written by the time the run reports it
waits, so a new engine on the same files resumes it, even with the first process still up (it
never closed its saver).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from bot.config import Settings
from bot.engine.loading import LoadedRunbook, parse_runbook
from bot.engine.running import RunOutcome
from bot.incidents import lifecycle
from bot.wiring.runtime import Runtime, open_runtime
from storage import incidents as incident_store
from storage import runs as run_store
from storage.db import session_scope

NODE = "gpu-node-03"
SIGNALS = [
    "gpu.ecc.dbe_rate",
    "gpu.ecc.sbe_rate",
    "gpu.row_remap.failure",
    "gpu.row_remap.pending",
    "gpu.xid.last",
    "telemetry.dcgm_up",
]


def ecc_runbook(rt: Runtime, gathers: int) -> LoadedRunbook:
    """`gathers` signal steps, one check over all of them, localize, propose, approve: five
    super-steps whatever `gathers` is."""
    names = [f"g{i}" for i in range(gathers)]
    steps: list[dict[str, Any]] = [
        {"id": name, "signal": signal} for name, signal in zip(names, SIGNALS, strict=False)
    ]
    steps += [
        {
            "id": "storm",
            "check": " || ".join(f"{name}.max > 0.0" for name in names),
            "layer": "gpu_hardware",
            "severity": "critical",
            "finding": "ECC errors on {{ node }}",
            "culprit": {"node": "{{ node }}"},
        },
        {"id": "where", "localize": {}},
        {"id": "fix", "propose": [{"action": "cordon", "reason": "stop new work landing"}]},
        {"id": "approval", "approve": {}},
    ]
    raw = {
        "apiVersion": "gpu-oncall/v1",
        "kind": "Runbook",
        "metadata": {"name": "ecc-storm"},
        "inputs": {"node": {"type": "node", "required": True}},
        "steps": steps,
    }
    return parse_runbook(
        raw,
        file="tests/ecc-storm.yaml",
        signals=rt.deps.signals.names(),
        actions=rt.deps.actions.names(),
    )


def open_incident(rt: Runtime) -> int:
    now = rt.clock.now()
    with session_scope(rt.db) as session:
        incident = lifecycle.open_incident(
            session,
            runbook="ecc-storm",
            target=NODE,
            target_kind="node",
            severity="critical",
            title=f"ECC storm on {NODE}",
            fired_at=now,
            detected_at=now,
            actor="alertmanager",
        )
        return int(incident.id or 0)


@contextmanager
def counting_commits(db: Engine) -> Iterator[list[int]]:
    count = [0]

    def on_commit(_connection: Any) -> None:
        count[0] += 1

    event.listen(db, "commit", on_commit)
    try:
        yield count
    finally:
        event.remove(db, "commit", on_commit)


@pytest.mark.parametrize("gathers", [1, 6])
def test_a_run_commits_once_per_super_step_whatever_its_step_count(
    rt: Runtime, gathers: int
) -> None:
    loaded = ecc_runbook(rt, gathers)
    incident_id = open_incident(rt)
    with counting_commits(rt.db) as commits:
        outcome = rt.engine.start(
            loaded, inputs={"node": NODE}, incident_id=incident_id, requester="alertmanager"
        )
    assert outcome.status == "awaiting_approval"
    assert len(outcome.steps) == gathers + 3
    # start (the run and its claimed work row), then one per recorded super-step: the gathers
    # (however many) with the check that alone follows them and the verdict that alone follows
    # that, the evidence snapshot of the verdict, propose with the approval (proposals are
    # recorded with the next super-step) and the work row done with it
    assert commits[0] == 4


def test_on_step_sees_each_step_committed_in_timeline_order(rt: Runtime) -> None:
    loaded = ecc_runbook(rt, 6)
    incident_id = open_incident(rt)
    seen: list[str] = []

    def on_step(step_id: str, output: Mapping[str, Any]) -> None:
        with session_scope(rt.db) as session:
            recorded = {e.step_id for e in incident_store.list_events(session, incident_id)}
            incident = incident_store.get_incident(session, incident_id)
            assert incident is not None
            if output.get("kind") == "localize":
                run = run_store.latest_run_for_incident(session, incident_id)
                assert run is not None and run.verdict == dict(output)
                assert incident.diagnosed_at is not None
                assert incident.layer == output["layer"] == "gpu_hardware"
        assert step_id in recorded
        seen.append(step_id)

    outcome = rt.engine.start(
        loaded,
        inputs={"node": NODE},
        incident_id=incident_id,
        requester="alertmanager",
        on_step=on_step,
    )
    with session_scope(rt.db) as session:
        events = incident_store.list_events(session, incident_id)
    by_step = [e.step_id for e in events if e.step_id and e.kind != "approval_requested"]
    assert seen == list(dict.fromkeys(by_step))
    assert set(seen) == set(outcome.steps)
    kinds = [e.kind for e in events]
    assert kinds[-2:] == ["approval_requested", "state_changed"]
    assert kinds.index("verdict") < kinds.index("approval_requested")
    assert sorted(seen[:6]) == [f"g{i}" for i in range(6)]  # one super-step, any order
    assert seen[6:] == ["storm", "where", "fix"]


def test_the_approval_is_checkpointed_when_the_run_says_it_waits(
    settings: Settings, scenario_dir: Path
) -> None:
    scenario = scenario_dir / "ecc-dbe-storm.yaml"
    with open_runtime(settings, scenario_path=scenario, fresh=True) as rt:
        incident_id = open_incident(rt)
        loaded = rt.catalog.get("ecc-storm")
        waiting: RunOutcome = rt.engine.start(
            loaded, inputs={"node": NODE}, incident_id=incident_id, requester="alertmanager"
        )
        assert waiting.status == "awaiting_approval"
    with open_runtime(settings, scenario_path=scenario) as rt:
        resumed = rt.engine.resume(waiting.run_id, decision="reject", actor="cli:alice")
    assert resumed.status == "rejected"
    assert resumed.steps["approval"]["decision"] == "rejected"
    assert set(waiting.steps) < set(resumed.steps)


def test_the_approval_is_on_disk_before_the_run_says_it_waits_with_the_process_still_up(
    settings: Settings, scenario_dir: Path
) -> None:
    """No close (a SIGKILLed process never closes its saver): the engine itself commits the
    interrupt's writes that the saver held, before it records the approval."""
    scenario = scenario_dir / "ecc-dbe-storm.yaml"
    with open_runtime(settings, scenario_path=scenario, fresh=True) as first:
        incident_id = open_incident(first)
        waiting = first.engine.start(
            first.catalog.get("ecc-storm"),
            inputs={"node": NODE},
            incident_id=incident_id,
            requester="alertmanager",
        )
        with open_runtime(settings, scenario_path=scenario) as second:
            saved = second.engine.checkpointer.get_tuple(
                {"configurable": {"thread_id": waiting.run_id, "checkpoint_ns": ""}}
            )
            assert saved is not None
            assert "__interrupt__" in {channel for _task, channel, _v in saved.pending_writes or []}
            resumed = second.engine.resume(waiting.run_id, decision="reject", actor="cli:alice")
    assert resumed.status == "rejected"
    assert resumed.steps["approval"]["decision"] == "rejected"
