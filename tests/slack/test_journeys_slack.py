"""The three journeys of DESIGN §1, driven by signed Slack requests and an Alertmanager webhook
into the running bot, asserted on what the fake Slack received and on the stored incident.

Covers: (1) `/gpu diagnose` posts a message at once, edits it in place step by step, ends with
verdict, evidence, ruled-out layers and buttons; the requester cannot approve the high-risk
drain; another person's approval carries out every action once and the results and the
verification land in the message's thread. (2) An alert opens an incident whose triage is posted
to the incident channel; approval mitigates it; the resolved alert resolves it and the message
shows MTTR. (3) `/gpu postmortem` uploads the HTML postmortem with files upload v2; `/gpu mttr`
answers per runbook; `/gpu ack` acknowledges and the message shows who. In-place updates are
throttled by `update_interval_seconds`, and the final state is always sent.
"""

from __future__ import annotations

from collections.abc import Callable

from servers.slack_harness import ALICE, BOB, INCIDENTS, OPS, SlackHarness
from sqlmodel import select

from storage import incidents as incident_store
from storage.db import session_scope
from storage.tables import ActionRow, ChatMessage

NODE = "gpu-node-03"


def test_diagnose_approve_act_verify_in_thread(harness: SlackHarness) -> None:
    fake, fleet = harness.fake, harness.rt.fleet
    harness.command(f"diagnose {NODE}", user=ALICE)
    harness.settle()

    (post,) = harness.triage_posts(OPS)
    ts = harness.ts_of(post)
    assert f"Starting runbook `node-diagnose` on `{NODE}`" in post.text
    updates = [c for c in fake.of("chat.update") if c.body["ts"] == ts]
    running = [u for u in updates if "*Running*" in u.text]
    assert len(running) >= 5, "the progress section is updated in place as steps complete"
    assert any("DBE rate" in u.text for u in running)

    verdict = harness.message(ts)
    # a person's diagnosis takes its severity from the findings (the DBE storm is critical)
    assert "CRITICAL · INC-1 · node-diagnose · gpu-node-03" in verdict.text
    assert "*Verdict:* `gpu_hardware`" in verdict.text
    assert "gpu-node-03 / GPU 5" in verdict.text
    (details,) = harness.details(ts)  # the evidence, once, in the thread
    assert "`gpu.ecc.dbe_rate` =" in details.text  # evidence with its value
    assert "*Ruled out:*" in details.text and "`fabric`" in details.text
    assert "`cordon gpu-node-03`" in verdict.text and "`drain gpu-node-03" in verdict.text
    assert fleet.cordon_calls[NODE] == 0

    refused = harness.click("approve", verdict, user=ALICE)
    harness.settle()
    (reply,) = harness.replies(refused)
    assert reply.body["response_type"] == "ephemeral"
    assert "two-person rule" in reply.text and "cannot also approve" in reply.text
    assert fleet.cordon_calls[NODE] == 0

    harness.click("approve", harness.message(ts), user=BOB)
    harness.settle()
    assert fleet.cordon_calls[NODE] == 1 and fleet.drain_calls[NODE] == 1
    final = harness.message(ts)
    assert "Approved by <@U0BOB>" in final.text
    assert "gpu_approve" not in str(final.blocks)  # the buttons are gone
    (thread,) = harness.thread(ts)
    assert "*Actions* (approved by <@U0BOB>)" in thread.text
    assert f"{NODE} cordoned" in thread.text and "drained" in thread.text
    assert "Verification passed: gpu.ecc.dbe_rate = 0" in thread.text
    with session_scope(harness.rt.db) as session:
        events = incident_store.list_events(session, 1)
        granted = [e for e in events if e.kind == "approval_granted"]
        assert [e.actor for e in granted] == [BOB]
        refusals = [e for e in events if e.kind == "note" and "refused" in e.summary]
        assert [e.actor for e in refusals] == [ALICE]
        assert session.exec(select(ChatMessage)).one().ts == ts


def test_alert_triage_posted_approved_and_resolved(harness: SlackHarness) -> None:
    fleet = harness.rt.fleet
    assert harness.alert("firing").status_code == 200
    harness.settle()

    (post,) = harness.triage_posts(INCIDENTS)
    ts = harness.ts_of(post)
    triage = harness.message(ts)
    assert "CRITICAL · INC-1 · ecc-storm · gpu-node-03" in triage.text
    assert "started by Alertmanager" in triage.text
    assert "*Verdict:* `gpu_hardware`" in triage.text

    harness.click("approve", triage, user=BOB)
    harness.settle()
    assert fleet.cordon_calls[NODE] == 1
    (thread,) = harness.thread(ts)
    assert "INC-1 is now *monitoring*" in thread.text

    assert harness.alert("resolved").status_code == 200
    harness.settle()
    resolved = harness.message(ts)
    assert "INC-1 resolved · MTTR" in resolved.text
    assert "state *resolved*" in resolved.text
    with session_scope(harness.rt.db) as session:
        incident = incident_store.get_incident(session, 1)
        assert incident is not None and incident.state == "resolved"
        assert incident.acknowledged_by == BOB and incident.resolved_at is not None
        assert len(list(session.exec(select(ActionRow)))) == 3


def test_postmortem_upload_mttr_and_ack(harness: SlackHarness) -> None:
    fake = harness.fake
    harness.alert("firing")
    harness.settle()
    ack = harness.command("ack INC-1", user=ALICE)
    harness.settle()
    assert "INC-1 acknowledged" in harness.replies(ack)[0].text
    (post,) = harness.triage_posts(INCIDENTS)
    assert "acknowledged by <@U0ALICE>" in harness.message(harness.ts_of(post)).text
    harness.click("approve", harness.message(harness.ts_of(post)), user=BOB)
    harness.settle()
    harness.alert("resolved")
    harness.settle()

    pm = harness.command("postmortem INC-1", user=ALICE, channel=OPS)
    mttr = harness.command("mttr 7d", user=ALICE)
    harness.settle()
    (url,) = fake.of("files.getUploadURLExternal")
    assert url.body["filename"] == "INC-1-postmortem.html"
    (upload,) = fake.of("upload")
    document = fake.uploads[upload.body["file_id"]].decode()
    assert document.startswith("<!DOCTYPE html>")
    assert "<h1>INC-1: " in document and 'id="timeline-chart"' in document
    assert "approval_granted" in document or "Remediation approved by U0BOB" in document
    (done,) = fake.of("files.completeUploadExternal")
    assert done.body["channel_id"] == OPS
    assert "Postmortem of INC-1" in done.body["initial_comment"]
    assert harness.replies(pm) == []  # the upload is the answer
    table = harness.replies(mttr)[0].text
    assert "MTTR figures* for incidents resolved in the last 7d (1 incidents" in table
    assert "ecc-storm" in table and "Time to diagnosis" in table


def test_updates_are_throttled_but_the_final_state_always_goes(
    start_bot: Callable[..., SlackHarness],
) -> None:
    harness = start_bot(slack={"update_interval_seconds": 3600})
    harness.command(f"diagnose {NODE}", user=ALICE)
    harness.settle()
    (post,) = harness.triage_posts(OPS)
    ts = harness.ts_of(post)
    updates = [c for c in harness.fake.of("chat.update") if c.body["ts"] == ts]
    # adopting the message, the first completed step, and the final state: nothing in between
    assert len(updates) == 3
    assert "*Running*" in updates[1].text
    assert "*Verdict:* `gpu_hardware`" in updates[-1].text
