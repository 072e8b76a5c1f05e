"""Slack requests refused before their body is read (issue 20).

Covers: without Slack's signature headers, or with a stale or malformed timestamp, a request to
/slack/events is a 401 answered from its headers alone (its 9.9 MB body is never sent); one
declaring more than Slack's own size is a 413; a signed request is still handled (bolt checks
the signature once).
"""

from __future__ import annotations

import socket
import time

import pytest
from servers.slack_harness import SlackHarness

from bot.limits import SLACK_BODY_BYTES

WAIT = 30.0


def head_only(harness: SlackHarness, *headers: str, length: int) -> int:
    host, port = harness.server.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
        lines = ["POST /slack/events HTTP/1.1", "Host: x", f"Content-Length: {length}", *headers]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1])


@pytest.mark.parametrize(
    "headers",
    [
        (),
        ("X-Slack-Request-Timestamp: 1", "X-Slack-Signature: v0=" + "0" * 64),
        ("X-Slack-Request-Timestamp: abc", "X-Slack-Signature: v0=" + "0" * 64),
        (f"X-Slack-Request-Timestamp: {int(time.time())}", "X-Slack-Signature: nope"),
    ],
)
def test_unsigned_slack_request_is_401_before_its_body(
    harness: SlackHarness, headers: tuple[str, ...]
) -> None:
    assert head_only(harness, *headers, length=9_900_000) == 401


def test_a_slack_body_past_slacks_size_is_413_before_it_is_read(harness: SlackHarness) -> None:
    fresh = (f"X-Slack-Request-Timestamp: {int(time.time())}", "X-Slack-Signature: v0=" + "0" * 64)
    assert head_only(harness, *fresh, length=SLACK_BODY_BYTES + 1) == 413


def test_a_signed_command_is_still_answered(harness: SlackHarness) -> None:
    name = harness.command("help")
    harness.settle()
    assert harness.replies(name)
