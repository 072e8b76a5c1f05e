"""What every Slack handler needs: the ports (the database, the clock, the run engine, the
runbook catalog, the cluster), the bot's settings, the Web API client, the Slack settings, the
run pool and the user-group cache. Built once by `app.make_slack_bot` from the open runtime.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from slack_sdk import WebClient
from sqlalchemy import Engine

from bot.actions.policy import Policy
from bot.clock import Clock
from bot.config import Settings, SlackSettings
from bot.diagnosis.signatures import LogCatalog
from bot.engine.catalog import RunbookCatalog
from bot.engine.running import RunEngine
from bot.slack.usergroups import UserGroups
from bot.slack.workers import TrackedExecutor
from bot.wiring.runtime import Runtime
from integrations.cluster import Cluster


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
    db: Engine
    """The database: `storage.db.session_scope(deps.db)` is one transaction."""
    clock: Clock
    engine: RunEngine
    catalog: RunbookCatalog
    cluster: Cluster
    policy: Policy
    log_catalog: LogCatalog
    config: Settings
    """The bot's settings (pages, evidence limits, timeouts, the approver policy)."""
    rt: Runtime
    """The whole runtime, read by `approving.py` alone until the approval use case it is
    carved into takes its place (tests/architecture/test_presentation_ports.py)."""
    client: WebClient
    settings: SlackSettings
    runs: TrackedExecutor
    groups: UserGroups
    monotonic: Callable[[], float] = field(default=time.monotonic)
    """Throttles in-place updates; injectable so tests can decide when an update is due."""
