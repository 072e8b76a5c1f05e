"""Fixtures for the Slack tests: a fake Slack Web API and a factory that starts the bot's real
HTTP server against it with the policy a test needs (see `servers.slack_harness`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from servers.fake_slack import FakeSlack
from servers.slack_harness import BOB, CAROL, ECC_SCENARIO, SlackHarness, make_settings

from bot.config import PagesSettings
from bot.serving.app import RunningServer, create_app
from bot.wiring.runtime import open_runtime


@pytest.fixture
def fake_slack() -> Iterator[FakeSlack]:
    fake = FakeSlack(groups={"S0ONCALL": [BOB, CAROL]}).start()
    yield fake
    fake.stop()


HarnessFactory = Callable[..., SlackHarness]


@pytest.fixture
def start_bot(tmp_path: Path, fake_slack: FakeSlack) -> Iterator[HarnessFactory]:
    """Start the bot with policy settings (`approvers=[...]`, `dry_run=True`, ...) and Slack
    settings overrides (`slack={...}`) and the pages' settings (`pages=`)."""
    with ExitStack() as stack:

        def start(
            *,
            scenario: Path = ECC_SCENARIO,
            fresh: bool = True,
            slack: dict[str, Any] | None = None,
            pages: PagesSettings | None = None,
            **policy: Any,
        ) -> SlackHarness:
            settings = make_settings(tmp_path, fake_slack, slack=slack, **policy)
            if pages is not None:
                settings = settings.model_copy(update={"pages": pages})
            own = stack.enter_context(ExitStack())
            rt = own.enter_context(open_runtime(settings, scenario_path=scenario, fresh=fresh))
            app = create_app(settings, rt)
            server = RunningServer(app).start()
            own.callback(server.stop)
            return SlackHarness(rt=rt, app=app, server=server, fake=fake_slack, stack=own)

        yield start


@pytest.fixture
def harness(start_bot: HarnessFactory) -> SlackHarness:
    """The bot with the default policy (anyone approves; two-person rule for high risk)."""
    return start_bot()
