"""One click approves one action, over signed requests to the bot and the fake Slack Web API.

Covers: the triage message of the ECC storm gives cordon, drain and open_ticket each an Approve
button of its own; clicking cordon's runs the cordon alone (the same `RunEngine.resume(only=...)`
the CLI's `approve --only` uses), the drain and the ticket stay pending as a new approval with
its own expiry, shown on the same message, and expire on their own (the scheduler's
`expire_due`) without running; a click by someone who may not approve gets an ephemeral refusal
naming who may and the setting that changes the rule, and nothing runs; the message names
the verdict, the culprit and the decision first, and the culprit's GPU UUID, the impact and the
recommendation once each.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from servers.fake_slack import Call
from servers.slack_harness import BOB, SlackHarness

from storage import approvals as approval_store
from storage.db import session_scope

NODE = "gpu-node-03"
Start = Callable[..., SlackHarness]


def _triaged(harness: SlackHarness) -> str:
    return harness.triage_alert()


def _states(harness: SlackHarness) -> list[tuple[str, str]]:
    with session_scope(harness.rt.db) as session:
        rows = approval_store.list_approvals(session, incident_id=1)
        return [(r.state, ",".join(str(p["action"]) for p in r.payload["proposals"])) for r in rows]


def visible(message: Call) -> list[str]:
    """What a reader sees: header, section and context texts and button labels (not the
    notification text, nor a confirmation dialog that opens only on a click)."""
    texts: list[str] = []
    for block in message.blocks:
        if isinstance(block.get("text"), dict):
            texts.append(str(block["text"]["text"]))
        for element in [*block.get("elements", []), block.get("accessory") or {}]:
            text = element.get("text")
            texts.append(str(text["text"] if isinstance(text, dict) else text or ""))
    return texts


def test_one_click_runs_one_action_and_the_rest_expires_on_its_own(harness: SlackHarness) -> None:
    fleet = harness.rt.fleet
    ts = _triaged(harness)
    message = harness.message(ts)
    own = [b["accessory"]["action_id"] for b in message.blocks if "accessory" in b]
    assert own == [
        "gpu_approve_only:cordon",
        "gpu_approve_only:drain",
        "gpu_approve_only:open_ticket",
    ]

    harness.click("approve:cordon", message, user=BOB)
    harness.settle()
    assert fleet.cordon_calls[NODE] == 1 and fleet.drain_calls[NODE] == 0
    assert _states(harness) == [
        ("approved", "cordon,drain,open_ticket"),
        ("pending", "drain,open_ticket"),
    ]
    with session_scope(harness.rt.db) as session:
        first, rest = approval_store.list_approvals(session, incident_id=1)
        assert rest.expires_at > first.expires_at  # its own expiry, from the partial decision
        expires = rest.expires_at
    after = harness.message(ts).text
    assert "`drain`, `open_ticket` await approval" in after
    assert f"expires {expires:%H:%M} UTC" in after
    assert "Approved by <@U0BOB>" in after  # beside the cordon, which ran

    harness.rt.clock.advance(timedelta(minutes=31))  # type: ignore[attr-defined]
    harness.rt.engine.expire_due()
    harness.settle()
    assert fleet.drain_calls[NODE] == 0 and fleet.cordon_calls[NODE] == 1
    assert [state for state, _ in _states(harness)] == ["approved", "expired"]


def test_a_click_by_someone_not_allowed_names_who_may_and_the_setting(start_bot: Start) -> None:
    harness = start_bot(approvers=["U0DAVE"])
    ts = _triaged(harness)
    name = harness.click("approve:cordon", harness.message(ts), user=BOB)
    harness.settle()
    (reply,) = harness.replies(name)
    assert reply.body["response_type"] == "ephemeral"
    assert "U0BOB is not an approver (approvers: U0DAVE)" in reply.text
    assert "GPU_ONCALL_POLICY__APPROVERS" in reply.text
    assert harness.rt.fleet.cordon_calls[NODE] == 0
    assert [state for state, _ in _states(harness)] == ["pending"]


def test_the_message_says_each_thing_once(harness: SlackHarness) -> None:
    ts = _triaged(harness)
    message = harness.message(ts)
    texts = visible(message)
    whole = "\n".join(texts)
    verdict = next(b for b in message.blocks if b.get("block_id") == "verdict")
    first = verdict["text"]["text"].splitlines()
    assert first[0].startswith("*Verdict:*") and first[1].startswith("*Culprit:*")
    assert first[2].startswith("*Decision:*")
    assert message.blocks.index(verdict) == 1  # right under the header
    with session_scope(harness.rt.db) as session:
        pending = approval_store.pending_approval_for(session, incident_id=1)
        assert pending is not None
        proposals = pending.payload["proposals"]
    uuids = {str(c["uuid"]) for c in _verdict(harness).get("culprit_details", []) if c.get("uuid")}
    assert uuids, "the scenario's culprit has a GPU UUID"
    for uuid in uuids:
        assert whole.count(uuid) == 1, uuid
    impacts = {str(p["impact"]["node"]) for p in proposals if p.get("impact")}
    assert impacts == {NODE}
    assert whole.count("Impact:") == 1
    assert whole.count("Recommendation:") == 1
    assert whole.count("INC-1") == 1  # the header; the rest points at the thread
    for risk in ("risk *medium*", "risk *high*"):
        assert risk in whole
    assert whole.count("approvers:") == 1
    (details,) = harness.details(ts)
    assert "*Ruled out:*" in details.text and "*Ruled out:*" not in whole


def _verdict(harness: SlackHarness) -> dict[str, object]:
    from storage import runs as run_store

    with session_scope(harness.rt.db) as session:
        run = run_store.latest_run_for_incident(session, 1)
        assert run is not None and run.verdict is not None
        return dict(run.verdict)
