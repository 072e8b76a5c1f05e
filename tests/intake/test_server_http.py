"""The HTTP layer of `gpu-oncall serve` (uvicorn + the bot's front end) on real sockets.

Covers: a chunked webhook and one without Content-Length get 411, before any body is read; a
body declared above the limit gets 413 and nothing is stored; the bearer scheme is
case-insensitive (`bearer`, `BEARER`); stalled uploads hold no handler,
so other requests are answered while they hang, and each is cut with 408 and a closed
connection after the read timeout; a connection that sends no request, or stalls in its
headers, is closed after the read timeout; 200 concurrent deliveries of one webhook on fresh
connections see no reset and store one alert and one incident; keep-alive carries several
requests on one HTTP/1.1 connection.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from servers.oncall import TOKEN, Bot, alert, row_counts, running_bot, webhook

from bot.config import ServerSettings, Settings

WAIT = 60.0


def _with_server(settings: Settings, **server: Any) -> Settings:
    fields = settings.server.model_dump() | server
    return settings.model_copy(update={"server": ServerSettings(**fields)})


@pytest.fixture
def start(bot_settings: Settings, scenario_dir: Path) -> Iterator[Any]:
    """Start the bot with ServerSettings overrides (`read_timeout_seconds=0.2`, ...)."""
    with ExitStack() as stack:

        def run(**server: Any) -> Bot:
            settings = _with_server(bot_settings, **server)
            scenario = scenario_dir / "ecc-dbe-storm.yaml"
            return stack.enter_context(running_bot(settings, scenario=scenario))

        yield run


def ecc_webhook(bot: Bot, **labels: str) -> dict[str, Any]:
    starts = bot.rt.clock.now() - timedelta(minutes=10)
    ecc = alert("GPUEccStorm", {"Hostname": "gpu-node-03", **labels}, starts_at=starts)
    return webhook([ecc])


def _connect(bot: Bot) -> socket.socket:
    host, port = bot.url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=WAIT)
    return sock


def _read_response(sock: socket.socket) -> tuple[int, bytes]:
    """Status and everything the server sent until it closed the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return int(data.split(b" ", 2)[1]), data


def test_chunked_webhook_gets_411(start: Any) -> None:
    bot = start()
    body = json.dumps(ecc_webhook(bot)).encode()
    response = bot.http.post(
        "/alerts",
        content=iter([body[:10], body[10:]]),  # an iterator: httpx sends it chunked
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert response.status_code == 411
    assert "Content-Length required" in response.json()["error"]
    assert row_counts(bot.rt.db)["alerts"] == 0


def test_webhook_without_content_length_gets_411(start: Any) -> None:
    bot = start()
    with _connect(bot) as sock:
        sock.sendall(
            f"POST /alerts HTTP/1.1\r\nHost: bot\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode()
        )
        status, _ = _read_response(sock)
    assert status == 411


def test_body_declared_above_the_limit_gets_413_unread(start: Any) -> None:
    bot = start(max_body_bytes=4096)
    with _connect(bot) as sock:
        sock.sendall(
            b"POST /alerts HTTP/1.1\r\nHost: bot\r\nContent-Length: 5000000\r\n"
            + f"Authorization: Bearer {TOKEN}\r\n\r\n".encode()
        )
        status, data = _read_response(sock)  # answered without sending the body
    assert status == 413
    assert b"exceeds the limit of 4096 bytes" in data
    assert row_counts(bot.rt.db)["alerts"] == 0


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer"])
def test_bearer_scheme_is_case_insensitive(start: Any, scheme: str) -> None:
    bot = start()
    response = bot.http.post(
        "/alerts", json=ecc_webhook(bot), headers={"Authorization": f"{scheme} {TOKEN}"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["incidents"] == ["INC-1"]


def test_wrong_token_in_lower_case_is_still_401(start: Any) -> None:
    bot = start()
    response = bot.http.post(
        "/alerts", json=ecc_webhook(bot), headers={"Authorization": "bearer nope"}
    )
    assert response.status_code == 401


def _stall(bot: Bot) -> socket.socket:
    """Headers and part of a webhook body, then nothing."""
    sock = _connect(bot)
    sock.sendall(
        b"POST /alerts HTTP/1.1\r\nHost: bot\r\nContent-Type: application/json\r\n"
        + f"Authorization: Bearer {TOKEN}\r\nContent-Length: 1000\r\n\r\n".encode()
        + b'{"version": "4", '
    )
    return sock


def test_stalled_uploads_hold_up_no_other_request(start: Any) -> None:
    bot = start(max_concurrency=1, read_timeout_seconds=600)
    stalled = [_stall(bot) for _ in range(4)]
    try:
        assert bot.http.get("/healthz").status_code == 200
        assert bot.post_alerts(ecc_webhook(bot)).status_code == 200
        for sock in stalled:  # still waiting for their bodies: nothing answered yet
            sock.setblocking(False)
            with pytest.raises(BlockingIOError):
                sock.recv(1)
    finally:
        for sock in stalled:
            sock.close()


def test_stalled_upload_is_cut_after_the_read_timeout(start: Any) -> None:
    bot = start(read_timeout_seconds=0.2)
    with _stall(bot) as sock:
        status, data = _read_response(sock)  # returns once the server closed the connection
    assert status == 408
    assert b"not received within 0.2 s" in data
    assert row_counts(bot.rt.db)["alerts"] == 0


@pytest.mark.parametrize("sent", [b"", b"POST /alerts HTTP/1.1\r\nHost: bot\r\n"])
def test_slow_headers_are_cut_after_the_read_timeout(start: Any, sent: bytes) -> None:
    bot = start(read_timeout_seconds=0.2)
    with _connect(bot) as sock:
        sock.sendall(sent)
        assert sock.recv(65536) == b""  # closed by the server, with nothing said
    assert bot.http.get("/healthz").status_code == 200


def test_keep_alive_carries_several_requests_on_one_connection(start: Any) -> None:
    bot = start()
    with _connect(bot) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: bot\r\n\r\n" * 3)
        data = b""
        while data.count(b'{"status": "ok"}') < 3:
            chunk = sock.recv(65536)
            assert chunk, f"connection closed after {data!r}"
            data += chunk
    assert data.count(b"HTTP/1.1 200 OK") == 3


def test_200_concurrent_redeliveries_store_one_alert_without_a_reset(start: Any) -> None:
    bot = start()
    body = json.dumps(ecc_webhook(bot)).encode()
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    together = threading.Barrier(200, timeout=WAIT)

    def deliver(_: int) -> int | str:
        together.wait()
        try:  # a fresh connection each, as 200 Alertmanager retries would open
            answer = httpx.post(bot.url + "/alerts", content=body, headers=headers, timeout=WAIT)
        except httpx.TransportError as exc:
            return type(exc).__name__
        return answer.status_code

    with ThreadPoolExecutor(max_workers=200) as pool:
        outcomes = list(pool.map(deliver, range(200)))
    assert outcomes == [200] * 200
    bot.settle()
    counts = row_counts(bot.rt.db)
    assert (counts["alerts"], counts["incidents"], counts["runs"]) == (1, 1, 1)
