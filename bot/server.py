"""The HTTP server (`gpu-oncall serve`): a WSGI app on the stdlib's threading WSGI server.

Routes: `POST /alerts` (Alertmanager webhook v4), `GET /healthz`, `GET /readyz`, `GET /metrics`,
plus whatever is `mount`ed (Slack's `/slack/events`, the simulated exporters' `/sim/metrics`).
A boundary: an unexpected error becomes a 500 with a reference id and a logged traceback.
An alert is stored before its webhook is answered; triage runs in the background (dispatching).
"""

from __future__ import annotations

import hmac
import json
import logging
import sys
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from bot.config import Settings
from bot.dispatching import TriageWorkers
from bot.incidents.views import incident_view
from bot.intake.alerts import InvalidWebhookError, parse_webhook
from bot.intake.receiving import Received, receive_webhook
from bot.intake.storms import StormPolicy
from bot.metrics import IntakeCounters, render_metrics
from bot.wiring import Runtime
from storage import incidents as incident_store
from storage.db import session_scope
from storage.errors import StorageError

if TYPE_CHECKING:
    from bot.slack.app import SlackBot

logger = logging.getLogger(__name__)

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
JSON = "application/json"
TEXT = "text/plain; version=0.0.4; charset=utf-8"
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            405: "Method Not Allowed", 411: "Length Required", 413: "Payload Too Large",
            500: "Internal Server Error", 503: "Service Unavailable"}  # fmt: skip


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    content_type: str = JSON
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def json(cls, status: int, data: Any, *headers: tuple[str, str]) -> Reply:
        return cls(status, json.dumps(data, default=str).encode(), JSON, tuple(headers))


@dataclass
class OncallApp:
    """The bot's WSGI application. `mount(path, app)` hands a path (and everything below it)
    to another WSGI app, which sees the full path in PATH_INFO (as Bolt's handler expects)."""

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

    def mount(self, path: str, app: WSGIApp) -> None:
        """Serve `path` and everything below it with `app` (e.g. `/slack/events`)."""
        self.mounts["/" + path.strip("/")] = app

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO", "/")) or "/"
        mounted = self._mounted(path)
        try:
            if mounted is not None:
                # Mounted apps answer in one piece (Bolt, the exporters): errors surface here.
                return list(mounted(environ, start_response))
            reply = self._route(str(environ.get("REQUEST_METHOD", "GET")), path, environ)
        except Exception:  # boundary: never a traceback to the caller
            ref = uuid.uuid4().hex[:6]
            logger.exception("unexpected error serving %s (ref %s)", path, ref, extra={"ref": ref})
            reply = Reply.json(500, {"error": f"unexpected error (ref {ref}); see the bot's log"})
            return _send(reply, start_response, exc_info=sys.exc_info())
        return _send(reply, start_response)

    def _mounted(self, path: str) -> WSGIApp | None:
        for prefix in sorted(self.mounts, key=len, reverse=True):
            if path == prefix or path.startswith(prefix + "/"):
                return self.mounts[prefix]
        return None

    def _route(self, method: str, path: str, environ: dict[str, Any]) -> Reply:
        handlers: dict[str, tuple[str, Callable[[dict[str, Any]], Reply]]] = {
            "/alerts": ("POST", self.alerts),
            "/healthz": ("GET", lambda _: Reply.json(200, {"status": "ok"})),
            "/readyz": ("GET", lambda _: self.readyz()),
            "/metrics": ("GET", lambda _: self.metrics()),
        }
        if path not in handlers:
            known = sorted([*handlers, *self.mounts])
            return Reply.json(404, {"error": f"no route '{path}'", "routes": known})
        allowed, handler = handlers[path]
        if method != allowed and not (allowed == "GET" and method == "HEAD"):
            return Reply.json(405, {"error": f"{path} takes {allowed}"}, ("Allow", allowed))
        return handler(environ)

    # -- POST /alerts --------------------------------------------------------------------------
    def alerts(self, environ: dict[str, Any]) -> Reply:
        """Validate, store (dedup, group, route), answer; then queue the triage runs."""
        reply = self._check_token(environ) or self._receive(environ)
        self.counters.webhook(reply.status)
        return reply

    def _check_token(self, environ: dict[str, Any]) -> Reply | None:
        if self._token is None:
            return None
        given = str(environ.get("HTTP_AUTHORIZATION", "")).encode()
        if hmac.compare_digest(given, b"Bearer " + self._token):
            return None
        challenge = ("WWW-Authenticate", 'Bearer realm="gpu-oncall"')
        return Reply.json(401, {"error": "missing or wrong bearer token"}, challenge)

    def _receive(self, environ: dict[str, Any]) -> Reply:
        body = _read_body(environ, limit=self.settings.server.max_body_bytes)
        if isinstance(body, Reply):
            return body
        try:
            webhook = parse_webhook(body)
        except InvalidWebhookError as exc:
            return Reply.json(400, {"error": str(exc), "field": exc.field})
        try:
            with session_scope(self.rt.db) as session:
                received = receive_webhook(
                    session, webhook, routes=self.routes, at=self.rt.clock.now(), storms=self.storms
                )
        except StorageError as exc:
            logger.error("webhook not stored: %s", exc)
            return Reply.json(503, {"error": f"not stored, retry: {exc}"})
        return Reply.json(200, self._after_stored(received))

    def _after_stored(self, received: list[Received]) -> dict[str, Any]:
        count = self.counters
        count.add("alerts_received_total", len(received))
        count.add("alerts_deduplicated_total", sum(r.duplicate for r in received))
        count.add("alerts_unroutable_total", sum(r.unroutable is not None for r in received))
        count.add("alert_storms_total", sum(r.target_kind == "storm" for r in received))
        runs = [r for r in received if r.start_run]
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
        """Ready when the database answers a query and the checkpointer answers a read."""
        problems: dict[str, str] = {}
        try:
            with session_scope(self.rt.db) as session:
                incident_store.count_by_state(session)
        except StorageError as exc:
            problems["database"] = str(exc)
        try:
            self.rt.engine.checkpointer.get_tuple({"configurable": {"thread_id": "readyz"}})
        except Exception as exc:  # boundary: any saver backend's error means "not ready"
            logger.warning("readyz: checkpointer unreachable", exc_info=True)
            problems["checkpointer"] = type(exc).__name__
        if problems:
            return Reply.json(503, {"status": "not ready", "problems": problems})
        return Reply.json(200, {"status": "ready"})

    def metrics(self) -> Reply:
        with session_scope(self.rt.db) as session:
            by_state = incident_store.count_by_state(session)
            rows = incident_store.list_incidents(session, limit=100_000)
            views = [incident_view(row) for row in rows]
        text = render_metrics(self.counters, by_state=by_state, incidents=views)
        return Reply(200, text.encode(), TEXT)


def _send(reply: Reply, start_response: StartResponse, *, exc_info: Any = None) -> list[bytes]:
    headers = [("Content-Type", reply.content_type), ("Content-Length", str(len(reply.body)))]
    status = f"{reply.status} {_REASONS.get(reply.status, '')}"
    start_response(status, headers + list(reply.headers), exc_info)
    return [reply.body]


def _read_body(environ: dict[str, Any], *, limit: int) -> bytes | Reply:
    raw = str(environ.get("CONTENT_LENGTH") or "0")
    length = int(raw) if raw.isdigit() else -1
    if length < 0:
        return Reply.json(411, {"error": "Content-Length required"})
    if length > limit:
        return Reply.json(413, {"error": f"body of {length} bytes exceeds {limit}"})
    data: bytes = environ["wsgi.input"].read(length) if length else b""
    return data


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
    if settings.cluster == "sim":  # the fleet the bot remediates is the one Prometheus scrapes
        from integrations.sim.exporter import ExporterApp

        app.mount("/sim/metrics", ExporterApp(rt.fleet, prefix="/sim"))
    if settings.slack.bot_token is not None:
        from bot.slack.app import EVENTS_PATH, make_slack_bot

        app.slack = make_slack_bot(rt, settings=settings, socket_mode=socket_mode)
        workers.hooks = app.slack
        if not socket_mode:
            app.mount(EVENTS_PATH, app.slack.wsgi_app())
    return app


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    """One thread per request, so a slow client never holds up Alertmanager's webhook."""

    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s " + format, self.address_string(), *args)


class RunningServer:
    """An OncallApp served on a background thread (tests, bench); `stop()` shuts it down."""

    def __init__(self, app: OncallApp, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = app
        self.httpd = make_server(
            host, port, app, server_class=ThreadingWSGIServer, handler_class=_QuietHandler
        )
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> RunningServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self._thread.join()
        self.httpd.server_close()
        self.app.workers.shutdown()
        if self.app.slack is not None:
            self.app.slack.close()


def serve_forever(app: OncallApp, *, host: str, port: int, ready: Callable[[str], None]) -> None:
    """Serve until interrupted (Ctrl-C / SIGTERM -> KeyboardInterrupt); then let queued
    triage finish. `ready` is told the URL once the socket listens."""
    server = RunningServer(app, host=host, port=port)
    ready(server.url)
    try:
        server.httpd.serve_forever()
    finally:
        server.httpd.server_close()
        app.workers.shutdown()
        if app.slack is not None:
            app.slack.close()
