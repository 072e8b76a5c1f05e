"""The Slack trust boundary: nothing a request that failed verification names is ever acted on.

Covers, over real HTTP into the bot's server: an empty, non-numeric, fractional, signed,
padded or non-ASCII `X-Slack-Request-Timestamp`, and an empty, truncated, non-hex or wrong-version
`X-Slack-Signature` (each with a body whose `response_url` points at a local listener) get 401;
the listener receives nothing and the fake Slack Web API receives nothing. The same malformed
request dispatched straight into the bolt app (past the HTTP check, so bolt's own verification
raises and its error handler runs) still sends nothing. A signed request's failure is still
answered on its response_url (the boundary does not silence trusted requests).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from servers.slack_harness import ALICE, FORM, OPS, SECRET, SlackHarness
from slack_bolt.request import BoltRequest
from slack_sdk.signature import SignatureVerifier

from bot.slack.failures import trusted_reply
from bot.slack.verifying import TRUSTED, is_signed


class Listener:
    """Any URL an attacker might put in `response_url`: records every request it gets."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                listener.requests.append(("POST", self.path))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join()
        self.server.server_close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    running = Listener()
    yield running
    running.stop()


def _body(response_url: str) -> str:
    return urlencode(
        {
            "command": "/gpu",
            "text": "incidents",
            "user_id": ALICE,
            "channel_id": OPS,
            "response_url": response_url,
        }
    )


def _now() -> str:
    return str(int(time.time()))


def _sign(timestamp: str, body: str) -> str:
    return SignatureVerifier(SECRET).generate_signature(timestamp=timestamp, body=body) or ""


BAD_TIMESTAMPS = ["", "abc", "12.5", "-1", "1e9", "0x10", "１７００００００００", "9" * 40]
BAD_SIGNATURES = ["", "v0=", "v0=" + "z" * 64, "v1=" + "0" * 64, "v0=" + "0" * 63, "garbage"]


def _assert_nothing_sent(harness: SlackHarness, listener: Listener, calls_before: int) -> None:
    harness.settle()
    assert listener.requests == []
    assert len(harness.fake.calls) == calls_before  # the fake Web API got no call either


@pytest.mark.parametrize("timestamp", BAD_TIMESTAMPS)
def test_malformed_timestamp_is_401_and_nothing_is_sent(
    harness: SlackHarness, listener: Listener, timestamp: str
) -> None:
    before = len(harness.fake.calls)
    body = _body(listener.url)
    signature = _sign(timestamp, body) if timestamp else "v0=" + "0" * 64
    headers = {  # bytes, so a non-ASCII value goes out as sent
        "Content-Type": FORM,
        "X-Slack-Request-Timestamp": timestamp.encode(),
        "X-Slack-Signature": signature.encode(),
    }
    response = httpx.post(harness.events_url, content=body, headers=headers, timeout=30)
    assert response.status_code == 401
    _assert_nothing_sent(harness, listener, before)


@pytest.mark.parametrize("signature", BAD_SIGNATURES)
def test_malformed_signature_is_401_and_nothing_is_sent(
    harness: SlackHarness, listener: Listener, signature: str
) -> None:
    before = len(harness.fake.calls)
    headers = {
        "Content-Type": FORM,
        "X-Slack-Request-Timestamp": _now(),
        "X-Slack-Signature": signature,
    }
    response = httpx.post(
        harness.events_url, content=_body(listener.url), headers=headers, timeout=30
    )
    assert response.status_code == 401
    _assert_nothing_sent(harness, listener, before)


def test_missing_headers_are_401_and_nothing_is_sent(
    harness: SlackHarness, listener: Listener
) -> None:
    before = len(harness.fake.calls)
    response = httpx.post(
        harness.events_url, content=_body(listener.url), headers={"Content-Type": FORM}
    )
    assert response.status_code == 401
    _assert_nothing_sent(harness, listener, before)


@pytest.mark.parametrize("timestamp", ["", "abc"])
def test_bolt_error_handler_ignores_an_unverified_response_url(
    harness: SlackHarness, listener: Listener, timestamp: str
) -> None:
    # Straight into bolt, past the HTTP check: its own verification raises on the timestamp
    # and the error handler runs with the request's `respond`; it must not use it.
    before = len(harness.fake.calls)
    body = _body(listener.url)
    request = BoltRequest(
        body=body,
        headers={
            "content-type": FORM,
            "x-slack-request-timestamp": timestamp,
            "x-slack-signature": "v0=" + "0" * 64,
        },
    )
    response = harness.bot.app.dispatch(request)
    assert response.status >= 400
    _assert_nothing_sent(harness, listener, before)


def test_a_signed_requests_failure_is_still_answered(harness: SlackHarness) -> None:
    # No other way to make the database fail mid-request: move a table from under the bot.
    with harness.rt.db.begin() as connection:
        connection.exec_driver_sql("ALTER TABLE incidents RENAME TO incidents_moved")
    name = harness.command("incidents")
    harness.settle()
    (reply,) = harness.replies(name)
    assert reply.text.startswith("Unexpected error (ref ")


def test_only_a_verified_context_gets_a_reply() -> None:
    class Respond:
        response_url = "http://127.0.0.1:9/hook"

        def __call__(self, **kwargs: Any) -> None:
            raise AssertionError("must not be called")

    assert trusted_reply(Respond(), {}) is None
    assert trusted_reply(Respond(), {TRUSTED: "yes"}) is None
    assert trusted_reply(None, {TRUSTED: True}) is None
    assert trusted_reply(Respond(), {TRUSTED: True}) is not None


@pytest.mark.parametrize("timestamp", [*BAD_TIMESTAMPS, None])
def test_is_signed_never_raises_on_malformed_input(timestamp: str | None) -> None:
    body = b"a=b"
    assert not is_signed(
        body, timestamp=timestamp, signature="v0=" + "0" * 64, secret=SECRET, now=time.time()
    )
    now = _now()
    good = _sign(now, body.decode())
    assert is_signed(body, timestamp=now, signature=good, secret=SECRET, now=time.time())
