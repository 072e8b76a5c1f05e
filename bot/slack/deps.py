"""What every Slack handler needs: the runtime, the Web API client, the Slack settings, the run
pool and the user-group cache. Built once by `app.make_slack_bot`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from slack_sdk import WebClient

from bot.config import SlackSettings
from bot.slack.usergroups import UserGroups
from bot.slack.workers import TrackedExecutor
from bot.wiring.runtime import Runtime


class Reply(Protocol):
    """Answers the person who typed or clicked (bolt's `respond`, over the response_url)."""

    def __call__(
        self,
        *,
        text: str = "",
        blocks: Sequence[dict[str, Any]] | None = None,
        response_type: str | None = None,
        replace_original: bool | None = None,
    ) -> Any: ...


@dataclass(frozen=True)
class SlackDeps:
    rt: Runtime
    client: WebClient
    settings: SlackSettings
    runs: TrackedExecutor
    groups: UserGroups
    monotonic: Callable[[], float] = field(default=time.monotonic)
    """Throttles in-place updates; injectable so tests can decide when an update is due."""
