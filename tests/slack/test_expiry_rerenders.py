"""An approval the scheduler expires is re-drawn on its live Slack message: no button of it is
left to click, and the message says it expired.

Over signed requests to the bot and the fake Slack Web API, with the scheduler's own tick
(`Jobs.expire_approvals`, wired to the bot's `refresh_incident` as `serve` wires it) and the
bot's clock moved past the approval's expiry (no wall time).
"""

from __future__ import annotations

from datetime import timedelta

from servers.fake_slack import Call
from servers.slack_harness import BOB, SlackHarness

from bot.work.scheduler import Jobs

NODE = "gpu-node-03"


def _buttons(message: Call) -> list[str]:
    ids: list[str] = []
    for block in message.blocks:
        for element in [*block.get("elements", []), block.get("accessory") or {}]:
            if element.get("type") == "button":
                ids.append(str(element.get("action_id")))
    return ids


def _approval_buttons(message: Call) -> list[str]:
    return [i for i in _buttons(message) if "approve" in i or "reject" in i]


def _tick(harness: SlackHarness) -> int:
    jobs = Jobs(harness.rt.engine, interval_seconds=30, on_expired=harness.bot.refresh_incident)
    expired = jobs.expire_approvals()
    harness.settle()
    return expired


def test_an_expired_approval_leaves_no_button_on_the_message(harness: SlackHarness) -> None:
    ts = harness.triage_alert()
    assert _approval_buttons(harness.message(ts)), "the triage message asks for approval"

    assert _tick(harness) == 0  # nothing due yet: the message keeps its buttons
    assert _approval_buttons(harness.message(ts))

    harness.rt.clock.advance(timedelta(minutes=31))  # type: ignore[attr-defined]
    assert _tick(harness) == 1
    after = harness.message(ts)
    assert _approval_buttons(after) == []
    assert "expired" in after.text.lower()
    assert harness.rt.fleet.cordon_calls[NODE] == 0


def test_the_rest_of_a_partial_approval_expires_on_the_message(harness: SlackHarness) -> None:
    ts = harness.triage_alert()
    harness.click("approve:cordon", harness.message(ts), user=BOB)
    harness.settle()
    pending = _approval_buttons(harness.message(ts))
    assert "gpu_approve_only:drain" in pending and "gpu_approve_only:cordon" not in pending

    harness.rt.clock.advance(timedelta(minutes=31))  # type: ignore[attr-defined]
    assert _tick(harness) == 1
    after = harness.message(ts)
    assert _approval_buttons(after) == []
    assert "expired" in after.text.lower()
    assert "Approved by <@U0BOB>" in after.text  # the cordon that ran stays on record
    assert harness.rt.fleet.cordon_calls[NODE] == 1 and harness.rt.fleet.drain_calls[NODE] == 0
