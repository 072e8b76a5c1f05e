""""Cordon now, drain after the next checkpoint" as a plan (bot/engine/deferred.py).

Covers, on ecc-dbe-storm (llm-pretrain on gpu-node-[00-07] saves a checkpoint every 20 min; at
t0 its last one is 13 min old, so the impact advises waiting) and the injectable clock:
approving the ecc-storm proposals cordons gpu-node-03 at once and drains it only after the
job's next checkpoint, the timeline saying "scheduled after the next checkpoint (deadline
HH:MM)" and then why it ran; under `serve` the wait is a durable timer row that carries the
plan and a person cancels it (`reject --only drain`, the drain never runs, a second cancel is
refused) or hurries it (`approve --only drain`); with no checkpoint by the deadline the drain is
asked for again and runs only when approved; an approver whom the policy no longer lists is
asked again; a deadline of 0 turns the plan off.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from bot.actions.policy import Policy
from bot.clock import FakeClock
from bot.config import Settings
from bot.engine.outcomes import RunOutcome
from bot.engine.state import PlanTerms
from bot.errors import RunStateError, UserInputError
from bot.wiring.runtime import Runtime, open_runtime
from storage import actions as action_store
from storage import incidents as incident_store
from storage import work as work_store
from storage.db import session_scope

NODE = "gpu-node-03"
REQUESTER, APPROVER = "cli:dave", "cli:erin"


@pytest.fixture
def storm(settings: Settings, scenario_dir: Path) -> Iterator[Runtime]:
    scenario = scenario_dir / "ecc-dbe-storm.yaml"
    with open_runtime(settings, scenario_path=scenario, fresh=True) as rt:
        yield rt


def serving(rt: Runtime) -> Runtime:
    """Timers as `serve` has them: durable rows, resumed when due, never waited on."""
    rt.engine.inline_timers = False
    rt.engine.follow_timers = False
    return rt


def with_terms(rt: Runtime, **changes: object) -> None:
    terms = dataclasses.replace(rt.deps.plan, **changes)  # type: ignore[arg-type]
    replace_deps(rt, plan=terms)


def replace_deps(rt: Runtime, **changes: object) -> None:
    deps = dataclasses.replace(rt.engine.deps, **changes)  # type: ignore[arg-type]
    rt.engine.deps = deps
    rt.engine.work.deps = deps


def ask(rt: Runtime) -> RunOutcome:
    loaded = rt.catalog.get("ecc-storm")
    incident_id, _ = rt.engine.open_incident(loaded, {"node": NODE}, actor=REQUESTER)
    outcome = rt.engine.start(
        loaded, inputs={"node": NODE}, incident_id=incident_id, requester=REQUESTER
    )
    assert outcome.approval is not None
    drains = [p for p in outcome.approval["proposals"] if p["action"] == "drain"]
    assert drains and drains[0]["impact"]["recommendation"] == "cordon and let it checkpoint"
    return outcome


def clock(rt: Runtime) -> FakeClock:
    assert isinstance(rt.clock, FakeClock)
    return rt.clock


def events(rt: Runtime, outcome: RunOutcome) -> list[str]:
    with session_scope(rt.db) as session:
        incident_id = int(outcome.incident.removeprefix("INC-"))
        return [e.summary for e in incident_store.list_events(session, incident_id)]


def actions_of(rt: Runtime, run_id: str) -> dict[str, tuple[str, datetime]]:
    with session_scope(rt.db) as session:
        rows = action_store.list_actions(session, run_id=run_id)
        return {r.action: (r.status, r.started_at) for r in rows}


def node(rt: Runtime) -> tuple[bool, int]:
    """(cordoned, running GPU pods) of the node."""
    (info,) = rt.deps.cluster.nodes([NODE])
    pods = [p for p in rt.deps.cluster.pods_on(NODE) if p.gpus and p.phase == "Running"]
    return info.unschedulable, len(pods)


def next_checkpoint(rt: Runtime) -> datetime:
    """The job saves every 20 min; its last save was 13 min before t0."""
    assert rt.fleet is not None
    return rt.fleet.t0 + timedelta(minutes=7)


def test_approval_cordons_now_and_drains_after_the_next_checkpoint(storm: Runtime) -> None:
    asked = ask(storm)
    approved_at = storm.clock.now()
    assert approved_at < next_checkpoint(storm)
    outcome = storm.engine.resume(asked.run_id, decision="approve", actor=APPROVER)
    done = actions_of(storm, asked.run_id)
    assert done["cordon"][0] == "succeeded" and done["cordon"][1] < next_checkpoint(storm)
    assert done["drain"][0] == "succeeded" and done["drain"][1] >= next_checkpoint(storm)
    [plan] = outcome.steps["execute"]["plans"]
    assert plan["ended"] == "checkpoint" and plan["waited"]
    timeline = events(storm, asked)
    scheduled = [e for e in timeline if e.startswith(f"Drain of {NODE} scheduled")]
    deadline = approved_at + timedelta(minutes=60)
    assert scheduled == [
        f"Drain of {NODE} scheduled after the next checkpoint of llm-pretrain "
        f"(deadline {deadline:%H:%M} UTC)"
    ]
    drained = [e for e in timeline if "after the next checkpoint (llm-pretrain checkpointed" in e]
    assert len(drained) == 1
    # the cordon is on the timeline before the plan's line, the drain after it
    assert timeline.index(scheduled[0]) < timeline.index(drained[0])
    assert timeline.index(f"{NODE} cordoned") < timeline.index(scheduled[0])
    assert node(storm) == (True, 0)


def test_under_serve_the_wait_is_a_durable_timer_that_a_person_cancels(storm: Runtime) -> None:
    serving(storm)
    asked = ask(storm)
    waiting = storm.engine.resume(asked.run_id, decision="approve", actor=APPROVER)
    assert waiting.status == "waiting"
    assert node(storm) == (True, 1)  # cordoned, its rank still running
    with session_scope(storm.db) as session:
        [timer] = work_store.open_work_for_run(session, asked.run_id)
        assert timer.kind == "timer" and timer.payload["plan"][0]["node"] == NODE
    with pytest.raises(UserInputError, match="--only cordon: the run waits only for its drain"):
        storm.engine.resume(asked.run_id, decision="reject", actor=APPROVER, only=["cordon"])
    ended = storm.engine.resume(
        asked.run_id, decision="reject", actor=APPROVER, reason="owners asked", only=["drain"]
    )
    assert ended.status != "awaiting_approval"  # on to verifying what the cordon did
    with session_scope(storm.db) as session:
        assert not [w for w in work_store.open_work_for_run(session, asked.run_id)
                    if w.payload.get("plan")]  # fmt: skip
    clock(storm).advance(timedelta(minutes=30))  # past the checkpoint: nothing left to drain it
    for work_id in storm.engine.work.due_work():
        storm.engine.work.perform(work_id)
    assert node(storm) == (True, 1)
    assert actions_of(storm, asked.run_id)["drain"][0] == "skipped"
    timeline = events(storm, asked)
    assert f"Drain of {NODE} after the next checkpoint cancelled by {APPROVER}: owners asked" in (
        timeline
    )
    with pytest.raises(RunStateError):
        storm.engine.resume(asked.run_id, decision="reject", actor=APPROVER)


def test_the_timer_row_drains_once_the_checkpoint_is_due(storm: Runtime) -> None:
    serving(storm)
    asked = ask(storm)
    storm.engine.resume(asked.run_id, decision="approve", actor=APPROVER)
    polls = 0
    while node(storm)[1] and polls < 20:  # each due poll is one claimed timer row
        clock(storm).advance(storm.deps.plan.poll)
        for work_id in storm.engine.work.due_work():
            storm.engine.work.perform(work_id)
        polls += 1
    assert node(storm) == (True, 0)
    assert 5 <= polls <= 9  # ~7 min to the checkpoint at one poll a minute
    assert actions_of(storm, asked.run_id)["drain"][1] >= next_checkpoint(storm)


def test_approve_only_drain_while_it_waits_drains_at_once(storm: Runtime) -> None:
    serving(storm)
    asked = ask(storm)
    storm.engine.resume(asked.run_id, decision="approve", actor=APPROVER)
    before = storm.clock.now()
    storm.engine.resume(asked.run_id, decision="approve", actor=APPROVER, only=["drain"])
    status, at = actions_of(storm, asked.run_id)["drain"]
    assert status == "succeeded" and at < next_checkpoint(storm) and at >= before
    assert any("before the checkpoint (drain now approved by cli:erin)" in e
               for e in events(storm, asked))  # fmt: skip


def test_no_checkpoint_by_the_deadline_asks_again(storm: Runtime) -> None:
    with_terms(storm, deadline=timedelta(minutes=3))
    asked = ask(storm)
    again = storm.engine.resume(asked.run_id, decision="approve", actor=APPROVER)
    assert again.status == "awaiting_approval" and again.approval is not None
    assert [p["action"] for p in again.approval["proposals"]] == ["drain"]
    assert again.approval["why"].startswith("the drain waited for the next checkpoint: no "
                                            "checkpoint by the deadline")  # fmt: skip
    assert node(storm) == (True, 1)
    storm.engine.resume(asked.run_id, decision="approve", actor=APPROVER)
    assert node(storm) == (True, 0)
    status, at = actions_of(storm, asked.run_id)["drain"]
    assert status == "succeeded" and at < next_checkpoint(storm)


def test_at_the_deadline_the_drain_setting_drains_without_asking(storm: Runtime) -> None:
    with_terms(storm, deadline=timedelta(minutes=3), at_deadline="drain")
    asked = ask(storm)
    outcome = storm.engine.resume(asked.run_id, decision="approve", actor=APPROVER)
    assert outcome.steps["execute"]["plans"][0]["ended"] == "deadline"
    assert node(storm) == (True, 0)


def test_an_approver_the_policy_no_longer_lists_is_asked_again(storm: Runtime) -> None:
    serving(storm)
    asked = ask(storm)
    storm.engine.resume(asked.run_id, decision="approve", actor=APPROVER)
    policy: Policy = dataclasses.replace(storm.deps.policy, approvers=frozenset({"cli:frank"}))
    replace_deps(storm, policy=policy)
    clock(storm).advance(timedelta(minutes=10))  # past the checkpoint
    [outcome] = [storm.engine.work.perform(w) for w in storm.engine.work.due_work()]
    assert outcome is not None and outcome.status == "awaiting_approval"
    assert outcome.approval is not None and "cli:erin may no longer approve it" in (
        outcome.approval["why"]
    )
    assert node(storm) == (True, 1)


def test_a_deadline_of_zero_turns_the_plan_off(storm: Runtime) -> None:
    with_terms(storm, deadline=timedelta(0))
    asked = ask(storm)
    outcome = storm.engine.resume(asked.run_id, decision="approve", actor=APPROVER)
    assert "plans" not in outcome.steps["execute"]
    assert actions_of(storm, asked.run_id)["drain"][1] < next_checkpoint(storm)


def test_plan_terms_come_from_the_settings(settings: Settings, scenario_dir: Path) -> None:
    tuned = settings.model_copy(
        update={
            "policy": settings.policy.model_copy(
                update={
                    "drain_checkpoint_deadline_minutes": 45.0,
                    "drain_checkpoint_poll_seconds": 30.0,
                    "drain_at_deadline": "drain",
                }
            )
        }
    )
    with open_runtime(tuned, scenario_path=scenario_dir / "ecc-dbe-storm.yaml", fresh=True) as rt:
        assert rt.deps.plan == PlanTerms(
            deadline=timedelta(minutes=45), poll=timedelta(seconds=30), at_deadline="drain"
        )
