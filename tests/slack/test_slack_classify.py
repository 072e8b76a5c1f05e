"""Evidence from Slack (issue 14, part 1): files shared in an incident's thread and `/gpu
classify` get the same verdict as `gpu-oncall triage-bundle`, and land on the timeline.

Aspects: a shared `nvidia-smi -q` plus kernel log (one of them gzipped) are downloaded with the
bot token, judged together, answered in the thread and recorded on the incident as a note; a
file in a thread that is no incident's is never downloaded; a file over the size limit is not
downloaded and the thread says why; a URL off Slack's hosts never receives the token;
`/gpu classify INC-N <text>` answers ephemerally and records; without INC-N it only answers;
without text it says what to paste.
"""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from typing import Any

import httpx
from servers.fake_slack import Call
from servers.slack_harness import ALICE, INCIDENTS, SECRET, WAIT, SlackHarness
from slack_sdk.signature import SignatureVerifier

from bot.diagnosis.evidence import recognize
from storage import incidents as incident_store
from storage.db import session_scope

FIXTURES = Path(__file__).parents[1] / "diagnosis" / "fixtures" / "evidence"
SMI = (FIXTURES / "nvidia-smi-q-faulty.txt").read_bytes()
DMESG = (FIXTURES / "dmesg-xid-chain.txt").read_bytes()
XID_79 = (
    "[ 8123.456789] NVRM: GPU at PCI:0000:2b:00: GPU-1d2c3b4a-5e6f-7a8b-9c0d-1e2f3a4b5c6d\n"
    "[ 8125.001122] NVRM: Xid (PCI:0000:2b:00): 79, pid='<unknown>', name=<unknown>, "
    "GPU has fallen off the bus.\n"
)


def post_event(harness: SlackHarness, event: dict[str, Any]) -> None:
    """An Events API callback, signed with the signing secret as Slack signs it."""
    body = json.dumps(
        {
            "token": "unused",
            "team_id": "T0001",
            "api_app_id": "A0001",
            "type": "event_callback",
            "event_id": f"Ev{time.monotonic_ns()}",
            "event_time": 1700000000,
            "event": event,
        }
    )
    ts = str(int(time.time()))
    signature = str(SignatureVerifier(SECRET).generate_signature(timestamp=ts, body=body))
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature,
    }
    response = httpx.post(harness.events_url, content=body, headers=headers, timeout=WAIT)
    assert response.status_code == 200, response.text


def open_incident(harness: SlackHarness) -> tuple[int, str]:
    """The scenario's alert opens an incident; its triage message starts the thread."""
    assert harness.alert("firing").status_code == 200
    harness.settle()
    (post,) = harness.triage_posts(INCIDENTS)
    with session_scope(harness.rt.db) as session:
        (incident,) = incident_store.list_incidents(session, open_only=True)
        assert incident.id is not None
        return incident.id, harness.ts_of(post)


def file_message(thread_ts: str, files: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "message",
        "subtype": "file_share",
        "channel": INCIDENTS,
        "user": ALICE,
        "ts": "1700000999.000001",
        "thread_ts": thread_ts,
        "text": "output from the node",
        "files": files,
    }


def evidence_notes(harness: SlackHarness, incident_id: int) -> list[Any]:
    with session_scope(harness.rt.db) as session:
        events = incident_store.list_events(session, incident_id)
        return [e for e in events if e.kind == "note" and (e.payload or {}).get("evidence")]


def test_files_in_an_incident_thread_get_the_bundle_verdict_and_the_timeline(
    harness: SlackHarness,
) -> None:
    incident_id, thread = open_incident(harness)
    files = [
        harness.fake.share_file("nvidia-smi-q.txt", SMI),
        harness.fake.share_file("dmesg.txt.gz", gzip.compress(DMESG)),
    ]
    post_event(harness, file_message(thread, files))
    harness.settle()

    downloads = harness.fake.of("file_download")
    assert len(downloads) == 2 and all(d.body["authorized"] for d in downloads)
    expected = recognize(
        [("dmesg.txt", DMESG.decode()), ("nvidia-smi-q.txt", SMI.decode())],
        catalog=harness.rt.deps.log_catalog,
    )
    (answer,) = harness.thread(thread)
    assert f"`{expected.layer.value}`" in answer.text
    assert expected.summary.replace("&", "&amp;").replace("<", "&lt;")[:80] in answer.text
    assert f"INC-{incident_id}" in answer.text
    (note,) = evidence_notes(harness, incident_id)
    assert note.actor == ALICE
    assert note.payload["evidence"]["summary"] == expected.summary
    assert note.payload["files"] == [f["id"] for f in files]


def test_a_file_in_a_thread_that_is_no_incidents_is_never_downloaded(
    harness: SlackHarness,
) -> None:
    post_event(harness, file_message("1699999999.000001", [harness.fake.share_file("a.txt", SMI)]))
    top_level = file_message("", [harness.fake.share_file("b.txt", SMI)]) | {"thread_ts": None}
    post_event(harness, top_level)
    harness.settle()
    assert harness.fake.of("file_download") == []
    assert harness.fake.of("chat.postMessage") == []


LIMIT = 2048


def test_an_oversized_or_foreign_file_is_not_downloaded_and_the_thread_says_why(
    harness: SlackHarness,
) -> None:
    harness.rt.settings.evidence.max_file_bytes = LIMIT  # read per request, as in production
    incident_id, thread = open_incident(harness)
    big = harness.fake.share_file("nvidia-bug-report.log", b"x" * (LIMIT + 1))
    foreign = harness.fake.share_file("dmesg.txt", XID_79.encode()) | {
        "url_private": "https://files.example.net/dmesg.txt",
        "url_private_download": "",
    }
    ok = harness.fake.share_file("kern.log", XID_79.encode())
    post_event(harness, file_message(thread, [big, foreign, ok]))
    harness.settle()

    assert [c.path.rsplit("/", 1)[1] for c in harness.fake.of("file_download")] == ["kern.log"]
    (answer,) = harness.thread(thread)
    assert "over evidence.max_file_bytes" in answer.text
    assert "not a Slack file URL" in answer.text
    assert "`gpu_hardware`" in answer.text
    assert len(evidence_notes(harness, incident_id)) == 1


def replies_text(harness: SlackHarness, name: str) -> str:
    return "\n".join(c.text for c in harness.replies(name))


def test_classify_with_an_incident_answers_and_records(harness: SlackHarness) -> None:
    incident_id, _ = open_incident(harness)
    name = harness.command(f"classify INC-{incident_id} {XID_79}")
    harness.settle()
    reply: Call = harness.replies(name)[-1]
    assert reply.body.get("response_type") == "ephemeral"
    assert "`gpu_hardware`" in reply.text and "Xid 79" in reply.text
    assert f"Recorded on INC-{incident_id}'s timeline" in reply.text
    (note,) = evidence_notes(harness, incident_id)
    assert note.payload["sources"] == ["pasted text"]
    assert note.payload["evidence"]["layer"] == "gpu_hardware"


def test_classify_without_an_incident_only_answers(harness: SlackHarness) -> None:
    name = harness.command(f"classify {XID_79}")
    harness.settle()
    text = replies_text(harness, name)
    assert "`gpu_hardware`" in text and "Recorded on" not in text
    with session_scope(harness.rt.db) as session:
        assert incident_store.list_incidents(session, open_only=False) == []


def test_classify_without_text_says_what_to_paste(harness: SlackHarness) -> None:
    name = harness.command("classify INC-1")
    harness.settle()
    assert "/gpu classify needs the text to judge" in replies_text(harness, name)
