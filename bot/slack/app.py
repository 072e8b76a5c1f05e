"""The Slack app: a bolt `App` over the runtime, served over HTTP (mounted at `/slack/events`) or
Socket Mode, with one error handler.

Tokens and the signing secret come from `SlackSettings` (SecretStr, read here once, never
logged). Over HTTP a request is handed to bolt the way bolt's own Starlette adapter does it (one
`BoltRequest`, bolt's one signature check), after its signature headers were checked for form
and freshness before the body was even read (`verifying.py`: missing, malformed or older than
five minutes gets 401); the error handler replies only to requests that passed verification.
Listeners acknowledge at once and run on bolt's executor (`process_before_response=False`: a
long-running server, not a FaaS); bolt's lazy listeners are not used because they only log their
exceptions, which would bypass the one error handler below.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr
from slack_bolt import App, BoltContext, BoltResponse, Respond
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.adapter.starlette.handler import to_bolt_request, to_starlette_response
from slack_bolt.error import BoltError
from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from bot.config import Settings
from bot.errors import UserInputError
from bot.slack import classify
from bot.slack.approving import Approvals
from bot.slack.deps import SlackDeps
from bot.slack.failures import report_failure, trusted_reply
from bot.slack.listeners import register
from bot.slack.replying import Replies
from bot.slack.triaging import LiveTriage, TriageMessages
from bot.slack.usergroups import UserGroups
from bot.slack.verifying import TRUSTED
from bot.slack.workers import TrackedExecutor, wait_idle
from bot.wiring.runtime import Runtime

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

logger = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
LISTENER_THREADS = 8


@dataclass
class SlackBot:
    """The bolt app and what serves it; `notify_incident` is the hook for alert intake."""

    app: App
    deps: SlackDeps
    messages: TriageMessages
    listeners: TrackedExecutor
    signing_secret: str = ""

    def starlette_endpoint(self, pool: Executor) -> Callable[[Request], Awaitable[Response]]:
        """The Starlette endpoint for `POST /slack/events`: the body becomes one `BoltRequest`
        (bolt's Starlette adapter), dispatched on `pool`, never on the event loop."""
        app = self.app

        async def endpoint(request: Request) -> Response:
            bolt_request = to_bolt_request(request, await request.body())
            loop = asyncio.get_running_loop()
            return to_starlette_response(await loop.run_in_executor(pool, app.dispatch,
                                                                    bolt_request))

        return endpoint

    def socket_mode(self) -> SocketMode:
        """A Socket Mode connection (no public ingress): `.connect()`, later `.close()`."""
        token = _secret(self.deps.settings.app_token, "GPU_ONCALL_SLACK__APP_TOKEN", "Socket Mode")
        return SocketMode(SocketModeHandler(self.app, token, web_client=self.deps.client))

    def notify_incident(self, incident_id: int) -> LiveTriage | None:
        """Post a newly opened (alert-triggered) incident to its routed channel and return the
        live message (None: no channel configured, or Slack unreachable; the timeline says so).
        Pass `live.on_step` to `RunEngine.start`, then call `live.finish(outcome)`."""
        return self.messages.notify_incident(incident_id)

    def refresh_incident(self, incident_id: int) -> None:
        """Re-render an incident's live messages (after its alert resolved, for example)."""
        self.messages.refresh_incident(incident_id)

    # The hooks the alert intake's TriageWorkers call (bot.work.dispatching.TriageHooks).
    incident_opened = notify_incident
    incident_resolved = refresh_incident

    def wait_idle(self, timeout: float) -> bool:
        """Wait for every acknowledged request and its run to finish (tests, shutdown)."""
        return wait_idle([self.listeners, self.deps.runs], timeout=timeout)

    def close(self) -> None:
        self.listeners.shutdown(wait=True)
        self.deps.runs.shutdown(wait=True)


class SocketMode:
    """Bolt's built-in Socket Mode handler, typed: connect without blocking, close at shutdown."""

    def __init__(self, handler: SocketModeHandler) -> None:
        self.handler = handler

    def connect(self) -> None:
        self.handler.connect()  # type: ignore[no-untyped-call]

    def close(self) -> None:
        self.handler.close()  # type: ignore[no-untyped-call]


def make_web_client(settings: Settings) -> WebClient:
    """The Web API client: bot token, base URL and timeout from settings; retries on 429."""
    slack = settings.slack
    client = WebClient(
        token=_secret(slack.bot_token, "GPU_ONCALL_SLACK__BOT_TOKEN", "Slack"),
        base_url=slack.api_url if slack.api_url.endswith("/") else slack.api_url + "/",
        timeout=max(1, round(settings.timeouts.http_seconds)),
    )
    client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=2))
    return client


def make_slack_bot(
    rt: Runtime,
    *,
    settings: Settings,
    client: WebClient | None = None,
    socket_mode: bool = False,
    monotonic: Callable[[], float] = time.monotonic,
) -> SlackBot:
    """Everything Slack needs over an open runtime. HTTP mode needs the signing secret."""
    slack = settings.slack
    client = client or make_web_client(settings)
    signing_secret = (
        ""
        if socket_mode and slack.signing_secret is None
        else _secret(
            slack.signing_secret, "GPU_ONCALL_SLACK__SIGNING_SECRET", "HTTP mode (or --socket-mode)"
        )
    )
    deps = SlackDeps(
        db=rt.db,
        clock=rt.clock,
        engine=rt.engine,
        catalog=rt.catalog,
        cluster=rt.deps.cluster,
        policy=rt.deps.policy,
        log_catalog=rt.deps.log_catalog,
        config=rt.settings,
        rt=rt,
        client=client,
        settings=slack,
        runs=TrackedExecutor(workers=slack.workers, name="slack-run"),
        groups=UserGroups(client, ttl=slack.usergroup_cache_seconds, monotonic=monotonic),
        monotonic=monotonic,
    )
    messages = TriageMessages(deps)
    listeners = TrackedExecutor(workers=LISTENER_THREADS, name="slack-listener")
    app = build_app(deps, messages=messages, signing_secret=signing_secret, executor=listeners)
    return SlackBot(
        app=app,
        deps=deps,
        messages=messages,
        listeners=listeners,
        signing_secret=signing_secret,
    )


def build_app(
    deps: SlackDeps,
    *,
    messages: TriageMessages,
    signing_secret: str,
    executor: TrackedExecutor,
) -> App:
    """The bolt App with the `/gpu` and button listeners and the one error handler."""
    try:
        app = App(
            client=deps.client,
            signing_secret=signing_secret,
            request_verification_enabled=True,
            process_before_response=False,
            listener_executor=executor,
            name="gpu-oncall",
            logger=logging.getLogger("bot.slack.bolt"),
        )
    except BoltError as exc:
        raise UserInputError(
            f"Slack refused the bot token ({exc}); check GPU_ONCALL_SLACK__BOT_TOKEN and "
            "GPU_ONCALL_SLACK__API_URL"
        ) from exc
    except OSError as exc:
        raise UserInputError(
            f"cannot reach Slack at {deps.settings.api_url} ({type(exc).__name__}); check the "
            "network and GPU_ONCALL_SLACK__API_URL"
        ) from exc
    replies, approvals = Replies(deps, messages), Approvals(deps, messages)

    @app.middleware
    def mark_trusted(context: BoltContext, next: Callable[[], BoltResponse]) -> BoltResponse:
        # Global middleware runs after bolt's built-in ones: reaching here means the request
        # passed RequestVerification (HTTP) or came over the app-token socket (Socket Mode).
        context[TRUSTED] = True
        return next()

    register(app, deps=deps, replies=replies, approvals=approvals)
    classify.register(app, deps=deps)  # evidence files shared in incident threads

    @app.error
    def on_error(error: Exception, respond: Respond, context: BoltContext) -> None:
        # An error before verification (a malformed header) must not reply to the
        # request's own response_url: that URL is whatever an unauthenticated caller wrote.
        incident_id: Any = context.get("incident_id") if context is not None else None
        reply = trusted_reply(respond, context)
        report_failure(error, reply=reply, deps=deps, incident_id=incident_id)

    return app


def _secret(value: SecretStr | None, variable: str, needed_for: str) -> str:
    if value is None or not value.get_secret_value():
        raise UserInputError(f"{variable} is not set; {needed_for} needs it (see docs/slack.md)")
    return value.get_secret_value()
