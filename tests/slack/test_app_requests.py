"""Slack requests over real HTTP into the bot's server (Slack mounted at /slack/events).

Covers: a bad signature and a stale timestamp get 401 and reach no listener; a signed command is
acknowledged with 200 and answered on its response_url; unknown verbs, invalid node names,
unknown nodes and unknown incidents get an ephemeral reply naming what is valid, and every
refused command is still acknowledged with 200; help,
runbooks and incidents answer ephemerally; a channel the bot is not in gets an invitation hint
and opens no incident; an unexpected failure answers with a reference id, never a traceback;
a revoked bot token or an unreachable Slack stops start-up with the setting to check.
"""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlencode

import pytest
from pydantic import SecretStr
from servers.fake_slack import FakeSlack
from servers.slack_harness import ALICE, OPS, SlackHarness, make_settings
from sqlmodel import select

from bot.errors import UserInputError
from bot.slack.app import make_slack_bot
from storage.db import session_scope
from storage.tables import Incident


def _command_body(text: str) -> str:
    return urlencode({"command": "/gpu", "text": text, "user_id": ALICE, "channel_id": OPS})


def test_bad_signature_is_rejected_with_401(harness: SlackHarness) -> None:
    response = harness.post(_command_body("help"), signature="v0=" + "0" * 64)
    assert response.status_code == 401
    harness.settle()
    assert harness.fake.of("response_url") == []


def test_stale_timestamp_is_rejected_with_401(harness: SlackHarness) -> None:
    stale = int(time.time()) - 10 * 60
    response = harness.post(_command_body("help"), timestamp=stale)
    assert response.status_code == 401
    harness.settle()
    assert harness.fake.of("response_url") == []


def test_signed_help_is_acknowledged_and_answered_ephemerally(harness: SlackHarness) -> None:
    name = harness.command("help")
    harness.settle()
    (reply,) = harness.replies(name)
    assert reply.body["response_type"] == "ephemeral"
    assert "/gpu diagnose <node>" in reply.text
    assert "/gpu ecc <target>" in reply.text  # a verb a runbook declares


def test_unknown_verb_replies_with_the_valid_verbs(harness: SlackHarness) -> None:
    name = harness.command("fix gpu-node-03")
    harness.settle()
    (reply,) = harness.replies(name)
    assert reply.body["response_type"] == "ephemeral"
    assert "unknown command 'fix'" in reply.text
    assert "diagnose, run, incidents" in reply.text


def test_every_refused_command_is_acknowledged(harness: SlackHarness) -> None:
    # A listener that fails after ack() must not reach bolt, whose runner then races on the
    # response it is returning (the request came back as a 404 "unhandled request").
    names = [harness.command(f"fix gpu-node-{n:02d}") for n in range(40)]
    harness.settle()
    for name in names:
        (reply,) = harness.replies(name)
        assert "unknown command 'fix'" in reply.text


def test_invalid_node_name_names_the_kubernetes_rule(harness: SlackHarness) -> None:
    name = harness.command("diagnose GPU_NODE_3")
    harness.settle()
    (reply,) = harness.replies(name)
    assert "invalid node name 'GPU_NODE_3'" in reply.text
    assert "lower-case letters" in reply.text
    assert harness.fake.of("chat.postMessage") == []


def test_unknown_node_names_the_closest_nodes_and_opens_nothing(harness: SlackHarness) -> None:
    name = harness.command("diagnose gpu-node-99")
    harness.settle()
    (reply,) = harness.replies(name)
    assert "unknown node 'gpu-node-99'" in reply.text and "closest: gpu-node-09" in reply.text
    with session_scope(harness.rt.db) as session:
        assert list(session.exec(select(Incident))) == []


def test_unknown_incident_points_to_the_list(harness: SlackHarness) -> None:
    name = harness.command("incident INC-404")
    harness.settle()
    (reply,) = harness.replies(name)
    assert "unknown incident '404'" in reply.text
    assert "/gpu incidents" in reply.text


def test_malformed_key_value_says_how_to_write_it(harness: SlackHarness) -> None:
    name = harness.command("run ecc-storm gpu-node-03")
    harness.settle()
    (reply,) = harness.replies(name)
    assert "'gpu-node-03' is not key=value" in reply.text
    assert "node=gpu-node-07" in reply.text


def test_runbooks_and_empty_incident_list(harness: SlackHarness) -> None:
    books, listing = harness.command("runbooks"), harness.command("incidents")
    harness.settle()
    assert "`ecc-storm`" in harness.replies(books)[0].text
    assert "GPUEccStorm" in harness.replies(books)[0].text
    assert "No open incidents" in harness.replies(listing)[0].text


def test_channel_without_the_bot_gets_an_invite_hint(
    harness: SlackHarness, fake_slack: FakeSlack
) -> None:
    fake_slack.not_member.add("C0PRIVATE")
    name = harness.command("diagnose gpu-node-03", channel="C0PRIVATE")
    harness.settle()
    (reply,) = harness.replies(name)
    assert "invite me first" in reply.text
    with session_scope(harness.rt.db) as session:
        assert list(session.exec(select(Incident))) == []


def test_unexpected_failure_shows_a_reference_not_a_traceback(harness: SlackHarness) -> None:
    # No other way to make the database fail mid-request: move a table from under the bot.
    with harness.rt.db.begin() as connection:
        connection.exec_driver_sql("ALTER TABLE incidents RENAME TO incidents_moved")
    name = harness.command("incidents")
    harness.settle()
    (reply,) = harness.replies(name)
    assert reply.text.startswith("Unexpected error (ref ")
    assert "log has details" in reply.text
    assert "Traceback" not in reply.text and "sqlite" not in reply.text.lower()


def test_wrong_bot_token_stops_startup_naming_the_setting(
    harness: SlackHarness, fake_slack: FakeSlack, tmp_path: Path
) -> None:
    settings = make_settings(tmp_path, fake_slack)
    settings.slack.bot_token = SecretStr("xoxb-revoked")
    with pytest.raises(UserInputError, match="GPU_ONCALL_SLACK__BOT_TOKEN") as exc:
        make_slack_bot(harness.rt, settings=settings)
    assert "invalid_auth" in str(exc.value) and "xoxb-revoked" not in str(exc.value)


def test_unreachable_slack_stops_startup_naming_the_setting(
    harness: SlackHarness, fake_slack: FakeSlack, tmp_path: Path
) -> None:
    settings = make_settings(tmp_path, fake_slack)
    settings.slack.api_url = "http://127.0.0.1:9/api/"  # the discard port: nothing listens
    with pytest.raises(UserInputError, match="cannot reach Slack at http://127.0.0.1:9/api/"):
        make_slack_bot(harness.rt, settings=settings)
