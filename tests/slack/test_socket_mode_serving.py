"""`gpu-oncall serve --socket-mode`: Slack events over a Socket Mode WebSocket, no ingress.

Covers: with an app token and no signing secret the server starts, does not mount
/slack/events (nothing unverified is reachable over HTTP), connects through
apps.connections.open with the app token, acknowledges a slash-command envelope and answers
on its response_url; without Slack settings `--socket-mode` exits 2 naming what to set.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from servers.fake_slack import APP_TOKEN, TOKEN, FakeSlack
from servers.fake_socket_mode import FakeSocketMode
from servers.slack_harness import ALICE, ECC_SCENARIO, OPS

from bot.cli import main as cli
from bot.config import Settings, SlackSettings, StorageSettings
from bot.serving.app import RunningServer, create_app
from bot.wiring.runtime import open_runtime


@pytest.fixture
def socket_fake(fake_slack: FakeSlack) -> Iterator[FakeSocketMode]:
    sockets = FakeSocketMode().start()
    fake_slack.socket_url = sockets.url
    yield sockets
    sockets.stop()


def test_socket_mode_acknowledges_and_answers_a_command(
    tmp_path: Path, fake_slack: FakeSlack, socket_fake: FakeSocketMode
) -> None:
    settings = Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        slack=SlackSettings(bot_token=TOKEN, app_token=APP_TOKEN, api_url=fake_slack.api_url),
    )
    with open_runtime(settings, scenario_path=ECC_SCENARIO, fresh=True) as rt:
        app = create_app(settings, rt, socket_mode=True)
        server = RunningServer(app).start()
        assert app.slack is not None
        socket = app.slack.socket_mode()
        try:
            assert httpx.post(server.url + "/slack/events", content=b"x").status_code == 404
            socket.connect()
            envelope = socket_fake.send(
                "slash_commands",
                {
                    "command": "/gpu",
                    "text": "runbooks",
                    "user_id": ALICE,
                    "channel_id": OPS,
                    "response_url": fake_slack.response_url("socket-1"),
                },
            )
            assert socket_fake.wait_for_ack(envelope)["envelope_id"] == envelope
            assert app.slack.wait_idle(30)
            (reply,) = fake_slack.wait_for("response_url")
            assert "`ecc-storm`" in reply.text
            (opened,) = fake_slack.of("apps.connections.open")
            assert opened.method == "apps.connections.open"
        finally:
            socket.close()
            server.stop()


def test_socket_mode_without_slack_settings_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPU_ONCALL_STORAGE__URL", f"sqlite:///{tmp_path / 'oncall.db'}")
    code = cli.main(["serve", "--socket-mode", "--port", "0"])
    assert code == 2
    assert "--socket-mode needs Slack: set GPU_ONCALL_SLACK__BOT_TOKEN" in capsys.readouterr().err
