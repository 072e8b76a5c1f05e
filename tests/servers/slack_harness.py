"""`SlackHarness`: the bot's real HTTP server (`server.create_app`, Slack mounted at
/slack/events) on 127.0.0.1 over the simulated fleet, its Web API client pointed at the fake
Slack (`servers.fake_slack`); it sends requests signed with the signing secret, as Slack does,
and waits for the work they start by joining the bot's pools (bounded; no sleeps).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
from servers.fake_slack import TOKEN, Call, FakeSlack
from slack_sdk.signature import SignatureVerifier

from bot.config import PolicySettings, Settings, SlackSettings, StorageSettings
from bot.serving.app import OncallApp, RunningServer
from bot.slack.app import EVENTS_PATH, SlackBot
from bot.wiring.runtime import Runtime
from bot.wiring.simulation import simulated_webhook as _webhook
from simulator import SCENARIO_DIR

SECRET = "test-signing-secret"
FORM = "application/x-www-form-urlencoded"
WAIT = 60.0
ALICE, BOB, CAROL = "U0ALICE", "U0BOB", "U0CAROL"
OPS, INCIDENTS = "C0OPS", "C0INCIDENTS"
ECC_SCENARIO = Path(SCENARIO_DIR) / "ecc-dbe-storm.yaml"


@dataclass
class SlackHarness:
    """The running bot plus a Slack stand-in: signed requests in, recorded Web API calls out."""

    rt: Runtime
    app: OncallApp
    server: RunningServer
    fake: FakeSlack
    stack: ExitStack
    secret: str = SECRET
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def stop(self) -> None:
        """Stop the server and close the runtime (the simulated fleet's state is saved)."""
        self.stack.close()

    @property
    def bot(self) -> SlackBot:
        assert self.app.slack is not None
        return self.app.slack

    @property
    def events_url(self) -> str:
        return self.server.url + EVENTS_PATH

    # -- requests Slack would send -------------------------------------------------------------
    def post(
        self, body: str, *, timestamp: int | None = None, signature: str | None = None
    ) -> httpx.Response:
        ts = str(int(time.time()) if timestamp is None else timestamp)
        sig = signature or SignatureVerifier(self.secret).generate_signature(
            timestamp=ts, body=body
        )
        headers = {
            "Content-Type": FORM,
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": sig,
        }
        return httpx.post(self.events_url, content=body, headers=headers, timeout=WAIT)

    def command(self, text: str, *, user: str = ALICE, channel: str = OPS) -> str:
        """Send `/gpu text`; returns the response_url name its replies are posted to."""
        name = f"cmd-{next(self._ids)}"
        body = urlencode(
            {
                "token": "unused",
                "team_id": "T0001",
                "team_domain": "test",
                "channel_id": channel,
                "channel_name": "ops",
                "user_id": user,
                "user_name": user.lower(),
                "command": "/gpu",
                "text": text,
                "api_app_id": "A0001",
                "response_url": self.fake.response_url(name),
                "trigger_id": "1.2.3",
            }
        )
        response = self.post(body)
        assert response.status_code == 200, response.text
        return name

    def click(self, kind: str, message: Call, *, user: str) -> str:
        """Click the `kind` button (approve, reject, dry_run, approve:ACTION) of a message."""
        button = find_button(message, kind)
        name = f"click-{next(self._ids)}"
        channel, ts = str(message.body["channel"]), str(message.body["ts"])
        payload = {
            "type": "block_actions",
            "user": {
                "id": user,
                "username": user.lower(),
                "name": user.lower(),
                "team_id": "T0001",
            },
            "api_app_id": "A0001",
            "token": "unused",
            "container": {"type": "message", "message_ts": ts, "channel_id": channel},
            "trigger_id": "1.2.3",
            "team": {"id": "T0001", "domain": "test"},
            "channel": {"id": channel, "name": "ops"},
            "message": {"ts": ts, "text": str(message.body.get("text", ""))},
            "response_url": self.fake.response_url(name),
            "actions": [{**button, "block_id": "approval", "action_ts": "1700000001.000001"}],
        }
        response = self.post(urlencode({"payload": json.dumps(payload)}))
        assert response.status_code == 200, response.text
        return name

    def alert(self, status: str = "firing") -> httpx.Response:
        """The scenario's alert, as Alertmanager posts it to `POST /alerts`."""
        trigger = self.rt.scenario.trigger.alert
        assert trigger is not None
        starts = self.rt.fleet.t0 + self.rt.scenario.faults[0].start
        ends = self.rt.clock.now() if status == "resolved" else None
        body = _webhook(
            status, trigger.alertname, dict(trigger.labels), starts_at=starts, ends_at=ends
        )
        return httpx.post(self.server.url + "/alerts", json=body, timeout=WAIT)

    def triage_alert(self) -> str:
        """The scenario's alert, triaged to its approval; the ts of the triage message."""
        assert self.alert("firing").status_code == 200
        self.settle()
        (post,) = self.triage_posts(INCIDENTS)
        return self.ts_of(post)

    # -- waiting and reading -------------------------------------------------------------------
    def settle(self) -> None:
        """Wait (bounded) until every request, run and triage job has finished."""
        for _ in range(3):  # a click can queue a run that queues nothing more: a few rounds
            assert self.app.workers.wait_idle(WAIT)
            assert self.bot.wait_idle(WAIT)

    def replies(self, name: str) -> list[Call]:
        """What was posted to a request's response_url (ephemeral replies)."""
        return [c for c in self.fake.of("response_url") if c.path.endswith("/" + name)]

    def message(self, ts: str) -> Call:
        """The latest version of the message `ts`: its last chat.update, else its post."""
        updates = [c for c in self.fake.of("chat.update") if c.body.get("ts") == ts]
        if updates:
            return updates[-1]
        posted = [c for c in self.fake.of("chat.postMessage") if _posted_ts(self.fake, c) == ts]
        return posted[-1]

    def triage_posts(self, channel: str) -> list[Call]:
        """Top-level messages posted in `channel` (not thread replies)."""
        return [
            c
            for c in self.fake.of("chat.postMessage")
            if c.body.get("channel") == channel and not c.body.get("thread_ts")
        ]

    def thread(self, ts: str) -> list[Call]:
        """Replies in the thread of `ts`, less the verdict's details (`details`)."""
        replies = [c for c in self.fake.of("chat.postMessage") if c.body.get("thread_ts") == ts]
        return [c for c in replies if not _is_details(c)]

    def details(self, ts: str) -> list[Call]:
        """The details replies (findings, evidence, ruled-out layers) in the thread of `ts`."""
        replies = [c for c in self.fake.of("chat.postMessage") if c.body.get("thread_ts") == ts]
        return [c for c in replies if _is_details(c)]

    def ts_of(self, post: Call) -> str:
        return _posted_ts(self.fake, post)


def _is_details(call: Call) -> bool:
    blocks = call.blocks
    return bool(blocks) and blocks[0].get("block_id") == "details"


def _posted_ts(fake: FakeSlack, post: Call) -> str:
    """The ts the fake gave a chat.postMessage: posts are numbered in arrival order."""
    index = fake.of("chat.postMessage").index(post) + 1
    return f"1700000000.{index:06d}"


def find_button(message: Call, kind: str) -> dict[str, Any]:
    """`approve`, `reject`, `dry_run`, `approve:ACTION` for one action's own button, or
    `drain_now` / `drain_cancel` for a drain that waits for the next checkpoint."""
    ids = {"approve": "gpu_approve", "reject": "gpu_reject", "dry_run": "gpu_dry_run",
           "drain_now": "gpu_drain_now", "drain_cancel": "gpu_drain_cancel"}  # fmt: skip
    head, _, action = kind.partition(":")
    action_id = f"gpu_approve_only:{action}" if action else ids[head]
    for block in message.blocks:
        for element in [*block.get("elements", []), block.get("accessory") or {}]:
            if element.get("action_id") == action_id:
                return dict(element)
    raise AssertionError(f"no {kind} button in the message (blocks: {message.blocks})")


def make_settings(
    tmp_path: Path, fake: FakeSlack, *, slack: dict[str, Any] | None = None, **policy: Any
) -> Settings:
    """Settings for a bot talking to `fake`: every step updates the message unless `slack`
    overrides it; `policy` fields go to PolicySettings."""
    return Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        slack=SlackSettings(
            bot_token=TOKEN,
            signing_secret=SECRET,
            api_url=fake.api_url,
            incident_channel=INCIDENTS,
            **({"update_interval_seconds": 0.0} | (slack or {})),
        ),
        policy=PolicySettings(**policy),
    )
