"""`/gpu action` and `/gpu section` over signed requests, into the postmortem.

Covers: an action item (owner as a Slack mention or `@name`, with or without a due date) and a
section in a person's words (`went-well`, as typed) are stored as `gpu-oncall action` / `section`
store them, and the Markdown, HTML and JSON postmortems carry them; after the incident resolves
(the bot drafts again) the person's text is still there, not the draft; wrong input gets an
ephemeral line naming what was wrong (unknown section with the valid ones, an owner without @,
a due date that is not YYYY-MM-DD, an incident that does not exist) and stores nothing.
"""

from __future__ import annotations

import json

from servers.slack_harness import BOB, SlackHarness

from bot.incidents.reporting import read_postmortem
from storage import postmortem_notes as notes_store
from storage.db import session_scope

WELL = "The cordon landed two minutes after the page & nobody lost a checkpoint"


def _postmortems(harness: SlackHarness) -> dict[str, str]:
    now = harness.rt.clock.now()
    with session_scope(harness.rt.db) as session:
        return {f: read_postmortem(session, 1, fmt=f, now=now) for f in ("md", "html", "json")}


def _say(harness: SlackHarness, text: str) -> str:
    name = harness.command(text, user=BOB)
    harness.settle()
    (reply,) = harness.replies(name)
    assert reply.body["response_type"] == "ephemeral"
    return reply.text


def test_action_items_and_sections_round_trip_into_the_postmortem(harness: SlackHarness) -> None:
    assert harness.alert("firing").status_code == 200
    harness.settle()
    said = _say(harness, f"section INC-1 went-well {WELL}")
    assert "INC-1: postmortem section *went-well* written" in said
    said = _say(harness, "action INC-1 <@U0CAROL|carol> due 2026-12-01 alert on DBE rate > 0")
    assert "action item for <@U0CAROL>, due 2026-12-01 recorded" in said
    _say(harness, "action INC-1 @dave replace GPU 5 of gpu-node-03")

    assert harness.alert("resolved").status_code == 200  # the bot drafts again on resolution
    harness.settle()
    documents = _postmortems(harness)
    md, page = documents["md"], documents["html"]
    assert "after the page &amp; nobody lost a checkpoint" in md  # escaped as Markdown cells are
    assert "alert on DBE rate" in md
    assert "U0CAROL" in md and "2026-12-01" in md and "@dave" in md
    assert "nobody lost a checkpoint" in page and "U0CAROL" in page and "@dave" in page
    sections = json.loads(documents["json"])["sections"]
    assert WELL in sections["went_well"]
    items = {(i["owner"], i["due"]) for i in sections["action_items"] if not i.get("draft")}
    assert items == {("U0CAROL", "2026-12-01"), ("@dave", None)}


def test_wrong_input_names_what_was_wrong_and_stores_nothing(harness: SlackHarness) -> None:
    assert harness.alert("firing").status_code == 200
    harness.settle()
    wrong = {
        "section INC-1 lessons we learnt a lot": "unknown postmortem section 'lessons' "
        "(sections: summary, impact, root-cause, contributing, went-well, went-badly)",
        "action INC-1 carol fix it": "'carol' is not an owner: name one person as @alice",
        "action INC-1 @carol due 2026-13-01 fix it": "due date '2026-13-01' is not YYYY-MM-DD",
        "action INC-1 @carol due tomorrow fix it": "due date 'tomorrow' is not YYYY-MM-DD",
        "action INC-1 @carol": "/gpu action takes <id> @owner [due YYYY-MM-DD] <text>",
        "section INC-1 summary": "/gpu section takes <id> <name> <text>",
        "action INC-9 @carol fix it": "unknown incident '9'",
    }
    for text, reason in wrong.items():
        said = _say(harness, text)
        assert reason in said, (text, said)
        assert "Unexpected error" not in said
    with session_scope(harness.rt.db) as session:
        assert notes_store.list_action_items(session, incident_id=1) == []
        assert notes_store.written_sections(session, incident_id=1) == {}
