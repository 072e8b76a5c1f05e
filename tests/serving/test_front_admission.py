"""Unauthenticated memory exhaustion (issue 20): the front decides from the request line and
headers, before reading a byte of body, what each request may send.

Covers, on the real server (uvicorn + Starlette + the guard) over loopback sockets: a GET to
/healthz, /metrics or /incidents declaring a 9.9 MB body is refused with 413 without the body
being sent (it used to be buffered in full, for every connection); an unknown path is a 404
before any body; a webhook without the token is a 401 before its body; a Slack request without
fresh signature headers is a 401 before its body, and one declaring more than Slack's size a
413; a request whose declared body does not fit in the bytes-in-flight budget while another
holds it is a 503 with Retry-After, and is taken once the first is done; past
`max_connections` a request gets 503 at once. On SQLite, webhooks are stored one at a time:
one that cannot have its turn within the wait is a 503 (retry) and stores nothing, and is
stored once the turn is free (waiting in SQLite's busy handler instead made the webhook p99
under the hostile load of bench/serve_load.py).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import SecretStr
from servers.oncall import TOKEN, Bot, alert, row_counts, running_bot, webhook

from bot.config import ServerSettings, Settings, StorageSettings
from bot.limits import SLACK_BODY_BYTES
from bot.serving.app import WriterTurns
from storage.engines import BUSY_TIMEOUT_MS

WAIT = 30.0
HUGE = 9_900_000


@pytest.fixture(scope="module")
def bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bot]:
    from simulator import SCENARIO_DIR

    tmp = tmp_path_factory.mktemp("front")
    settings = Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp / 'oncall.db'}"),
        server=ServerSettings(
            token=SecretStr(TOKEN), workers=1, max_bytes_in_flight=2 * 1024 * 1024,
            max_connections=40,
        ),
    )
    with running_bot(settings, scenario=Path(SCENARIO_DIR) / "ecc-dbe-storm.yaml") as running:
        yield running


def connect(bot: Bot) -> socket.socket:
    host, port = bot.url.removeprefix("http://").rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=WAIT)


def head_only(bot: Bot, method: str, path: str, *headers: str, length: int = HUGE) -> bytes:
    """Send a request's head declaring `length` body bytes, none of them; the answer (the
    server must answer without the body, else the socket times out and the test fails)."""
    with connect(bot) as sock:
        lines = [f"{method} {path} HTTP/1.1", "Host: x", f"Content-Length: {length}", *headers]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        return read_all(sock)


def read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


@pytest.mark.parametrize("path", ["/healthz", "/metrics", "/readyz"])
def test_a_body_on_a_get_route_is_refused_before_it_is_read(bot: Bot, path: str) -> None:
    answer = head_only(bot, "GET", path)
    assert status(answer) == 413
    assert b"takes no request body" in answer


@pytest.mark.parametrize("path", ["/incidents", "/incidents/INC-1"])
def test_the_pages_authenticate_before_any_body(bot: Bot, path: str) -> None:
    answer = head_only(bot, "GET", path)
    assert status(answer) == 401
    assert b"bearer token for the incident pages" in answer


def test_an_unknown_path_is_404_before_its_body(bot: Bot) -> None:
    assert status(head_only(bot, "POST", "/nope")) == 404


def test_a_webhook_without_the_token_is_401_before_its_body(bot: Bot) -> None:
    assert status(head_only(bot, "POST", "/alerts")) == 401


def test_bytes_in_flight_are_capped_across_requests(bot: Bot) -> None:
    auth = f"Authorization: Bearer {TOKEN}"
    with connect(bot) as holder:
        size = 1_500_000  # declared, its body not sent yet: it holds the budget
        lines = ["POST /alerts HTTP/1.1", "Host: x", f"Content-Length: {size}", auth]
        holder.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        refused = head_only(bot, "POST", "/alerts", auth, length=size)
        assert status(refused) == 503
        assert b"Retry-After: 1" in refused or b"retry-after: 1" in refused
        holder.sendall(b" " * size)
        assert status(read_all(holder)) == 400  # read in full, then refused as not JSON
    answer = head_only(bot, "POST", "/alerts", auth, length=0)  # the budget is free again
    assert status(answer) == 400


def test_connections_past_the_cap_get_503(bot: Bot) -> None:
    with ExitStack() as stack:
        idle = [stack.enter_context(connect(bot)) for _ in range(40)]
        deadline = time.monotonic() + WAIT  # the server accepts them from its backlog
        while time.monotonic() < deadline:
            with connect(bot) as sock:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if status(read_all(sock)) == 503:
                    break
        else:
            pytest.fail("no 503 past max_connections")
        assert len(idle) == 40
    with connect(bot) as sock:  # the idle ones closed: served again
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert status(read_all(sock)) == 200


def test_slack_size_is_its_own(bot: Bot) -> None:
    # No Slack app in this bot: /slack/events is an unknown path, refused before its body.
    assert status(head_only(bot, "POST", "/slack/events", length=SLACK_BODY_BYTES + 1)) == 404


def test_sqlite_webhooks_take_turns(bot: Bot) -> None:
    """A webhook waits for its turn; one that does not get it within the wait goes on to the
    database (whose busy timeout decides), so turns never refuse a webhook themselves."""
    app = bot.server.app
    assert app.webhook_turns.one_at_a_time  # the bot runs on SQLite
    assert app.webhook_turns.wait_seconds == BUSY_TIMEOUT_MS / 1000
    body = webhook([alert("TurnProbe", {"instance": "turn-1"}, starts_at=datetime.now(UTC))])
    before = row_counts(bot.rt.db)["alerts"]
    shipped = app.webhook_turns
    app.webhook_turns = WriterTurns(one_at_a_time=True, wait_seconds=0.2)  # bounds the test
    try:
        with app.webhook_turns.take() as held:  # another webhook holds the turn, not the database
            assert held
            assert bot.post_alerts(body).status_code == 200
            assert row_counts(bot.rt.db)["alerts"] == before + 1
        with app.webhook_turns.take() as held:
            assert held  # the late webhook gave the turn back (it never took it)
    finally:
        app.webhook_turns = shipped


def test_other_backends_take_no_turns() -> None:
    turns = WriterTurns(one_at_a_time=False, wait_seconds=0.0)
    with turns.take() as first, turns.take() as second:
        assert first and second
