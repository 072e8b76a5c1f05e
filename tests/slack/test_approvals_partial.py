"""The Slack buttons after a partial approval (`approve INC-N --only cordon` on the CLI).

Covers, over signed requests to the bot and the fake Slack Web API: after the cordon alone was
approved elsewhere, the Approve button of the same triage message decides the rest (drain and
ticket), which then runs once; the button no longer answers "already decided" with the first,
partial decision.
"""

from __future__ import annotations

from servers.slack_harness import BOB, INCIDENTS, SlackHarness

from storage import approvals as approval_store
from storage.db import session_scope

NODE = "gpu-node-03"


def _pending_run(harness: SlackHarness) -> str:
    with session_scope(harness.rt.db) as session:
        pending = approval_store.pending_approval_for(session, incident_id=1)
        assert pending is not None
        return pending.run_id


def test_the_approve_button_decides_the_rest_of_a_partial_approval(
    harness: SlackHarness,
) -> None:
    assert harness.alert("firing").status_code == 200
    harness.settle()
    (post,) = harness.triage_posts(INCIDENTS)
    ts = harness.ts_of(post)
    run_id = _pending_run(harness)
    partial = harness.rt.engine.resume(
        run_id, decision="approve", actor="cli:carol", only=["cordon"]
    )
    assert partial.status == "awaiting_approval"
    assert harness.rt.fleet.cordon_calls[NODE] == 1 and harness.rt.fleet.drain_calls[NODE] == 0

    harness.click("approve", harness.message(ts), user=BOB)
    harness.settle()
    assert harness.rt.fleet.drain_calls[NODE] == 1
    assert harness.rt.fleet.cordon_calls[NODE] == 1
    with session_scope(harness.rt.db) as session:
        assert approval_store.pending_approval_for(session, incident_id=1) is None
        states = [a.state for a in approval_store.list_approvals(session, incident_id=1)]
    assert states == ["approved", "approved"]
