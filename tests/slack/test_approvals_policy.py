"""Approval policy from the buttons of a triage message, over signed requests.

Covers: an unauthorized approver is refused with the approvers named and nothing runs; a member
of an approver user group may approve (membership from usergroups.users.list, cached across
clicks) and a non-member may not; the requester cannot approve a high-risk action; a click after
expiry takes the rejected branch and says so; a double click executes each action once and the
second click is told who approved; global dry-run changes nothing and says what it would have
done; a blast-radius limit lets the approval through and blocks the actions when they are
claimed, saying what would have happened and why not;
Reject records who and when; the Dry run button previews without deciding; after a restart a
click on the old message updates that same message.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from servers.slack_harness import ALICE, BOB, CAROL, INCIDENTS, SlackHarness
from sqlmodel import select

from storage import approvals as approval_store
from storage import incidents as incident_store
from storage.db import session_scope
from storage.tables import ActionRow

NODE = "gpu-node-03"
Start = Callable[..., SlackHarness]


def _triaged(harness: SlackHarness) -> str:
    """An alert-triggered triage waiting for approval; returns its message ts."""
    return harness.triage_alert()


def _pending(harness: SlackHarness) -> bool:
    with session_scope(harness.rt.db) as session:
        return approval_store.pending_approval_for(session, incident_id=1) is not None


def _event_kinds(harness: SlackHarness) -> list[str]:
    with session_scope(harness.rt.db) as session:
        return [e.kind for e in incident_store.list_events(session, 1)]


def test_unauthorized_approver_is_refused_and_nothing_runs(start_bot: Start) -> None:
    harness = start_bot(approvers=["U0DAVE"])
    ts = _triaged(harness)
    assert "approvers: <@U0DAVE>" in harness.message(ts).text
    name = harness.click("approve", harness.message(ts), user=BOB)
    harness.settle()
    (reply,) = harness.replies(name)
    assert reply.body["response_type"] == "ephemeral"
    assert "Not allowed: U0BOB is not an approver (approvers: U0DAVE)" in reply.text
    assert harness.rt.fleet.cordon_calls[NODE] == 0
    assert _pending(harness)
    assert "gpu_approve" in str(harness.message(ts).blocks)  # buttons still there


def test_user_group_members_may_approve_others_may_not(start_bot: Start) -> None:
    harness = start_bot(approvers=["S0ONCALL"])
    ts = _triaged(harness)
    refused = harness.click("approve", harness.message(ts), user=ALICE)
    harness.settle()
    assert "U0ALICE is not an approver" in harness.replies(refused)[0].text
    harness.click("approve", harness.message(ts), user=CAROL)
    harness.settle()
    assert harness.rt.fleet.cordon_calls[NODE] == 1
    assert "Approved by <@U0CAROL>" in harness.message(ts).text
    lookups = harness.fake.of("usergroups.users.list")
    assert [c.body["usergroup"] for c in lookups] == ["S0ONCALL"]  # cached for the 2nd click


def test_requester_cannot_approve_high_risk_action(harness: SlackHarness) -> None:
    harness.command(f"diagnose {NODE}", user=ALICE)
    harness.settle()
    (post,) = harness.triage_posts("C0OPS")
    name = harness.click("approve", harness.message(harness.ts_of(post)), user=ALICE)
    harness.settle()
    assert (
        "two-person rule: U0ALICE requested this high-risk action" in harness.replies(name)[0].text
    )
    assert harness.rt.fleet.cordon_calls[NODE] == 0
    assert _pending(harness)
    assert "approval_refused" not in _event_kinds(harness)


def test_expired_approval_takes_the_rejected_branch(harness: SlackHarness) -> None:
    ts = _triaged(harness)
    harness.rt.clock.advance(timedelta(minutes=31))  # type: ignore[attr-defined]
    name = harness.click("approve", harness.message(ts), user=BOB)
    harness.settle()
    (reply,) = harness.replies(name)
    assert "expired at" in reply.text and "nothing was done" in reply.text
    assert "/gpu run ecc-storm node=gpu-node-03" in reply.text
    assert ":hourglass: Expired at" in harness.message(ts).text
    assert harness.rt.fleet.cordon_calls[NODE] == 0
    assert "approval_expired" in _event_kinds(harness)


def test_double_click_executes_each_action_once(harness: SlackHarness) -> None:
    ts = _triaged(harness)
    message = harness.message(ts)
    first = harness.click("approve", message, user=BOB)
    second = harness.click("approve", message, user=CAROL)  # before the first one finished
    harness.settle()
    assert harness.rt.fleet.cordon_calls[NODE] == 1
    assert harness.rt.fleet.drain_calls[NODE] == 1
    with session_scope(harness.rt.db) as session:
        actions = list(session.exec(select(ActionRow)))
    assert sorted(a.action for a in actions) == ["cordon", "drain", "open_ticket"]
    replies = harness.replies(first) + harness.replies(second)
    assert len(replies) == 1 and "already approved by <@" in replies[0].text
    assert len(harness.thread(ts)) == 1
    assert _event_kinds(harness).count("approval_granted") == 1


def test_global_dry_run_changes_nothing_and_says_what_it_would_do(start_bot: Start) -> None:
    harness = start_bot(dry_run=True)
    ts = _triaged(harness)
    assert "*Dry run* (GPU_ONCALL_POLICY__DRY_RUN)" in harness.message(ts).text
    harness.click("approve", harness.message(ts), user=BOB)
    harness.settle()
    assert harness.rt.fleet.cordon_calls[NODE] == 0 and harness.rt.fleet.drain_calls[NODE] == 0
    (thread,) = harness.thread(ts)
    assert "dry run: would cordon gpu-node-03" in thread.text
    assert "dry run: would drain gpu-node-03" in thread.text


def test_a_blast_radius_limit_blocks_the_approved_action_and_says_why(start_bot: Start) -> None:
    harness = start_bot(max_unhealthy="1")
    ts = _triaged(harness)
    harness.rt.fleet.cordon("gpu-node-10")  # already out of service by someone else
    harness.click("approve", harness.message(ts), user=BOB)
    harness.settle()
    assert harness.rt.fleet.cordon_calls[NODE] == 0 and harness.rt.fleet.drain_calls[NODE] == 0
    (thread,) = harness.thread(ts)
    pool = "pool NVIDIA-H100-80GB-HBM3"
    for action in ("cordon", "drain"):
        assert (
            f"would {action} gpu-node-03; blocked: 1 of 16 nodes of {pool} already out "
            "(limit 1 = 1 nodes)"
        ) in thread.text
    with session_scope(harness.rt.db) as session:
        blocked = [e for e in incident_store.list_events(session, 1) if e.kind == "action_blocked"]
    assert [e.payload["blocked_by"] for e in blocked] == ["maxUnhealthy", "maxUnhealthy"]
    assert blocked[0].payload["data"]["out_nodes"] == ["gpu-node-10"]


def test_reject_records_who_and_when(harness: SlackHarness) -> None:
    ts = _triaged(harness)
    harness.click("reject", harness.message(ts), user=BOB)
    harness.settle()
    assert "Rejected by <@U0BOB> at" in harness.message(ts).text
    (thread,) = harness.thread(ts)
    assert "*Actions* (rejected by <@U0BOB>)" in thread.text
    assert "Nothing was carried out." in thread.text
    assert harness.rt.fleet.cordon_calls[NODE] == 0
    assert "approval_rejected" in _event_kinds(harness)


def test_dry_run_button_previews_and_leaves_the_approval_open(harness: SlackHarness) -> None:
    ts = _triaged(harness)
    harness.click("dry_run", harness.message(ts), user=BOB)
    harness.settle()
    (thread,) = harness.thread(ts)
    assert "nothing was changed; the approval is still open" in thread.text
    assert "drain gpu-node-03: would evict 1 GPU pods holding 8 GPUs" in thread.text
    assert "jobs losing ranks: llm-pretrain (1 pods, 8 GPUs)" in thread.text
    assert "`open_ticket` has no dry run" in thread.text
    assert harness.rt.fleet.cordon_calls[NODE] == 0 and _pending(harness)


def test_restarted_bot_updates_the_same_message(start_bot: Start) -> None:
    first = start_bot()
    ts = _triaged(first)
    message = first.message(ts)
    first.stop()

    second = start_bot(fresh=False)
    second.click("approve", message, user=BOB)
    second.settle()
    assert second.rt.fleet.cordon_calls[NODE] == 1
    after = [c for c in second.fake.of("chat.update") if c.body["ts"] == ts]
    assert "Approved by <@U0BOB>" in after[-1].text
    assert len(second.triage_posts(INCIDENTS)) == 1  # no second message was posted
    assert len(second.thread(ts)) == 1
