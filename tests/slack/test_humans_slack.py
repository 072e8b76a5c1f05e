"""People on the record through Slack: signed `/gpu` requests to the running bot, asserted on
what the fake Slack received and on the stored incident.

Covers: `/gpu fired` with a time after detection is refused in an ephemeral reply naming both
times and writes nothing; with an earlier time it sets fired_at (source human) and re-renders
the incident's message; then a redelivered alert and a re-firing one with an earlier startsAt
change neither fired_at nor the acknowledgement; `/gpu note` and `/gpu pin #N` land on the
timeline with who; `/gpu resolve` resolves with the reason; `/gpu mttr 7d by layer` answers
p50/p90 per layer with GPU-hours; `/gpu help` lists the new verbs.
"""

from __future__ import annotations

from datetime import timedelta

import httpx
from servers.oncall import alert, webhook
from servers.slack_harness import ALICE, BOB, INCIDENTS, SlackHarness

from storage import incidents as incident_store
from storage.db import session_scope
from storage.tables import Incident


def stored(harness: SlackHarness) -> Incident:
    with session_scope(harness.rt.db) as session:
        incident = incident_store.get_incident(session, 1)
    assert incident is not None
    return incident


def refire(harness: SlackHarness, *, earlier: timedelta) -> None:
    """The scenario's alert firing again with a different (earlier) startsAt."""
    trigger = harness.rt.scenario.trigger.alert
    assert trigger is not None
    starts = harness.rt.fleet.t0 + harness.rt.scenario.faults[0].start - earlier
    body = webhook([alert(trigger.alertname, dict(trigger.labels), starts_at=starts)])
    assert httpx.post(harness.server.url + "/alerts", json=body, timeout=60).status_code == 200


def test_fired_is_validated_and_no_alert_overwrites_it(harness: SlackHarness) -> None:
    assert harness.alert("firing").status_code == 200
    harness.settle()
    detected = stored(harness).detected_at
    assert detected is not None and stored(harness).fired_at_source == "alert"

    late = (detected + timedelta(minutes=2)).isoformat()
    refused = harness.command(f"fired INC-1 {late}", user=ALICE)
    harness.settle()
    (reply,) = harness.replies(refused)
    assert reply.body["response_type"] == "ephemeral"
    assert "is after detected_at" in reply.text
    assert "impact must begin at or before it" in reply.text
    assert stored(harness).fired_at_source == "alert"

    (post,) = harness.triage_posts(INCIDENTS)
    updates_before = len(harness.fake.of("chat.update"))
    human = detected - timedelta(minutes=45)
    accepted = harness.command(f"fired INC-1 {human.isoformat()} cable reseated at 09:00", user=BOB)
    harness.settle()
    (reply,) = harness.replies(accepted)
    assert "impact began" in reply.text and "MTTD 45m" in reply.text
    assert len(harness.fake.of("chat.update")) > updates_before  # the message was re-rendered
    incident = stored(harness)
    assert (incident.fired_at, incident.fired_at_source) == (human, "human")
    assert (incident.acknowledged_by, incident.fired_at_corrected_by) == (BOB, BOB)

    assert harness.alert("firing").status_code == 200  # redelivered
    refire(harness, earlier=timedelta(hours=3))  # fires again, claiming an earlier start
    harness.settle()
    again = stored(harness)
    assert (again.fired_at, again.fired_at_source) == (human, "human")
    assert (again.acknowledged_by, again.acknowledged_at) == (BOB, incident.acknowledged_at)
    assert harness.ts_of(post)  # still one incident message
    assert len(harness.triage_posts(INCIDENTS)) == 1


def test_note_pin_resolve_and_mttr_by_layer(harness: SlackHarness) -> None:
    assert harness.alert("firing").status_code == 200
    harness.settle()
    noted = harness.command('note INC-1 "reseated the NVLink bridge"', user=ALICE)
    harness.settle()
    assert "note #" in harness.replies(noted)[0].text
    with session_scope(harness.rt.db) as session:
        events = incident_store.list_events(session, 1)
    (note,) = [e for e in events if e.kind == "note"]
    assert (note.summary, note.actor) == ("reseated the NVLink bridge", ALICE)
    step = next(e for e in events if not e.pinned)

    pinned = harness.command(f"pin INC-1 #{step.id}", user=BOB)
    harness.settle()
    assert f"event #{step.id} pinned into the postmortem story" in harness.replies(pinned)[0].text
    with session_scope(harness.rt.db) as session:
        (event,) = [e for e in incident_store.list_events(session, 1) if e.id == step.id]
    assert (event.pinned, event.pinned_by) == (True, BOB)

    resolved = harness.command("resolve INC-1 replaced the bridge", user=BOB)
    harness.settle()
    assert "INC-1 resolved by <@U0BOB>: replaced the bridge" in harness.replies(resolved)[0].text
    assert stored(harness).state == "resolved"

    table = harness.command("mttr 7d by layer", user=ALICE)
    harness.settle()
    text = harness.replies(table)[0].text
    assert "MTTR figures* for incidents resolved in the last 7d (1 incidents" in text
    assert "gpu_hardware" in text and "p50 / p90" in text and "GPU-HOURS" in text

    shown = harness.command("help", user=ALICE)
    harness.settle()
    help_text = harness.replies(shown)[0].text
    for verb in ("fired <id> <time>", "note <id> <text>", "pin <id> <event>", "resolve <id>"):
        assert verb in help_text
