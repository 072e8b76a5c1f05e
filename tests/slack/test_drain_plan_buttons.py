"""A drain approved to run after the job's next checkpoint waits on the Slack message with two
buttons: drain now (the approver policy checked at the click) and cancel (the drain never runs).

Over signed requests to the bot and the fake Slack Web API, with timers as `serve` has them
(durable rows, never waited on inline) and the bot's clock (no wall time). On ecc-dbe-storm
llm-pretrain checkpoints every 20 min and its last one is 13 min old, so approving the
proposals cordons gpu-node-03 and schedules its drain (bot/engine/deferred.py).
"""

from __future__ import annotations

from collections.abc import Callable

from servers.fake_slack import Call
from servers.slack_harness import BOB, CAROL, SlackHarness

from bot.engine import deferred
from storage import actions as action_store
from storage import runs as run_store
from storage.db import session_scope

NODE = "gpu-node-03"
DAVE = "U0DAVE"
Start = Callable[..., SlackHarness]


def _waiting(harness: SlackHarness, approver: str = BOB) -> str:
    harness.rt.engine.inline_timers = False
    harness.rt.engine.follow_timers = False
    ts = harness.triage_alert()
    harness.click("approve", harness.message(ts), user=approver)
    harness.settle()
    assert harness.rt.fleet.cordon_calls[NODE] == 1 and harness.rt.fleet.drain_calls[NODE] == 0
    return ts


def _plan_buttons(message: Call) -> list[str]:
    return [
        str(e.get("action_id"))
        for block in message.blocks
        for e in block.get("elements", [])
        if str(e.get("action_id", "")).startswith("gpu_drain_")
    ]


def _drain_status(harness: SlackHarness) -> str | None:
    with session_scope(harness.rt.db) as session:
        rows = [a for a in action_store.list_actions(session, incident_id=1) if a.action == "drain"]
        return rows[0].status if rows else None


def test_the_waiting_drain_is_shown_with_its_two_buttons_and_drain_now_drains(
    harness: SlackHarness,
) -> None:
    ts = _waiting(harness)
    message = harness.message(ts)
    assert f"Drain of {NODE} scheduled after the next checkpoint of llm-pretrain" in message.text
    assert _plan_buttons(message) == ["gpu_drain_now", "gpu_drain_cancel"]

    harness.click("drain_now", message, user=CAROL)
    harness.settle()
    assert harness.rt.fleet.drain_calls[NODE] == 1
    assert _plan_buttons(harness.message(ts)) == []  # nothing waits any more


def test_cancel_the_wait_and_the_drain_never_runs(harness: SlackHarness) -> None:
    ts = _waiting(harness)
    harness.click("drain_cancel", harness.message(ts), user=CAROL)
    harness.settle()
    assert _drain_status(harness) == "skipped"
    assert _plan_buttons(harness.message(ts)) == []
    assert "cancelled by U0CAROL" in harness.message(ts).text

    with session_scope(harness.rt.db) as session:
        assert deferred.waiting_plan(session, _run(harness)) is None  # no plan left to wake
    assert harness.rt.fleet.drain_calls[NODE] == 0


def test_drain_now_by_someone_the_policy_does_not_allow_is_refused(start_bot: Start) -> None:
    harness = start_bot(approvers=[DAVE])
    ts = _waiting(harness, approver=DAVE)
    name = harness.click("drain_now", harness.message(ts), user=BOB)
    harness.settle()
    (reply,) = harness.replies(name)
    assert "U0BOB is not an approver (approvers: U0DAVE)" in reply.text
    assert harness.rt.fleet.drain_calls[NODE] == 0
    assert _plan_buttons(harness.message(ts)) == ["gpu_drain_now", "gpu_drain_cancel"]


def _run(harness: SlackHarness) -> str:
    with session_scope(harness.rt.db) as session:
        run = run_store.latest_run_for_incident(session, 1)
        assert run is not None
        return run.id
