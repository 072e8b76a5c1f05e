"""The HTTP server (`gpu-oncall serve`): the bot's routes on uvicorn (`bot.serving`).

Routes: `POST /alerts` (Alertmanager webhook v4), `GET /healthz`, `GET /readyz`, `GET /metrics`,
plus whatever is `mount`ed as a WSGI app (Slack's `/slack/events`, the simulated exporters'
`/sim/metrics`). Handlers are synchronous and run on the front end's bounded pool, never on the
event loop. A boundary: an unexpected error becomes a 500 with a reference id and a logged
traceback. An alert is stored before its webhook is answered; triage runs in the background.
"""

from __future__ import annotations

import hmac
import logging
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bot.config import Settings
from bot.intake.alerts import InvalidWebhookError, parse_webhook
from bot.intake.counters import IntakeCounters
from bot.intake.receiving import Received, receive_webhook
from bot.intake.storms import StormPolicy
from bot.serving.exchange import Head, Reply, Request
from bot.serving.front import Front, Limits
from bot.serving.listening import HttpServer, Tuning
from bot.serving.metrics import scrape
from bot.serving.pages import IncidentPages, is_page
from bot.serving.wsgi import WSGIApp, call_wsgi
from bot.wiring.runtime import Runtime
from bot.work.dispatching import TriageWorkers
from storage import incidents as incident_store
from storage.db import session_scope
from storage.errors import StorageError

if TYPE_CHECKING:
    from bot.slack.app import SlackBot

logger = logging.getLogger(__name__)

TEXT = "text/plain; version=0.0.4; charset=utf-8"
WEBHOOK = ("POST", "/alerts")


class OutageNotice:
    """One log line when the database goes away (webhooks answered 503 from then on) and one
    when it is back, however many requests fail in between: never a line per request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._down = False

    def failed(self, exc: StorageError) -> None:
        with self._lock:
            if self._down:
                return
            self._down = True
        logger.error("%s; webhooks answered 503 until it is back", one_line(exc))

    def stored(self) -> None:
        with self._lock:
            if not self._down:
                return
            self._down = False
        logger.warning("database is back: webhooks are stored again")


def one_line(exc: BaseException) -> str:
    """An error's message on one line (libpq's messages span several)."""
    return " ".join(str(exc).split())


@dataclass
class OncallApp:
    """The bot's routes. `mount(path, app)` hands a path (and everything below it) to a WSGI
    app, which sees the full path in PATH_INFO (as Bolt's handler expects)."""

    rt: Runtime
    settings: Settings
    counters: IntakeCounters
    workers: TriageWorkers
    mounts: dict[str, WSGIApp] = field(default_factory=dict)
    slack: SlackBot | None = None
    """The Slack app when `slack.bot_token` is set (mounted at `/slack/events` in HTTP mode)."""

    def __post_init__(self) -> None:
        self.routes = self.rt.catalog.alert_routes()
        self.storms = StormPolicy.from_settings(self.settings.intake)
        token = self.settings.server.token
        self._token = token.get_secret_value().encode() if token else None
        self._outage = OutageNotice()
        self.pages = IncidentPages(
            db=self.rt.db,
            settings=self.settings.pages,
            runbooks=self.rt.catalog.names,
            now=self.rt.clock.now,
        )

    def mount(self, path: str, app: WSGIApp) -> None:
        """Serve `path` and everything below it with `app` (e.g. `/slack/events`)."""
        self.mounts["/" + path.strip("/")] = app

    def front(self, pool: Executor) -> Front:
        """The ASGI app serving these routes with `pool` running the handlers."""
        server = self.settings.server
        limits = Limits(
            max_body_bytes=server.max_body_bytes, read_timeout_seconds=server.read_timeout_seconds
        )
        return Front(handle=self.handle, admit=self.admit, limits=limits, pool=pool)

    # -- on the event loop: cheap checks before a body is read ---------------------------------
    def admit(self, head: Head) -> Reply | None:
        """Refuse a webhook before reading its body: 401 without the token, 411 without a
        Content-Length (a chunked body included), as docs/operations.md promises."""
        if (head.method, head.path) != WEBHOOK:
            return None
        reply = self._check_token(head) or _require_length(head)
        if reply is not None:
            self.counters.webhook(reply.status)
        return reply

    def _check_token(self, head: Head) -> Reply | None:
        if self._token is None:
            return None
        scheme, _, credentials = (head.header("authorization") or "").strip().partition(" ")
        given = credentials.strip().encode()
        if scheme.lower() == "bearer" and hmac.compare_digest(given, self._token):
            return None
        challenge = ("WWW-Authenticate", 'Bearer realm="gpu-oncall"')
        return Reply.json(401, {"error": "missing or wrong bearer token"}, challenge, close=True)

    # -- on a pool thread ----------------------------------------------------------------------
    def handle(self, request: Request) -> Reply:
        """Answer one request whose body has been read (the boundary for unexpected errors)."""
        try:
            mounted = self._mounted(request.path)
            if mounted is not None:
                return call_wsgi(mounted, request)
            return self._route(request)
        except Exception:  # boundary: never a traceback to the caller
            ref = uuid.uuid4().hex[:6]
            logger.exception(
                "unexpected error serving %s (ref %s)", request.path, ref, extra={"ref": ref}
            )
            return Reply.json(500, {"error": f"unexpected error (ref {ref}); see the bot's log"})

    def _mounted(self, path: str) -> WSGIApp | None:
        for prefix in sorted(self.mounts, key=len, reverse=True):
            if path == prefix or path.startswith(prefix + "/"):
                return self.mounts[prefix]
        return None

    def _route(self, request: Request) -> Reply:
        handlers: dict[str, tuple[str, Callable[[Request], Reply]]] = {
            "/alerts": ("POST", self.alerts),
            "/healthz": ("GET", lambda _: Reply.json(200, {"status": "ok"})),
            "/readyz": ("GET", lambda _: self.readyz()),
            "/metrics": ("GET", lambda _: self.metrics()),
        }
        path, method = request.path, request.method
        if is_page(path):
            return self.pages.handle(request)
        if path not in handlers:
            known = sorted([*handlers, *self.mounts, "/incidents"])
            return Reply.json(404, {"error": f"no route '{path}'", "routes": known})
        allowed, handler = handlers[path]
        if method != allowed and not (allowed == "GET" and method == "HEAD"):
            return Reply.json(405, {"error": f"{path} takes {allowed}"}, ("Allow", allowed))
        return handler(request)

    # -- POST /alerts --------------------------------------------------------------------------
    def alerts(self, request: Request) -> Reply:
        """Validate, store (dedup, group, route), answer; then queue the triage runs."""
        reply = self._receive(request.body)
        self.counters.webhook(reply.status)
        return reply

    def _receive(self, body: bytes) -> Reply:
        try:
            webhook = parse_webhook(body)
        except InvalidWebhookError as exc:
            return Reply.json(400, {"error": str(exc), "field": exc.field})
        try:
            with session_scope(self.rt.db) as session:
                received = receive_webhook(
                    session, webhook, routes=self.routes, at=self.rt.clock.now(), storms=self.storms
                )
                self.workers.record_triage(session, received)  # durable before the answer
        except StorageError as exc:
            if exc.retryable:  # the database is away: one line per outage, not per webhook
                self._outage.failed(exc)
            else:
                logger.error("webhook not stored: %s", one_line(exc))
            return Reply.json(503, {"error": f"not stored, retry: {one_line(exc)}"})
        self._outage.stored()
        return Reply.json(200, self._after_stored(received))

    def _after_stored(self, received: list[Received]) -> dict[str, Any]:
        count = self.counters
        count.add("alerts_received_total", len(received))
        count.add("alerts_deduplicated_total", sum(r.duplicate for r in received))
        count.add("alerts_unroutable_total", sum(r.unroutable is not None for r in received))
        count.add("alert_storms_total", sum(r.target_kind == "storm" for r in received))
        runs = [r for r in received if r.start_run or r.extends_run]
        queued = [f"INC-{r.incident_id}" for r in runs if self.workers.submit_run(r)]
        for r in received:
            if r.resolved_incident and r.incident_id is not None:
                self.workers.submit_expiry(r.incident_id)
        return {
            "received": len(received),
            "duplicates": sum(r.duplicate for r in received),
            "unroutable": [r.fingerprint for r in received if r.unroutable],
            "incidents": sorted({f"INC-{r.incident_id}" for r in received if r.incident_id}),
            "triage_queued": queued,
        }

    # -- probes and metrics --------------------------------------------------------------------
    def readyz(self) -> Reply:
        """Ready when the database answers a query and the checkpointer answers a read (not
        asked while the database is away: on PostgreSQL it is the same server)."""
        problems: dict[str, str] = {}
        try:
            with session_scope(self.rt.db) as session:
                incident_store.count_by_state(session)
        except StorageError as exc:
            return Reply.json(503, {"status": "not ready", "problems": {"database": one_line(exc)}})
        try:
            self.rt.engine.checkpointer.get_tuple({"configurable": {"thread_id": "readyz"}})
        except Exception as exc:  # noqa: BLE001  (boundary: any saver's error means "not ready")
            name = type(exc).__name__
            logger.warning("readyz: checkpointer unreachable: %s: %s", name, one_line(exc))
            problems["checkpointer"] = type(exc).__name__
        if problems:
            return Reply.json(503, {"status": "not ready", "problems": problems})
        return Reply.json(200, {"status": "ready"})

    def metrics(self) -> Reply:
        text = scrape(self.rt.db, self.counters)
        return Reply(200, text.encode(), TEXT)


def _require_length(head: Head) -> Reply | None:
    if head.header("transfer-encoding") is None and head.header("content-length") is not None:
        return None
    return Reply.json(
        411,
        {"error": "Content-Length required (a chunked or unsized webhook body is refused)"},
        close=True,
    )


def create_app(settings: Settings, rt: Runtime, *, socket_mode: bool = False) -> OncallApp:
    """The app over an open runtime, with its triage workers (sim mode: `/sim/metrics` too).

    With a Slack bot token, the Slack app is built and hooked into triage; in HTTP mode it is
    mounted at `/slack/events`, in Socket Mode it is not mounted (events come over the socket).
    """
    counters = IntakeCounters()
    server = settings.server
    workers = TriageWorkers(
        rt, workers=server.workers, queue_limit=server.queue_limit, counters=counters
    )
    app = OncallApp(rt=rt, settings=settings, counters=counters, workers=workers)
    if rt.fleet is not None:  # sim mode: the fleet the bot works on is the one Prometheus scrapes
        from simulator.exporter import ExporterApp

        app.mount("/sim/metrics", ExporterApp(rt.fleet, prefix="/sim"))
    if settings.slack.bot_token is not None:
        from bot.slack.app import EVENTS_PATH, make_slack_bot

        app.slack = make_slack_bot(rt, settings=settings, socket_mode=socket_mode)
        workers.hooks = app.slack
        if not socket_mode:
            app.mount(EVENTS_PATH, app.slack.wsgi_app())
    return app


class RunningServer:
    """An OncallApp on uvicorn, listening from construction on. `start()` serves on a
    background thread (tests, bench) until `stop()`; `serve()` blocks (`gpu-oncall serve`).
    Either way the end is graceful: stop accepting, finish in-flight requests, then shut the
    handler pool, the triage workers (queued work goes back to the database) and Slack down."""

    def __init__(self, app: OncallApp, *, host: str = "127.0.0.1", port: int = 0) -> None:
        server = app.settings.server
        self.app = app
        self.pool = ThreadPoolExecutor(
            max_workers=server.max_concurrency, thread_name_prefix="http"
        )
        tuning = Tuning(
            backlog=server.backlog,
            keepalive_seconds=server.keepalive_seconds,
            shutdown_grace_seconds=server.shutdown_grace_seconds,
            head_timeout_seconds=server.read_timeout_seconds,
        )
        self.http = HttpServer(app.front(self.pool), host=host, port=port, tuning=tuning)
        self.url = self.http.url
        self._released = False

    def start(self) -> RunningServer:
        self.http.start()
        return self

    def serve(self) -> None:
        """Serve on this (main) thread until SIGTERM/SIGINT; uvicorn re-raises the signal
        after the graceful stop, once everything here has shut down."""
        try:
            self.http.serve()
        finally:
            self._release()

    def stop(self) -> None:
        self.http.stop()
        self._release()

    def _release(self) -> None:
        if self._released:
            return
        self._released = True
        self.http.socket.close()
        self.pool.shutdown(wait=True)
        try:
            self.app.workers.shutdown()
        except StorageError as exc:  # the leases expire and another replica takes the work over
            logger.warning("queued triage not handed back to the database: %s", exc)
        if self.app.slack is not None:
            self.app.slack.close()


def serve_forever(app: OncallApp, *, host: str, port: int, ready: Callable[[str], None]) -> None:
    """Serve until SIGTERM/Ctrl-C (then stop gracefully, see RunningServer). `ready` is told
    the URL once the socket listens."""
    server = RunningServer(app, host=host, port=port)
    ready(server.url)
    server.serve()
