"""The incident page link in Slack messages (`pages.base_url`).

Covers: with a page URL (`base_url` + `/incidents/INC-N`, a trailing slash ignored) the triage
message links the incident's page and says how to open it under each `pages.auth` mode; without
one no link is shown; the postmortem
upload's comment names the live page only when there is one.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from bot.config import PagesSettings
from bot.incidents.views import IncidentView
from bot.slack import messages
from bot.slack.blocks import TriageView, triage_blocks

URL = "https://oncall.example.com/incidents/INC-7"


def view() -> TriageView:
    incident = IncidentView(
        id=7,
        runbook="ecc-storm",
        target="gpu-node-03",
        target_kind="node",
        severity="critical",
        title="ECC storm",
        state="triaging",
        created_at=datetime(2026, 3, 1, tzinfo=UTC),
    )
    return TriageView(incident=incident, runbook_title="ECC storm", requester="alertmanager")


def texts(blocks: list[dict[str, object]]) -> str:
    return repr(blocks)


def test_the_triage_message_links_the_incident_page_when_configured() -> None:
    url = PagesSettings(base_url="https://oncall.example.com/").incident_url("INC-7")
    assert url == URL
    linked = triage_blocks(replace(view(), page_url=url))
    assert f"<{URL}|incident page> (needs the pages' bearer token" in texts(linked)
    plain = triage_blocks(view())
    assert "oncall.example.com" not in texts(plain)
    assert PagesSettings().incident_url("INC-7") is None


def test_the_link_says_how_the_pages_ask_who_is_reading() -> None:
    """Next to the link, what the pages accept (`pages.auth`): a signed link says until when it
    opens; with token auth but no token a browser gets 401, and the link says so and names the
    settings that let a browser in."""
    until = datetime(2026, 3, 1, 7, 0, tzinfo=UTC)
    said = {
        auth: texts(triage_blocks(replace(view(), page_url=URL, page_auth=auth, page_until=until)))
        for auth in ("token", "proxy", "none", "signed")
    }
    assert "signed link, opens this page until 07:00 UTC" in said["signed"]
    assert "401 until GPU_ONCALL_PAGES__TOKEN or __AUTH=proxy is set" in said["token"]
    assert f"<{URL}|incident page> (sign in through the team's single sign-on)" in said["proxy"]
    assert messages.where_details(URL, "none", thread=False) == f"<{URL}|incident page>"
    assert f"<{URL}|incident page>" in said["none"]
    assert "401" not in said["proxy"] + said["none"]


def test_the_postmortem_comment_names_the_live_page_only_when_there_is_one() -> None:
    assert f"<{URL}|INC-7>" in messages.postmortem_comment("INC-7", "ECC storm", url=URL)
    assert "live page" not in messages.postmortem_comment("INC-7", "ECC storm")
