"""`/gpu pause`, `/gpu resume` and `/gpu breaker status|reset` over signed requests.

Covers: a pause is answered in the channel with who and why, noted on the open incident's
timeline, and blocks the approved cordon and drain (each reported `blocked_by:
pauseRequests` in the thread) while the ticket still goes out; a non-approver's `resume` and
`breaker reset` are refused ephemerally and change nothing; an approver's resume is answered in
the channel and noted; `breaker status` answers ephemerally with the breaker's state; a reset
by an approver closes an open breaker and says so.
"""

from __future__ import annotations

from collections.abc import Callable

from servers.slack_harness import ALICE, BOB, CAROL, INCIDENTS, SlackHarness

from storage import incidents as incident_store
from storage import safety as safety_store
from storage.db import session_scope

NODE = "gpu-node-03"
Start = Callable[..., SlackHarness]


def notes(harness: SlackHarness) -> list[tuple[str, str]]:
    with session_scope(harness.rt.db) as session:
        events = incident_store.list_events(session, 1)
    return [(e.actor, e.summary) for e in events if e.kind == "note" and e.payload.get("safety")]


def test_a_pause_blocks_the_approved_actions_until_an_approver_resumes(start_bot: Start) -> None:
    harness = start_bot(approvers=[BOB])
    assert harness.alert("firing").status_code == 200
    harness.settle()
    (post,) = harness.triage_posts(INCIDENTS)
    ts = harness.ts_of(post)

    name = harness.command("pause firmware rollout on rack-00", user=CAROL)
    harness.settle()
    (answer,) = harness.replies(name)
    assert answer.body["response_type"] == "in_channel"
    assert f"Remediation paused by <@{CAROL}>: firmware rollout on rack-00" in answer.text
    assert notes(harness) == [
        (
            CAROL,
            f"Remediation paused by {CAROL}: firmware rollout on rack-00 (no action that changes "
            "the cluster runs until /gpu resume)",
        )
    ]

    harness.click("approve", harness.message(ts), user=BOB)
    harness.settle()
    assert harness.rt.fleet.cordon_calls[NODE] == 0 and harness.rt.fleet.drain_calls[NODE] == 0
    (thread,) = harness.thread(ts)
    for action in ("cordon", "drain"):
        assert f"would {action} {NODE}; blocked: remediation paused by {CAROL}" in thread.text
    assert "opened rma ticket" in thread.text

    refused = harness.command("resume", user=CAROL)
    harness.settle()
    (no,) = harness.replies(refused)
    assert no.body["response_type"] == "ephemeral"
    assert f"{CAROL} is not an approver, and only approvers may resume" in no.text
    with session_scope(harness.rt.db) as session:
        assert len(safety_store.active_pauses(session)) == 1

    resumed = harness.command("resume", user=BOB)
    harness.settle()
    (yes,) = harness.replies(resumed)
    assert yes.body["response_type"] == "in_channel"
    assert f"Remediation resumed by <@{BOB}> (paused for: firmware rollout on rack-00)" in yes.text
    assert notes(harness)[-1][0] == BOB
    with session_scope(harness.rt.db) as session:
        assert safety_store.active_pauses(session) == []


def test_only_an_approver_resets_the_breaker(start_bot: Start) -> None:
    harness = start_bot(approvers=[BOB])
    with session_scope(harness.rt.db) as session:
        safety_store.trip_breaker(session, at=harness.rt.clock.now(), detail="10 nodes in 1h")

    status = harness.command("breaker status", user=ALICE)
    harness.settle()
    (shown,) = harness.replies(status)
    assert shown.body["response_type"] == "ephemeral"
    assert "circuit breaker OPEN since" in shown.text and "tripped: 10 nodes in 1h" in shown.text

    refused = harness.command("breaker reset", user=ALICE)
    harness.settle()
    (no,) = harness.replies(refused)
    refusal = f"{ALICE} is not an approver, and only approvers may reset the circuit breaker"
    assert refusal in no.text
    with session_scope(harness.rt.db) as session:
        assert safety_store.read_breaker(session).state == "open"

    reset = harness.command("breaker reset racks checked", user=BOB)
    harness.settle()
    (done,) = harness.replies(reset)
    assert f"Circuit breaker reset by <@{BOB}>: racks checked" in done.text
    assert "circuit breaker closed (0 of 10 node removals in the last 1h)" in done.text
    with session_scope(harness.rt.db) as session:
        row = safety_store.read_breaker(session)
    assert (row.state, row.reset_by, row.reset_reason) == ("closed", BOB, "racks checked")
